//! The database's ceiling: the SQL the app sends for `GET /api/bookmarks`, captured from
//! Postgres's statement log with its parameters, run by `pgbench -M prepared`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::Command;
use tokio::time::sleep;

use super::setup::Setup;
use crate::postgres::pgbin;
use crate::process::output;

/// The list statement as the app sent it.
pub struct ListSql {
    /// With `$1`, `$2`… as logged.
    pub sql: String,
    /// `(n, value)` of each `$n`.
    pub params: Vec<(u32, String)>,
    /// The log's parameter line, for the record.
    pub shown_params: String,
    /// The pgbench script: the statement with `:pN` for `$N`.
    pub script: PathBuf,
}

/// What one pgbench run measured.
pub struct Pgbench {
    pub tps: f64,
    /// From the per-transaction log, when asked for.
    pub p99_ms: Option<f64>,
}

/// Logs every statement for a moment, sends one list, and reads it back from the log.
pub async fn capture(setup: &Setup) -> Result<ListSql> {
    eprintln!("== capturing the list SQL");
    // ALTER SYSTEM refuses to run inside a transaction, so one statement at a time.
    let set = |sql: &'static str| setup.postgres.execute("postgres", "postgres", sql);
    set("ALTER SYSTEM SET log_statement = 'all'").await?;
    set("SELECT pg_reload_conf()").await?;
    sleep(Duration::from_millis(500)).await;
    setup
        .fetch(&format!("{}/api/bookmarks", setup.app.url))
        .await?;
    sleep(Duration::from_millis(500)).await;
    set("ALTER SYSTEM RESET log_statement").await?;
    set("SELECT pg_reload_conf()").await?;

    let path = setup.postgres_log();
    let log = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let list = find_list(&log).with_context(|| format!("in {}", path.display()))?;
    let script = setup.work.join("list.sql");
    std::fs::write(&script, format!("{};\n", pgbench_variables(&list.sql)))
        .with_context(|| format!("cannot write {}", script.display()))?;
    eprintln!("   {}\n   params: {}", list.sql, list.shown_params);
    Ok(ListSql { script, ..list })
}

/// `LOG:  execute <name>: SELECT … FROM "bookmarks" … ORDER BY "bookmarks"."id" DESC …`
/// followed by `DETAIL:  parameters: $1 = '…', $2 = '…'`: the last such pair.
fn find_list(log: &str) -> Result<ListSql> {
    let lines: Vec<&str> = log.lines().collect();
    let (index, sql) = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, line)| {
            let (_, rest) = line.split_once("LOG:  execute ")?;
            let (name, sql) = rest.split_once(": ")?;
            let list = !name.contains(':')
                && sql.starts_with("SELECT ")
                && sql.contains(r#"FROM "bookmarks""#)
                && sql.contains(r#"ORDER BY "bookmarks"."id" DESC"#);
            list.then(|| (i, sql.to_owned()))
        })
        .context("the list statement was not logged")?;
    let detail = lines.get(index + 1).copied().unwrap_or_default();
    let Some((_, shown)) = detail.split_once("DETAIL:  parameters: ") else {
        bail!("no parameters after the list statement");
    };
    Ok(ListSql {
        sql,
        params: parameters(shown),
        shown_params: shown.to_owned(),
        script: PathBuf::new(),
    })
}

/// `$1 = 'a', $2 = 'it''s'` → `[(1, "a"), (2, "it's")]` (NULLs are left out).
fn parameters(shown: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut rest = shown;
    while let Some(start) = rest.find('$') {
        rest = &rest[start + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(n) = digits.parse() else { continue };
        rest = &rest[digits.len()..];
        let Some(quoted) = rest.strip_prefix(" = '") else {
            continue;
        };
        let mut value = String::new();
        let mut chars = quoted.char_indices().peekable();
        let mut end = quoted.len();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if chars.peek().is_some_and(|(_, next)| *next == '\'') {
                    chars.next();
                } else {
                    end = i + 1;
                    break;
                }
            }
            value.push(c);
        }
        found.push((n, value));
        rest = &quoted[end..];
    }
    found
}

/// `$1` becomes `:p1`, which pgbench -M prepared sends as a parameter again.
fn pgbench_variables(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str(":p");
        } else {
            out.push(c);
        }
    }
    out
}

/// pgbench's knobs of one run.
pub struct Run<'a> {
    pub conns: u32,
    pub threads: u32,
    pub duration: Duration,
    /// Time every transaction (for the p99).
    pub log: bool,
    /// Another tenant than the one captured (the first parameter).
    pub tenant: Option<&'a str>,
}

/// The list SQL under pgbench.
pub async fn run(setup: &Setup, list: &ListSql, knobs: Run<'_>) -> Result<Pgbench> {
    let prefix = setup.work.join("pgbench");
    let mut command = Command::new(pgbin().join("pgbench"));
    command
        .env("PGPASSWORD", "bookmarks")
        .args(["-n", "-M", "prepared"])
        .args([
            "-c",
            &knobs.conns.to_string(),
            "-j",
            &knobs.threads.to_string(),
        ])
        .args(["-T", &knobs.duration.as_secs().max(1).to_string()])
        .arg("-f")
        .arg(&list.script);
    for (n, value) in &list.params {
        let value = match knobs.tenant {
            Some(tenant) if *n == 1 => tenant,
            _ => value,
        };
        command.arg("-D").arg(format!("p{n}={value}"));
    }
    if knobs.log {
        command
            .arg("-l")
            .arg(format!("--log-prefix={}", prefix.display()));
    }
    command.args([
        "-h",
        "127.0.0.1",
        "-p",
        &setup.postgres.port.to_string(),
        "-U",
        "bookmarks",
        "bookmarks_shard",
    ]);
    let text = output(&mut command).await?;
    if !text
        .lines()
        .any(|line| line.starts_with("number of failed transactions: 0 "))
    {
        bail!("pgbench failed:\n{text}");
    }
    let tps = text
        .lines()
        .rev()
        .filter_map(|line| {
            line.strip_prefix("tps = ")?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .next()
        .with_context(|| format!("no tps in pgbench's output:\n{text}"))?;
    let p99_ms = if knobs.log {
        Some(logged_p99(setup)?)
    } else {
        None
    };
    Ok(Pgbench { tps, p99_ms })
}

/// The p99 of the per-transaction logs (third column: the latency in µs); removes them.
fn logged_p99(setup: &Setup) -> Result<f64> {
    let mut latencies: Vec<u64> = Vec::new();
    for entry in std::fs::read_dir(&setup.work)? {
        let path = entry?.path();
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("pgbench."))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        latencies.extend(
            text.lines()
                .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok()),
        );
        std::fs::remove_file(&path)?;
    }
    if latencies.is_empty() {
        bail!("pgbench logged no transaction");
    }
    latencies.sort_unstable();
    let index = ((latencies.len() as f64 * 0.99) as usize).max(1) - 1;
    Ok(latencies[index] as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_list_statement_and_its_parameters_are_read_from_the_log() {
        let log = "2026-12-07 10:00:00.000 UTC [12] LOG:  execute s1: SELECT 1\n\
            2026-12-07 10:00:00.001 UTC [12] LOG:  execute __diesel_stmt_4: SELECT \"bookmarks\".\"id\" \
            FROM \"bookmarks\" WHERE \"bookmarks\".\"tenant_id\" = $1 ORDER BY \"bookmarks\".\"id\" DESC LIMIT $2\n\
            2026-12-07 10:00:00.001 UTC [12] DETAIL:  parameters: $1 = 'tenant-0001', $2 = '21'\n";
        let list = find_list(log).unwrap();
        assert!(list.sql.starts_with("SELECT \"bookmarks\""));
        assert_eq!(
            list.params,
            vec![(1, "tenant-0001".to_owned()), (2, "21".to_owned())]
        );
        assert_eq!(pgbench_variables(&list.sql).matches(":p").count(), 2);
    }

    #[test]
    fn quoted_parameters_keep_their_quotes_and_nulls_are_skipped() {
        assert_eq!(
            parameters("$1 = 'it''s', $2 = NULL, $3 = '$4'"),
            vec![(1, "it's".to_owned()), (3, "$4".to_owned())]
        );
    }
}
