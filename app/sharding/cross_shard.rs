//! `CrossShard`: read-only fan-out over every shard, for tenant-free views (stats, the
//! admin page). Each shard's part runs in a `READ ONLY` transaction, so a write fails at
//! the database whatever the closure tries; the type itself offers no other way in.
//!
//! Every fan-out returns a [`FanOut`]: per shard, the answer or why there is none, which
//! server answered, and for a replica how far behind its primary it was. Callers show
//! that instead of silently presenting a partial or stale picture as the whole.

use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::Double;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures::future::BoxFuture;
use serde::Serialize;

use super::access::{Intent, ShardError, Shards};
use super::row_security::RowScope;

/// A replica further behind than this is reported as stale.
pub const STALE_AFTER: Duration = Duration::from_secs(2);

/// Read-only access to every shard at once.
#[derive(Clone)]
pub struct CrossShard {
    shards: Shards,
    timeout: Duration,
}

/// Which server answered for a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Server {
    Primary,
    Replica,
}

/// One shard's part of a fan-out.
#[derive(Debug)]
pub struct ShardAnswer<T> {
    pub shard: String,
    pub outcome: Result<Answered<T>, ShardError>,
}

/// What a shard that answered said, and how fresh it was.
#[derive(Debug)]
pub struct Answered<T> {
    pub value: T,
    pub server: Server,
    /// For a replica: how far its replay was behind the primary's last commit it received
    /// (zero when it has replayed everything it received).
    pub replica_lag: Option<Duration>,
    pub took: Duration,
}

/// Every shard's part, in the topology's order.
#[derive(Debug)]
pub struct FanOut<T> {
    pub answers: Vec<ShardAnswer<T>>,
}

/// What clients may see of one shard's part (its value aside): the reason for a missing
/// answer is a kind of failure, never the driver's words.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Coverage {
    pub shard: String,
    /// `ok`, `stale` (a replica behind by more than [`STALE_AFTER`]) or `missing`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<Server>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_lag_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub took_ms: u64,
}

impl<T> FanOut<T> {
    /// Per shard: answered or not, from where, how stale.
    pub fn coverage(&self) -> Vec<Coverage> {
        self.answers
            .iter()
            .map(|a| match &a.outcome {
                Ok(ok) => Coverage {
                    shard: a.shard.clone(),
                    status: if ok.replica_lag.is_some_and(|lag| lag > STALE_AFTER) {
                        "stale"
                    } else {
                        "ok"
                    },
                    server: Some(ok.server),
                    replica_lag_ms: ok.replica_lag.map(|l| l.as_millis() as u64),
                    reason: None,
                    took_ms: ok.took.as_millis() as u64,
                },
                Err(e) => Coverage {
                    shard: a.shard.clone(),
                    status: "missing",
                    server: None,
                    replica_lag_ms: None,
                    reason: Some(public_reason(e)),
                    took_ms: 0,
                },
            })
            .collect()
    }

    pub fn into_values(self) -> impl Iterator<Item = (String, T)> {
        self.answers
            .into_iter()
            .filter_map(|a| a.outcome.ok().map(|ok| (a.shard, ok.value)))
    }
}

/// What a client may learn about a shard's failure: its kind, not the server's words.
pub fn public_reason(e: &ShardError) -> String {
    match e {
        // An open circuit is the same failure, remembered: the card shows the circuit.
        ShardError::Unavailable { .. } | ShardError::CircuitOpen { .. } => "unreachable".to_owned(),
        ShardError::Timeout { timeout, .. } => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        ShardError::ReplicaUnavailable { .. } => "replica not ready (fail_readiness)".to_owned(),
        _ => "query failed".to_owned(),
    }
}

#[derive(QueryableByName)]
struct Lag {
    #[diesel(sql_type = Double)]
    lag_ms: f64,
}

/// Replay lag of a hot standby: zero when it has replayed all it received; otherwise the
/// age of the last transaction it replayed. A standby cut off from its primary receives
/// nothing, so its lag keeps growing, which is the truth about how old its data may be.
const LAG_SQL: &str = "SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() \
     THEN 0 ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) * 1000, 0) \
     END::float8 AS lag_ms";

impl CrossShard {
    /// `timeout` bounds each shard's part (checkout and work together).
    pub fn new(shards: Shards, timeout: Duration) -> Self {
        Self { shards, timeout }
    }

    /// Runs `work` on every shard's replica when it is ready (else per `replica_fallback`):
    /// for views that tolerate lag, which each answer reports.
    pub async fn read<T, F>(&self, work: F) -> FanOut<T>
    where
        F: for<'c> Fn(&'c mut AsyncPgConnection) -> BoxFuture<'c, diesel::QueryResult<T>> + Sync,
        T: Send,
    {
        self.fan_out(true, work).await
    }

    /// Runs `work` on every shard's primary: for views that must be exact (where a tenant's
    /// rows are right now).
    pub async fn read_primaries<T, F>(&self, work: F) -> FanOut<T>
    where
        F: for<'c> Fn(&'c mut AsyncPgConnection) -> BoxFuture<'c, diesel::QueryResult<T>> + Sync,
        T: Send,
    {
        self.fan_out(false, work).await
    }

    async fn fan_out<T, F>(&self, replica_aware: bool, work: F) -> FanOut<T>
    where
        F: for<'c> Fn(&'c mut AsyncPgConnection) -> BoxFuture<'c, diesel::QueryResult<T>> + Sync,
        T: Send,
    {
        let work = &work;
        let outcomes = self
            .shards
            .each_shard(
                replica_aware,
                RowScope::ReadEveryTenant,
                self.timeout,
                |mut conn| async move {
                    let started = Instant::now();
                    let on_replica = conn.on_replica;
                    // Within the query deadline: if the fan-out's own timeout drops this part
                    // first, the connection is discarded rather than pooled mid-statement.
                    let outcome = conn
                        .within(Intent::Read, async |c| {
                            let lag = if on_replica {
                                let lag: Lag = diesel::sql_query(LAG_SQL).get_result(c).await?;
                                Some(Duration::from_millis(lag.lag_ms.max(0.0) as u64))
                            } else {
                                None
                            };
                            let value = c
                                .build_transaction()
                                .read_only()
                                .run(async |c| work(c).await)
                                .await?;
                            diesel::QueryResult::Ok((lag, value))
                        })
                        .await?;
                    let (replica_lag, value) = match outcome {
                        Ok(answer) => answer,
                        Err(e) => {
                            let lost = conn.lost_after(&e).await;
                            return Err(ShardError::from_query(
                                conn.name.as_str(),
                                Intent::Read,
                                e,
                                lost,
                            ));
                        }
                    };
                    Ok(Answered {
                        value,
                        server: if on_replica {
                            Server::Replica
                        } else {
                            Server::Primary
                        },
                        replica_lag,
                        took: started.elapsed(),
                    })
                },
            )
            .await;
        let answers = outcomes
            .into_iter()
            .map(|(id, outcome)| {
                let shard = self.shards.set().get(id).name().to_owned();
                if let Err(e) = &outcome {
                    tracing::warn!(shard, error = %e, "cross-shard read: shard missing");
                }
                ShardAnswer { shard, outcome }
            })
            .collect();
        FanOut { answers }
    }
}
