//! The replay poller: one task per shard with a replica, each holding a session on the
//! primary and one on the replica, reads every `replay_poll_ms` how far the primary has
//! written its WAL and how far the replica has replayed it. Every request then decides
//! from [`ReplicaStates`] alone whether the replica may serve it (no query per request).
//!
//! While reads wait on a consistency token, the poller also reads the replica's position
//! at once and then every [`WAITING_POLL`] until none waits: a token read learns of its
//! write's replay within a couple of milliseconds, not a whole `replay_poll_ms` later,
//! and an idle replica is not polled any faster.
//!
//! The lag is measured in time, not bytes: the replica is `lag` behind when the newest
//! primary position it has replayed was read `lag` ago. A replica that has replayed
//! everything the primary had written at the last poll is 0 behind.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use tokio::time::Instant;

use super::replicas::{ReplicaStates, WAITING_POLL};
use super::shard_set::{Shard, ShardId, ShardSet};
use crate::pg::db_url::DbUrl;

const PRIMARY_POSITION: &str = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS lsn";
/// Null (0 here) on a server that is not in recovery: the health checks report that one.
const REPLAYED: &str =
    "SELECT (COALESCE(pg_last_wal_replay_lsn(), '0/0'::pg_lsn) - '0/0'::pg_lsn)::bigint AS lsn";

#[derive(QueryableByName)]
struct Position {
    #[diesel(sql_type = BigInt)]
    lsn: i64,
}

/// Starts a poller for every shard that has a replica.
pub fn spawn_replay_pollers(
    shards: Arc<ShardSet>,
    states: Arc<ReplicaStates>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let ids: Vec<ShardId> = shards
        .iter()
        .filter(|s| s.spec().replica_url.is_some())
        .map(Shard::id)
        .collect();
    ids.into_iter()
        .map(|id| {
            let shards = shards.clone();
            let states = states.clone();
            tokio::spawn(async move { poll_forever(&shards, id, &states).await })
        })
        .collect()
}

/// The primary's positions at recent polls, oldest first, to tell how long ago the
/// primary stood where the replica stands now.
struct History {
    samples: VecDeque<(Instant, u64)>,
    keep: Duration,
}

impl History {
    fn record(&mut self, at: Instant, lsn: u64) {
        self.samples.push_back((at, lsn));
        while let Some(&(t, _)) = self.samples.front() {
            if at.duration_since(t) <= self.keep || self.samples.len() <= 2 {
                break;
            }
            self.samples.pop_front();
        }
    }

    /// How far behind a replica that has replayed `replayed` is, now.
    fn lag(&self, replayed: u64, now: Instant) -> Duration {
        let Some(&(_, latest)) = self.samples.back() else {
            return self.keep;
        };
        if replayed >= latest {
            return Duration::ZERO;
        }
        match self.samples.iter().rev().find(|&&(_, p)| p <= replayed) {
            Some(&(at, _)) => now.duration_since(at),
            // Behind everything remembered: at least as old as the oldest sample.
            None => self
                .samples
                .front()
                .map_or(self.keep, |&(at, _)| now.duration_since(at).max(self.keep)),
        }
    }
}

async fn poll_forever(shards: &ShardSet, id: ShardId, states: &ReplicaStates) {
    let shard = shards.get(id);
    let topology = shards.topology();
    let policy = topology.replica_reads;
    let Some(replica_url) = shard.spec().replica_url.clone() else {
        return;
    };
    let mut history = History {
        samples: VecDeque::new(),
        keep: policy.max_lag + Duration::from_secs(1),
    };
    let mut primary: Option<AsyncPgConnection> = None;
    let mut replica: Option<AsyncPgConnection> = None;
    let bound = topology.query_timeout.max(topology.connect_timeout);
    loop {
        let next = Instant::now() + policy.poll;
        let polled = tokio::time::timeout(bound, async {
            let at = Instant::now();
            let written =
                position(&mut primary, &shard.spec().primary_url, PRIMARY_POSITION).await?;
            history.record(at, written);
            position(&mut replica, &replica_url, REPLAYED).await
        })
        .await;
        match polled {
            Ok(Some(replayed)) => {
                let lag = history.lag(replayed, Instant::now());
                states.polled(id, replayed, Some(lag));
            }
            Ok(None) | Err(_) => {
                // A connection cut off mid-statement is not reused.
                if polled.is_err() {
                    primary = None;
                    replica = None;
                }
                states.polled(id, 0, None);
                // Reconnecting every few ms to a server that is down would only add load.
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        // Until the next full poll: the replica alone, often, while reads wait on it.
        loop {
            if !states.has_waiters(id) {
                tokio::select! {
                    () = tokio::time::sleep_until(next) => break,
                    () = states.waiter_arrived(id) => {}
                }
            }
            if Instant::now() >= next {
                break;
            }
            match tokio::time::timeout(bound, position(&mut replica, &replica_url, REPLAYED)).await
            {
                Ok(Some(replayed)) => {
                    let lag = history.lag(replayed, Instant::now());
                    states.polled(id, replayed, Some(lag));
                }
                Ok(None) => break,
                Err(_) => {
                    replica = None;
                    break;
                }
            }
            if states.has_waiters(id) {
                tokio::time::sleep(WAITING_POLL).await;
            }
        }
    }
}

/// Runs `query` on the session in `conn`, connecting first if there is none; `None` (and
/// no session) if the server could not be reached or answered an error.
async fn position(conn: &mut Option<AsyncPgConnection>, url: &DbUrl, query: &str) -> Option<u64> {
    if conn.is_none() {
        *conn = AsyncPgConnection::establish(url.expose()).await.ok();
    }
    let c = conn.as_mut()?;
    match diesel::sql_query(query).get_result::<Position>(c).await {
        Ok(p) => Some(p.lsn.max(0) as u64),
        Err(_) => {
            *conn = None;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(samples: &[(u64, u64)], now: Instant) -> History {
        History {
            samples: samples
                .iter()
                .map(|&(ago_ms, lsn)| (now - Duration::from_millis(ago_ms), lsn))
                .collect(),
            keep: Duration::from_secs(2),
        }
    }

    #[test]
    fn a_replica_that_replayed_the_latest_primary_position_is_not_behind() {
        let now = Instant::now();
        let h = history(&[(30, 100), (20, 200), (10, 300)], now);
        assert_eq!(h.lag(300, now), Duration::ZERO);
        assert_eq!(h.lag(350, now), Duration::ZERO);
    }

    #[test]
    fn a_replica_is_as_far_behind_as_the_newest_primary_position_it_replayed_is_old() {
        let now = Instant::now();
        let h = history(&[(30, 100), (20, 200), (10, 300)], now);
        assert_eq!(h.lag(250, now), Duration::from_millis(20));
        assert_eq!(h.lag(100, now), Duration::from_millis(30));
    }

    #[test]
    fn a_replica_behind_everything_remembered_is_at_least_the_kept_span_behind() {
        let now = Instant::now();
        let h = history(&[(30, 100), (20, 200)], now);
        assert!(h.lag(50, now) >= Duration::from_secs(2));
    }
}
