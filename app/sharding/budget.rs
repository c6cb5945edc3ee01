//! The connection budget: how many connections one process may open on each Postgres server
//! its topology names, and whether the processes that share those servers fit in what each
//! server allows. Pool sizes multiply across shards and processes; with many shards on one
//! server this, not the load, is what runs out first.

use std::collections::BTreeMap;
use std::time::Duration;

use super::topology::Topology;
use crate::pg::db_url::DbUrl;
use crate::pg::limits::{ServerLimit, connection_limit};

/// The sessions a shard keeps outside its pools: the reindexer leader's lock on its
/// primary; the replay poller's session on its replica, and its other one on the primary.
const PRIMARY_SESSIONS: u32 = 1;
const REPLICA_SESSIONS: u32 = 1;
const REPLAY_SESSION_ON_PRIMARY: u32 = 1;
/// With directory routing: the control database's listener.
const CONTROL_SESSIONS: u32 = 1;
/// Every server: the liveness monitor's one session, however many databases it holds.
const LIVENESS_SESSION: u32 = 1;

/// Connections left free on every server for people and one-shot commands (psql,
/// `bookmarks migrate`, `move_slot`), besides the server's own superuser reserve.
pub const OPERATOR_RESERVE: u32 = 5;

/// One Postgres server's part of the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBudget {
    /// `host:port`.
    pub server: String,
    /// The first URL of the topology that names this server, to ask it with.
    pub url: DbUrl,
    /// What one process may open there at most.
    pub per_process: u32,
    /// What those connections are for, e.g. `shard0 primary 11`.
    pub uses: Vec<String>,
}

/// The budget per server, in the order the topology first names each server.
pub fn per_server(t: &Topology) -> Vec<ServerBudget> {
    let mut order: Vec<String> = Vec::new();
    let mut by_server: BTreeMap<String, ServerBudget> = BTreeMap::new();
    let mut add = |url: &DbUrl, what: String, n: u32| {
        let server = url.server();
        let entry = by_server.entry(server.clone()).or_insert_with(|| {
            order.push(server.clone());
            ServerBudget {
                server,
                url: url.clone(),
                per_process: LIVENESS_SESSION,
                uses: vec![format!("liveness {LIVENESS_SESSION}")],
            }
        });
        entry.per_process += n;
        entry.uses.push(format!("{what} {n}"));
    };
    let control = t.control_pool_size + CONTROL_SESSIONS * u32::from(t.directory_router);
    add(&t.control_url, "control".to_owned(), control);
    for s in &t.shards {
        let replay = REPLAY_SESSION_ON_PRIMARY * u32::from(s.replica_url.is_some());
        add(
            &s.primary_url,
            format!("{} primary", s.name),
            s.primary_pool_size + PRIMARY_SESSIONS + replay,
        );
        if let Some(url) = &s.replica_url {
            add(
                url,
                format!("{} replica", s.name),
                s.replica_pool_size + REPLICA_SESSIONS,
            );
        }
    }
    order
        .into_iter()
        .map(|server| by_server.remove(&server).expect("added above"))
        .collect()
}

/// Every connection one process may open, on all its servers together: the sum of
/// [`per_server`]'s figures. Compare it with the servers' `max_connections` × processes.
pub fn total_max_connections(t: &Topology) -> u32 {
    per_server(t).iter().map(|b| b.per_process).sum()
}

/// What the app's processes may open on a server together.
pub fn available(limit: ServerLimit) -> u32 {
    limit
        .max_connections
        .saturating_sub(limit.superuser_reserved)
        .saturating_sub(OPERATOR_RESERVE)
}

/// A server that cannot hold what `processes` processes may open on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{server}: {processes} processes × {per_process} connections = {total}, but the server \
     allows {available} ({max_connections} max_connections − {superuser_reserved} reserved \
     for superusers − {OPERATOR_RESERVE} for operators); lower the pool sizes, run fewer \
     processes, raise max_connections, or put PgBouncer in front of it"
)]
pub struct OverBudget {
    pub server: String,
    pub processes: u32,
    pub per_process: u32,
    pub total: u32,
    pub available: u32,
    pub max_connections: u32,
    pub superuser_reserved: u32,
}

impl ServerBudget {
    /// Whether `processes` processes fit in `limit`.
    pub fn check(&self, processes: u32, limit: ServerLimit) -> Result<(), OverBudget> {
        let total = self.per_process * processes;
        if total <= available(limit) {
            return Ok(());
        }
        Err(OverBudget {
            server: self.server.clone(),
            processes,
            per_process: self.per_process,
            total,
            available: available(limit),
            max_connections: limit.max_connections,
            superuser_reserved: limit.superuser_reserved,
        })
    }
}

/// What a server said about the budget: the numbers fit, they do not, or it could not be
/// asked (then nothing is known and nothing is refused).
#[derive(Debug)]
pub enum Verdict {
    Fits(ServerLimit),
    Over(OverBudget),
    NotAsked(String),
}

/// Asks every server of `t` its limit, at once, each within `timeout`.
pub async fn check_servers(t: &Topology, timeout: Duration) -> Vec<(ServerBudget, Verdict)> {
    let checks = per_server(t).into_iter().map(|budget| async move {
        let verdict = match connection_limit(&budget.url, timeout).await {
            Ok(limit) => match budget.check(t.processes, limit) {
                Ok(()) => Verdict::Fits(limit),
                Err(over) => Verdict::Over(over),
            },
            Err(e) => Verdict::NotAsked(e.to_string()),
        };
        (budget, verdict)
    });
    futures::future::join_all(checks).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Settings;

    fn topology(extra: &str) -> Topology {
        Settings::from_toml_str(
            &format!(
                r#"
[database]
primary_url = "postgres://u@db1/control"
{extra}
[[database.shards]]
name = "shard0"
primary_url = "postgres://u@db1/s0"
replica_url = "postgres://u@db2/s0"
[[database.shards]]
name = "shard1"
primary_url = "postgres://u@db2:5433/s1"
"#
            ),
            "test",
            Vec::new(),
        )
        .unwrap()
        .topology
    }

    #[test]
    fn each_server_counts_the_pools_and_sessions_that_land_on_it() {
        let t = topology("");
        let budget = per_server(&t);
        let servers: Vec<(&str, u32)> = budget
            .iter()
            .map(|b| (b.server.as_str(), b.per_process))
            .collect();
        // Each server: one liveness session, however many databases it holds.
        // db1: control 8 (no directory routing, so no listener); shard0's primary 8 + the
        // leader's lock + the replay poller's session.
        // db2: shard0's replica 4 + the poller's. db2:5433 is another server: shard1's
        // primary 8 + the leader's lock.
        assert_eq!(
            servers,
            [("db1:5432", 19), ("db2:5432", 6), ("db2:5433", 10)]
        );
        assert_eq!(
            budget.iter().map(|b| b.per_process).sum::<u32>(),
            total_max_connections(&t),
            "the per-server budget and the total disagree"
        );
        assert_eq!(
            budget[0].uses,
            ["liveness 1", "control 8", "shard0 primary 10"]
        );
    }

    #[test]
    fn processes_that_do_not_fit_are_refused_with_the_numbers() {
        let budget = &per_server(&topology(""))[0];
        let limit = ServerLimit {
            max_connections: 100,
            superuser_reserved: 3,
        };
        assert_eq!(budget.check(4, limit), Ok(()));
        let over = budget.check(5, limit).unwrap_err();
        assert_eq!((over.total, over.available), (95, 92));
        assert!(
            over.to_string()
                .contains("5 processes × 19 connections = 95"),
            "{over}"
        );
    }
}
