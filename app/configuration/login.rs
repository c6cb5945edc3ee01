//! `[database] user` and `password_file`: one login for every URL of the topology. Each
//! process of a deployment gets its own login (the web servers', the mover's, the
//! migrator's) without repeating every URL, and its password as a file (a mounted secret)
//! rather than in the configuration or an environment variable.

use std::path::Path;

use super::raw::RawDatabase;
use crate::pg::db_url::DbUrl;

/// The login every URL is given, where configured.
pub struct Login {
    user: Option<String>,
    password: Option<String>,
}

impl Login {
    /// Reads `[database] user` and the password file; what cannot be used is a problem
    /// that names the setting.
    pub fn read(db: &RawDatabase, problems: &mut Vec<String>) -> Self {
        let user = match db.user.as_deref().map(str::trim) {
            Some("") => {
                problems.push("[database] user is empty".to_owned());
                None
            }
            other => other.map(str::to_owned),
        };
        let password =
            db.password_file
                .as_deref()
                .and_then(|path| match password_from(Path::new(path)) {
                    Ok(password) => Some(password),
                    Err(why) => {
                        problems.push(format!("[database] password_file {path:?}: {why}"));
                        None
                    }
                });
        Self { user, password }
    }

    /// `url` with the configured user and password in place of its own; a URL that still
    /// names no user is a problem, since the server would be asked for a login nobody chose.
    pub fn apply(&self, what: &str, url: DbUrl, problems: &mut Vec<String>) -> DbUrl {
        let url = url.with_login(self.user.as_deref(), self.password.as_deref());
        if url.user().is_empty() {
            problems.push(format!(
                "{what} names no user: put one in the URL or set [database] user"
            ));
        }
        url
    }
}

/// Why a password file gives no password.
#[derive(Debug, thiserror::Error)]
enum PasswordFileError {
    #[error("cannot be read: {0}")]
    Unreadable(#[from] std::io::Error),
    #[error("is empty")]
    Empty,
}

/// The file's first line: a secret written by `echo` or a generator keeps its newline.
fn password_from(path: &Path) -> Result<String, PasswordFileError> {
    let text = std::fs::read_to_string(path)?;
    match text.lines().next() {
        Some(password) if !password.is_empty() => Ok(password.to_owned()),
        _ => Err(PasswordFileError::Empty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(user: Option<&str>, password_file: Option<&Path>) -> RawDatabase {
        RawDatabase {
            user: user.map(str::to_owned),
            password_file: password_file.map(|p| p.display().to_string()),
            ..RawDatabase::default()
        }
    }

    fn url(raw: &str) -> DbUrl {
        DbUrl::parse(raw).unwrap()
    }

    #[test]
    fn the_configured_login_replaces_the_urls_own_and_its_password_never_prints() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret/with:odd@chars\n").unwrap();
        let mut problems = Vec::new();
        let login = Login::read(&raw(Some("bookmarks_web"), Some(&file)), &mut problems);
        let applied = login.apply(
            "[database] primary_url",
            url("postgres://old:old@db:5432/control"),
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(applied.user(), "bookmarks_web");
        let config: tokio_postgres::Config = applied.expose().parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"s3cret/with:odd@chars"[..]));
        assert_eq!(
            applied.to_string(),
            "postgres://bookmarks_web:***@db:5432/control"
        );
    }

    #[test]
    fn without_a_configured_login_the_url_keeps_its_own() {
        let mut problems = Vec::new();
        let login = Login::read(&raw(None, None), &mut problems);
        let applied = login.apply("x", url("postgres://app:pw@db/control"), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(applied.expose(), "postgres://app:pw@db/control");
    }

    #[test]
    fn a_missing_or_empty_password_file_and_a_url_without_a_user_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let mut problems = Vec::new();
        Login::read(&raw(None, Some(&dir.path().join("absent"))), &mut problems);
        Login::read(&raw(Some(" "), Some(&empty)), &mut problems).apply(
            "[database] primary_url",
            url("postgres://db/control"),
            &mut problems,
        );
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            problems[0].starts_with("[database] password_file")
                && problems[0].contains("cannot be read")
        );
        assert_eq!(problems[1], "[database] user is empty");
        assert!(problems[2].ends_with("is empty"), "{problems:?}");
        assert!(problems[3].starts_with("[database] primary_url names no user"));
    }
}
