//! `Shards`: the explicit API for reaching shards — route a key, check out a connection on
//! its primary or a replica-aware read connection, address a shard by name, or fan out
//! over every shard. Request extractors and background jobs both go through it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use futures::StreamExt;

use super::consistency::{Need, ReadFrom, Server, Why};
use super::move_wait::MoveWaits;
use super::replicas::ReplicaStates;
use super::router::{Route, ShardRouter};
use super::row_security::RowScope;
use super::shard_name::ShardName;
use super::shard_set::{Shard, ShardId, ShardSet};
use super::slot::ShardKey;
use super::topology::ReplicaFallback;
use crate::pg::breaker::{Breaker, Role};
use crate::pg::deadline::{CutOff, DeadlineConn};
use crate::pg::pool::PgConn;

pub use super::shard_error::{Intent, ShardError};

/// How many shards a fan-out talks to at once.
const FAN_OUT_LIMIT: usize = 8;

/// A connection checked out of one shard, with the shard's name for errors and labels.
///
/// Statements run through [`ShardConn::within`] get the shard's query deadline; a
/// connection whose statement was cut off is discarded, never pooled ([`DeadlineConn`]).
pub struct ShardConn {
    conn: DeadlineConn,
    pub shard: ShardId,
    pub name: ShardName,
    /// True when this read connection is on the replica rather than the primary.
    pub on_replica: bool,
    /// The checkout's [`RowScope`] declaration, until it is sent: with the first statement,
    /// in the same deadline, so that a silent server costs one deadline, not two.
    declare: Option<String>,
}

impl ShardConn {
    /// `breaker` is that of the server `conn` came from; `scope` is declared before the
    /// first statement.
    fn new(conn: PgConn, shard: &Shard, breaker: &Arc<Breaker>, scope: RowScope<'_>) -> Self {
        Self {
            conn: DeadlineConn::new(conn, Arc::clone(breaker), shard.query_timeout()),
            shard: shard.id(),
            name: shard.spec().name.clone(),
            on_replica: breaker.role() == Role::Replica,
            declare: Some(scope.statement()),
        }
    }

    /// The connection with its scope declared, without a deadline after that: for
    /// background work whose statements are bounded by their own batch sizes, not by a
    /// request.
    pub async fn raw(&mut self) -> Result<&mut AsyncPgConnection, ShardError> {
        self.within(Intent::Read, async |_| Ok::<_, ShardError>(()))
            .await??;
        Ok(self.conn.raw())
    }

    /// After a statement failed with `e`: whether the connection died with it (a server
    /// shutting down or crashing cuts its statements with an error, then closes). Asked
    /// only for errors that do not say so themselves; the connection's own state tells,
    /// else a trivial statement (the close may still be on its way).
    pub async fn lost_after(&mut self, e: &diesel::result::Error) -> bool {
        use diesel::result::{DatabaseErrorKind, Error};
        use diesel_async::pooled_connection::PoolableConnection;
        if !matches!(e, Error::DatabaseError(DatabaseErrorKind::Unknown, _)) {
            return false;
        }
        if self.conn.raw().is_broken() {
            return true;
        }
        let probe = self
            .conn
            .within(async |c| c.batch_execute("SELECT 1").await);
        !matches!(probe.await, Ok(Ok(())))
    }

    /// Closes the connection instead of returning it to the pool: for one left inside a
    /// transaction that nobody will end.
    pub fn discard(self) {
        self.conn.discard();
    }

    /// Runs `work` within the shard's query deadline. If the deadline passes (now, or for
    /// an earlier statement on this connection), the error says whether a write's outcome
    /// is unknown.
    pub async fn within<T, E>(
        &mut self,
        intent: Intent,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E>,
    ) -> Result<Result<T, E>, ShardError> {
        let declare = self.declare.take();
        let outcome = self
            .conn
            .within_pooled(async |c| {
                if let Some(sql) = &declare {
                    c.settle(sql).await?;
                }
                Ok(work(c).await)
            })
            .await
            .map_err(|CutOff| {
                let shard = self.name.as_str().to_owned();
                let timeout = self.conn.deadline();
                match intent {
                    Intent::Read => ShardError::Timeout { shard, timeout },
                    Intent::Write => ShardError::WriteOutcomeUnknown { shard },
                }
            })?;
        match outcome {
            Ok(done) => Ok(done),
            Err(refused) => {
                // Not declared: nothing may run on this connection before it is.
                self.declare = declare;
                let lost = self.lost_after(&refused).await;
                Err(ShardError::from_query(
                    self.name.as_str(),
                    Intent::Read,
                    refused,
                    lost,
                ))
            }
        }
    }
}

/// Routing plus pools plus replica readiness: everything needed to reach a shard. One
/// `Arc`: every request that reaches a shard holds a clone.
#[derive(Clone)]
pub struct Shards(Arc<Reach>);

struct Reach {
    set: Arc<ShardSet>,
    router: Arc<dyn ShardRouter>,
    replicas: Arc<ReplicaStates>,
    waits: MoveWaits,
}

impl Shards {
    pub fn new(
        set: Arc<ShardSet>,
        router: Arc<dyn ShardRouter>,
        replicas: Arc<ReplicaStates>,
    ) -> Self {
        let waits = MoveWaits::new(set.topology().move_wait);
        Self(Arc::new(Reach {
            set,
            router,
            replicas,
            waits,
        }))
    }

    /// How this process's writes wait out moves' fences.
    pub fn move_waits(&self) -> &MoveWaits {
        &self.0.waits
    }

    pub fn set(&self) -> &ShardSet {
        &self.0.set
    }

    pub fn replicas(&self) -> &ReplicaStates {
        &self.0.replicas
    }

    /// Shared handles, for background tasks that outlive a request.
    pub fn shared(&self) -> (Arc<ShardSet>, Arc<ReplicaStates>) {
        (Arc::clone(&self.0.set), Arc::clone(&self.0.replicas))
    }

    /// Forgets what the router remembers about `key` and reloads the slot map soon (a
    /// shard said the tenant, or its slot, moved), so the next request routes afresh.
    pub fn forget(&self, key: &str) {
        self.0.router.forget(key);
        self.0.set.slot_map().request_reload();
    }

    /// Which shard serves `key`, by the installed router.
    pub async fn route<'a>(&'a self, key: impl Into<ShardKey<'a>>) -> Result<Route, ShardError> {
        Ok(self.0.router.route(key.into(), &self.0.set).await?)
    }

    /// A connection to a shard's primary by name, declared for `scope` (jobs that work a
    /// whole shard).
    pub async fn db_on(&self, name: &str, scope: RowScope<'_>) -> Result<ShardConn, ShardError> {
        let shard = self
            .0
            .set
            .by_name(name)
            .ok_or_else(|| ShardError::UnknownShard(name.to_owned()))?;
        self.primary(shard, scope).await
    }

    /// A connection to `shard`'s primary, declared for `scope`.
    pub async fn primary(
        &self,
        shard: &Shard,
        scope: RowScope<'_>,
    ) -> Result<ShardConn, ShardError> {
        let breaker = shard.primary_breaker();
        if breaker.is_open() {
            return Err(ShardError::CircuitOpen {
                shard: shard.name().to_owned(),
                role: "primary",
            });
        }
        match breaker.checkout(shard.primary_pool()).await {
            Ok(conn) => Ok(ShardConn::new(conn, shard, breaker, scope)),
            Err(source) => Err(ShardError::Unavailable {
                shard: shard.name().to_owned(),
                source,
            }),
        }
    }

    /// The replica-aware read path for one shard, declared for `scope`.
    pub async fn read(&self, shard: &Shard, scope: RowScope<'_>) -> Result<ShardConn, ShardError> {
        if let (Some(pool), Some(breaker)) = (shard.replica_pool(), shard.replica_breaker()) {
            if self.0.replicas.is_ready(shard.id()) && !breaker.is_open() {
                match breaker.checkout(pool).await {
                    Ok(conn) => return Ok(ShardConn::new(conn, shard, breaker, scope)),
                    Err(e) => self
                        .0
                        .replicas
                        .mark_unready(shard, &format!("checkout failed: {e}")),
                }
            }
            if shard.replica_fallback() == ReplicaFallback::FailReadiness {
                return Err(ShardError::ReplicaUnavailable {
                    shard: shard.name().to_owned(),
                });
            }
        }
        self.primary(shard, scope).await
    }

    /// A tenant read's checkout: the replica when it is ready, within the lag bound, and has
    /// replayed what `need` says (waiting up to `ryow_wait_ms` for a token), else the
    /// primary; with where it went and why. A replica whose checkout fails falls back as
    /// [`Self::read`] does.
    pub async fn read_for(
        &self,
        shard: &Shard,
        need: Need,
        scope: RowScope<'_>,
    ) -> Result<(ShardConn, ReadFrom), ShardError> {
        let replicas = &self.0.replicas;
        let id = shard.id();
        let went = match self.replica_for(shard, need).await {
            Ok(()) => {
                let (Some(pool), Some(breaker)) = (shard.replica_pool(), shard.replica_breaker())
                else {
                    unreachable!("replica_for said the shard has a replica");
                };
                match breaker.checkout(pool).await {
                    Ok(conn) => {
                        replicas.count_read(id, true);
                        let why = match need {
                            Need::Token(_) => Why::Token,
                            _ => Why::Lag,
                        };
                        let lag = (why == Why::Lag).then(|| replicas.lag(id)).flatten();
                        let from = ReadFrom {
                            server: Server::Replica,
                            why,
                            lag,
                        };
                        return Ok((ShardConn::new(conn, shard, breaker, scope), from));
                    }
                    Err(e) => {
                        replicas.mark_unready(shard, &format!("checkout failed: {e}"));
                        Why::NoReplica
                    }
                }
            }
            Err(why) => why,
        };
        if why_fails_readiness(shard, went) {
            return Err(ShardError::ReplicaUnavailable {
                shard: shard.name().to_owned(),
            });
        }
        replicas.count_read(id, false);
        Ok((self.primary(shard, scope).await?, ReadFrom::primary(went)))
    }

    /// Whether the replica may serve a read that needs `need`, or why not.
    async fn replica_for(&self, shard: &Shard, need: Need) -> Result<(), Why> {
        let replicas = &self.0.replicas;
        let id = shard.id();
        let policy = self.0.set.topology().replica_reads;
        let usable = shard.replica_pool().is_some()
            && replicas.is_ready(id)
            && !shard.replica_breaker().is_some_and(|b| b.is_open());
        if !usable {
            return Err(Why::NoReplica);
        }
        let within_lag = replicas.lag(id).is_some_and(|lag| lag <= policy.max_lag);
        match need {
            Need::Primary => {
                replicas.count_token_fallback(id);
                Err(Why::Token)
            }
            Need::Floor(_) if !policy.without_token => Err(Why::NoToken),
            Need::Floor(floor) => {
                if within_lag && replicas.replayed(id) >= floor {
                    Ok(())
                } else {
                    Err(Why::Lag)
                }
            }
            Need::Token(_) if !within_lag => Err(Why::Lag),
            Need::Token(lsn) => {
                if replicas.replayed(id) >= lsn {
                    return Ok(());
                }
                let met = replicas.wait_for(id, lsn, policy.ryow_wait).await;
                replicas.count_token_wait(id, met);
                if met { Ok(()) } else { Err(Why::Token) }
            }
        }
    }

    /// Runs `work` on every shard concurrently (at most `FAN_OUT_LIMIT` at once), each
    /// bounded by `timeout`, and returns every shard's outcome in declaration order. One
    /// failing shard never hides the others' answers. `read` picks the replica-aware path.
    pub async fn each_shard<T, F, Fut>(
        &self,
        read: bool,
        scope: RowScope<'static>,
        timeout: Duration,
        work: F,
    ) -> Vec<(ShardId, Result<T, ShardError>)>
    where
        F: Fn(ShardConn) -> Fut,
        Fut: Future<Output = Result<T, ShardError>>,
    {
        let work = &work;
        let shards: Vec<&Shard> = self.0.set.iter().collect();
        let shards = &shards;
        // Indices, not `&Shard`s, flow through the stream: a closure taking a borrowed
        // argument would have to be higher-ranked, which async blocks cannot express.
        futures::stream::iter(0..shards.len())
            .map(|i| async move {
                let shard = shards[i];
                let attempt = async {
                    let conn = if read {
                        self.read(shard, scope).await?
                    } else {
                        self.primary(shard, scope).await?
                    };
                    work(conn).await
                };
                let outcome = tokio::time::timeout(timeout, attempt)
                    .await
                    .unwrap_or_else(|_| {
                        Err(ShardError::Timeout {
                            shard: shard.name().to_owned(),
                            timeout,
                        })
                    });
                (shard.id(), outcome)
            })
            .buffered(FAN_OUT_LIMIT)
            .collect()
            .await
    }
}

/// A shard whose `replica_fallback` is `fail_readiness` refuses reads its replica cannot
/// serve because it is unusable (not for lag or a token: those the primary serves).
fn why_fails_readiness(shard: &Shard, why: Why) -> bool {
    why == Why::NoReplica
        && shard.replica_pool().is_some()
        && shard.replica_fallback() == ReplicaFallback::FailReadiness
}
