//! Where a server's secrets come from: given in its environment, or generated once per
//! deployment by the control migrations and read from the control database, so that a fresh
//! stack has secrets of its own and none is published in the repository.

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

/// The value that asks for the control database's generated secret
/// (`ADMIN_TOKEN=generated`, `SESSION_SECRET=generated`).
pub const GENERATED: &str = "generated";

/// A secret as configured.
#[derive(Debug, Clone, Default)]
pub enum Secret<T> {
    /// None given; what that means is the secret's own (no admin page; a session key of the
    /// process's own).
    #[default]
    Unset,
    /// Given in the environment, and checked.
    Given(T),
    /// The one the control migrations generated for this deployment.
    Generated,
}

impl<T> Secret<T> {
    /// `""` is unset, [`GENERATED`] asks for the generated one, anything else is given and
    /// parsed by `parse`.
    pub fn from_env_value<E>(
        raw: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Self, E> {
        Ok(match raw {
            "" => Secret::Unset,
            GENERATED => Secret::Generated,
            given => Secret::Given(parse(given)?),
        })
    }
}

/// The names the control migrations generate secrets under.
#[derive(Debug, Clone, Copy)]
pub enum GeneratedSecret {
    AdminToken,
    SessionSecret,
}

impl GeneratedSecret {
    fn name(self) -> &'static str {
        match self {
            GeneratedSecret::AdminToken => "admin_token",
            GeneratedSecret::SessionSecret => "session_secret",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GeneratedSecretError {
    #[error(
        "the control database holds no generated {0}: run `bookmarks migrate` (it creates \
         the deployment's secrets), or give the value in the environment"
    )]
    Missing(&'static str),
    #[error("cannot read the generated {0} from the control database: {1}")]
    Query(&'static str, #[source] diesel::result::Error),
}

#[derive(QueryableByName)]
struct Made {
    #[diesel(sql_type = Bool)]
    made: bool,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    value: String,
}

/// The deployment's generated `secret`, from the control database.
pub async fn generated(
    control: &mut AsyncPgConnection,
    secret: GeneratedSecret,
) -> Result<String, GeneratedSecretError> {
    let name = secret.name();
    let query = |e| GeneratedSecretError::Query(name, e);
    // The table is made by a control migration: asked first, so that an unmigrated
    // database is told apart by what it has, not by an error message's wording.
    let made: Made = diesel::sql_query("SELECT to_regclass('_autumn_secrets') IS NOT NULL AS made")
        .get_result(control)
        .await
        .map_err(query)?;
    if !made.made {
        return Err(GeneratedSecretError::Missing(name));
    }
    let rows: Vec<Row> = diesel::sql_query("SELECT value FROM _autumn_secrets WHERE name = $1")
        .bind::<Text, _>(name)
        .load(control)
        .await
        .map_err(query)?;
    rows.into_iter()
        .next()
        .map(|r| r.value)
        .ok_or(GeneratedSecretError::Missing(name))
}
