//! Live health probes for a database target: can we query it, is it the role we expect
//! (primary or replica in recovery), and has it applied exactly the migrations this build
//! embeds? A replica that lags a migration is as unsafe to read as a dead one.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};
use diesel_async::RunQueryDsl;

use super::pool::PgPool;
use super::replicas::ReplicaStates;
use super::shard_set::{Shard, ShardSet};

/// The outcome of probing one database.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    pub up: bool,
    pub detail: String,
}

impl Probe {
    fn down(detail: impl Into<String>) -> Self {
        Self {
            up: false,
            detail: detail.into(),
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
}

/// Probes a target. `expect_replica` checks that it is (or is not) in recovery;
/// `expected` are the migration versions this build embeds.
pub async fn probe(
    pool: &PgPool,
    expect_replica: bool,
    expected: &BTreeSet<String>,
    timeout: Duration,
) -> Probe {
    match tokio::time::timeout(timeout, probe_inner(pool, expect_replica, expected)).await {
        Ok(probe) => probe,
        Err(_) => Probe::down(format!("no answer within {timeout:?}")),
    }
}

async fn probe_inner(pool: &PgPool, expect_replica: bool, expected: &BTreeSet<String>) -> Probe {
    let mut conn = match pool.get().await {
        Ok(c) => c,
        Err(e) => {
            // Details are served to anyone who can reach /ready: say what kind of failure
            // it was, and keep the driver's words for the log.
            tracing::debug!(error = %e, "health probe: cannot connect");
            return Probe::down("unreachable");
        }
    };
    let recovery: Result<RecoveryRow, _> =
        diesel::sql_query("SELECT pg_is_in_recovery() AS in_recovery")
            .get_result(&mut conn)
            .await;
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
            .load(&mut conn)
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
        Probe::down(format!(
            "{unknown} applied migration(s) unknown to this build (newer schema)"
        ))
    } else {
        Probe {
            up: true,
            detail: format!("up, {} migration(s) applied", applied.len()),
        }
    }
}

/// What a probe says about a server whose breaker is open: it is known to be unreachable
/// (refusing, or silent), and saying so at once keeps readiness fast during a partition;
/// the breaker's own recovery task finds out when it answers again. The same word as a
/// failed probe's, so that the two read alike; the circuit's state is reported beside it.
const CIRCUIT_OPEN: &str = "unreachable";

/// Probes a shard's primary, unless its breaker already says it is silent.
pub async fn probe_primary(shard: &Shard, expected: &BTreeSet<String>, timeout: Duration) -> Probe {
    if shard.primary_breaker().is_open() {
        return Probe::down(CIRCUIT_OPEN);
    }
    probe(shard.primary_pool(), false, expected, timeout).await
}

/// Probes a shard's replica, if it has one, and records the result for the read path.
pub async fn check_replica(
    shard: &Shard,
    states: &ReplicaStates,
    expected: &BTreeSet<String>,
    timeout: Duration,
) -> Option<Probe> {
    let pool = shard.replica_pool()?;
    let p = if shard.replica_breaker().is_some_and(|b| b.is_open()) {
        Probe::down(CIRCUIT_OPEN)
    } else {
        probe(pool, true, expected, timeout).await
    };
    if p.up {
        states.mark_ready(shard);
    } else {
        states.mark_unready(shard, &p.detail);
    }
    Some(p)
}

/// Probes every replica once and records the results for the read path.
pub async fn refresh_replicas(
    shards: &ShardSet,
    states: &ReplicaStates,
    expected: &BTreeSet<String>,
    timeout: Duration,
) {
    let checks = shards
        .iter()
        .map(|shard| check_replica(shard, states, expected, timeout));
    futures::future::join_all(checks).await;
}

/// Keeps replica readiness fresh between readiness probes, so reads move back to a replica
/// that recovered (and off one that failed) without waiting for an orchestrator's probe.
pub fn spawn_replica_monitor(
    shards: Arc<ShardSet>,
    states: Arc<ReplicaStates>,
    expected: Arc<BTreeSet<String>>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            refresh_replicas(&shards, &states, &expected, every).await;
        }
    })
}
