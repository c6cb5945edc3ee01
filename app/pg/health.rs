//! Live health probes for one database server: can we query it, is it the role we expect
//! (primary or replica in recovery), and has it applied exactly the migrations this build
//! embeds? A replica that lags a migration is as unsafe to read as a dead one.

use std::collections::BTreeSet;
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};
use diesel_async::RunQueryDsl;

use super::pool::{AfterCheck, PgConn, PgPool};
use super::roles::PRIVILEGED;

/// The outcome of probing one database.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    pub up: bool,
    pub detail: String,
    /// Down only because the server has applied migrations this build does not know: a
    /// newer release's, as while a rolling update replaces this one. Its schema still
    /// serves this build (migrations add before anything stops using what they remove).
    #[serde(skip)]
    pub newer_schema: bool,
}

impl Probe {
    pub fn down(detail: impl Into<String>) -> Self {
        Self {
            up: false,
            detail: detail.into(),
            newer_schema: false,
        }
    }
}

#[derive(QueryableByName)]
struct VersionRow {
    #[diesel(sql_type = Text)]
    version: String,
}

#[derive(QueryableByName)]
struct RecoveryRow {
    #[diesel(sql_type = Bool)]
    in_recovery: bool,
    /// The role the pool's connections act as (which may not be the login's).
    #[diesel(sql_type = Text)]
    acting_as: String,
    #[diesel(sql_type = Bool)]
    privileged: bool,
}

/// Probes a target. `expect_replica` checks that it is (or is not) in recovery;
/// `expected` are the migration versions this build embeds; `prelude`, if given, runs
/// first on the checked-out connection (a shard's probe acts as the role requests do);
/// `after` says whether the connection goes back to the pool.
pub async fn probe(
    pool: &PgPool,
    expect_replica: bool,
    expected: &BTreeSet<String>,
    timeout: Duration,
    prelude: Option<&str>,
    after: AfterCheck,
) -> Probe {
    let checks = async {
        let mut conn = match pool.get().await {
            Ok(c) => c,
            Err(e) => {
                // Details are served to anyone who can reach /ready: say what kind of
                // failure it was, and keep the driver's words for the log.
                tracing::debug!(error = %e, "health probe: cannot connect");
                return Probe::down("unreachable");
            }
        };
        let probe = probe_inner(&mut conn, expect_replica, expected, prelude).await;
        after.done_with(conn);
        probe
    };
    match tokio::time::timeout(timeout, checks).await {
        Ok(probe) => probe,
        Err(_) => Probe::down(format!("no answer within {timeout:?}")),
    }
}

async fn probe_inner(
    conn: &mut PgConn,
    expect_replica: bool,
    expected: &BTreeSet<String>,
    prelude: Option<&str>,
) -> Probe {
    if let Some(sql) = prelude
        && let Err(e) = conn.settle(sql).await
    {
        tracing::debug!(error = %e, "health probe: prelude failed");
        return Probe::down("query failed");
    }
    let recovery: Result<RecoveryRow, _> = diesel::sql_query(format!(
        "SELECT pg_is_in_recovery() AS in_recovery, current_user::text AS acting_as, \
         {PRIVILEGED} AS privileged"
    ))
    .get_result(conn)
    .await;
    let acting = match &recovery {
        Ok(r) if r.privileged => format!(
            "acting as {} (a superuser, or exempt from row-level security)",
            r.acting_as
        ),
        Ok(r) => format!("acting as {}", r.acting_as),
        Err(_) => String::new(),
    };
    match recovery {
        Ok(r) if r.in_recovery != expect_replica => {
            let role = if r.in_recovery {
                "a replica"
            } else {
                "a primary"
            };
            return Probe::down(format!(
                "the server is {role}, which is not what is configured"
            ));
        }
        Ok(_) => {}
        Err(e) => {
            tracing::debug!(error = %e, "health probe: query failed");
            return Probe::down("query failed");
        }
    }
    let applied: Result<Vec<VersionRow>, _> =
        diesel::sql_query("SELECT version FROM __diesel_schema_migrations")
            .load(conn)
            .await;
    let applied: BTreeSet<String> = match applied {
        Ok(rows) => rows.into_iter().map(|r| r.version).collect(),
        Err(_) => BTreeSet::new(),
    };
    let pending = expected.difference(&applied).count();
    let unknown = applied.difference(expected).count();
    if pending > 0 {
        Probe::down(format!(
            "{pending} migration(s) pending: run `bookmarks migrate`"
        ))
    } else if unknown > 0 {
        Probe {
            newer_schema: true,
            ..Probe::down(format!(
                "{unknown} applied migration(s) unknown to this build (newer schema)"
            ))
        }
    } else {
        Probe {
            up: true,
            detail: format!("up, {} migration(s) applied, {acting}", applied.len()),
            newer_schema: false,
        }
    }
}
