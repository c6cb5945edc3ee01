//! A tenant's session with its shard: how every statement of one tenant reaches the shard
//! that holds it, whoever sends it (an HTTP handler, a job, the admin page).
//!
//! The session is routed when it is made and checks a connection out only when its first
//! statement runs. Statements run under the shard's query deadline. A database error is
//! classified here, once for every caller: a lost connection, a tenant fenced by a move
//! (the write waits for the fence to lift, then goes where the tenant routes by then), a
//! tenant that departed (the write follows it to the shard the refusal names, and a stale
//! route is forgotten). What the work's own error type says stays the caller's.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures::future::BoxFuture;

use super::access::{Intent, ShardConn, ShardError, Shards};
use super::consistency::{ConsistencyToken, ReadFrom, need};
use super::row_security::RowScope;
use super::shard_name::ShardName;
use super::shard_set::ShardId;

/// A session on the tenant's shard. `M` says which server: [`Primary`] or
/// [`ReplicaAware`]. There are no cross-shard transactions: a transaction opened inside a
/// statement's work runs on this one shard.
pub struct TenantSession<M> {
    /// Checked out on first use.
    inner: Option<ShardConn>,
    shard: ShardId,
    name: ShardName,
    /// To check out, and to forget the tenant's route when its shard says it has moved.
    shards: Shards,
    /// The tenant's routing key.
    tenant: Box<str>,
    /// Told which shard serves the session and how long a write waited (a request's
    /// facts); none outside a request.
    observer: Option<Arc<dyn SessionObserver>>,
    /// A snapshot's transaction is open on `inner` (see `begin_snapshot`).
    snapshot: bool,
    /// The consistency token the client brought back: what a replica read must show.
    after: Option<ConsistencyToken>,
    mode: PhantomData<M>,
}

/// Who wants to know where a session's statements went: the HTTP layer labels its logs,
/// metrics and `X-Shard` header with it.
pub trait SessionObserver: Send + Sync {
    /// The session's statements go to `shard` from now on.
    fn serving(&self, shard: &ShardName);
    /// A write waited `waited` for a move's fence to lift.
    fn waited(&self, waited: Duration);
    /// A read checked out where `from` says.
    fn read_from(&self, from: ReadFrom);
    /// A write committed; `token` names it for the client's later reads.
    fn wrote(&self, token: ConsistencyToken);
}

/// Marker: check out the shard primary, for every write and for reads that must show the
/// tenant's own latest writes.
pub struct Primary;
/// Marker: the shard's replica when it is ready, else per `replica_fallback`. Replicas lag.
pub struct ReplicaAware;

/// Which server a [`TenantSession`] checks out.
pub trait ConnectionMode: Send + Sync + 'static {
    const READ: bool;
}

impl ConnectionMode for Primary {
    const READ: bool = false;
}

impl ConnectionMode for ReplicaAware {
    const READ: bool = true;
}

/// A work's error that may carry a database error, which only the session can classify
/// (lost connection, tenant moved, …).
pub trait QueryFailure: Sized {
    /// The database error inside, if there is one (the connection is asked whether it
    /// survived it before it is classified).
    fn database_error(&self) -> Option<&diesel::result::Error>;
    /// The database error for the session to classify, or the work's own error as it is.
    fn into_database_error(self) -> Result<diesel::result::Error, Self>;
}

impl QueryFailure for diesel::result::Error {
    fn database_error(&self) -> Option<&diesel::result::Error> {
        Some(self)
    }

    fn into_database_error(self) -> Result<diesel::result::Error, Self> {
        Ok(self)
    }
}

/// Why a session's work did not succeed: the shard's failure (classified), or the work's
/// own error.
#[derive(Debug, thiserror::Error)]
pub enum SessionError<E> {
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error(transparent)]
    Work(E),
}

impl Shards {
    /// A session for the tenant whose routing key is `tenant`, routed now; `observer`
    /// hears where it goes and the token of each write; a replica read shows at least what
    /// `after` stands for (see [`super::consistency`]).
    pub async fn session<M: ConnectionMode>(
        &self,
        tenant: &str,
        observer: Option<Arc<dyn SessionObserver>>,
        after: Option<ConsistencyToken>,
    ) -> Result<TenantSession<M>, ShardError> {
        let route = self.route(tenant).await?;
        let name = self.set().get(route.shard).spec().name.clone();
        if let Some(observer) = &observer {
            observer.serving(&name);
        }
        Ok(TenantSession {
            inner: None,
            shard: route.shard,
            name,
            shards: self.clone(),
            tenant: tenant.into(),
            observer,
            snapshot: false,
            after,
            mode: PhantomData,
        })
    }
}

/// Where the shard says the tenant now lives, if it has given it away: by a tenant move
/// (its own guard) or by a range move of its slot (unless it is placed here by hand).
const DEPARTED_TO: &str = "\
    SELECT COALESCE( \
        (SELECT peer_shard FROM _autumn_tenant_guard \
            WHERE tenant_key = $1 AND state = 'departed'), \
        (SELECT g.peer_shard FROM _autumn_slot_guard g \
            WHERE g.slot = _autumn_slot($1) AND g.state = 'departed' \
            AND NOT EXISTS (SELECT 1 FROM _autumn_tenant_guard t WHERE t.tenant_key = $1) \
            AND NOT EXISTS (SELECT 1 FROM _autumn_placed_tenants p WHERE p.tenant_key = $1)) \
    ) AS peer";

#[derive(diesel::QueryableByName)]
struct Departed {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    peer: Option<String>,
}

impl<M: ConnectionMode> TenantSession<M> {
    /// Opens a snapshot of the tenant's rows: one `REPEATABLE READ, READ ONLY` transaction
    /// on its shard that every later read of this session runs in, until
    /// [`Self::end_snapshot`], so that a tenant read in many pages (an export) is read as of
    /// one moment whatever is written meanwhile. Each page is a statement of its own under
    /// the query deadline; between pages nothing is watched, so a slow reader is never
    /// taken for a silent server. A session dropped with its snapshot open discards its
    /// connection (closing it ends the transaction at once): the pool never holds an open
    /// transaction.
    ///
    /// The snapshot is taken where the tenant's rows are whole. A move deletes a tenant's
    /// rows only after its source has marked the tenant departed, so a shard that has not
    /// marked it departed by the time the snapshot is taken still has every row in the
    /// snapshot. The mark is read on a second connection, after the snapshot is taken: read
    /// inside the snapshot, it would hold a lock on the guard tables until the export ends,
    /// and a range move's fence takes them exclusively. If the shard has given the tenant
    /// away (a stale route, or a move that ended just now), the snapshot is taken again on
    /// the shard the guard names.
    pub async fn begin_snapshot(&mut self) -> Result<(), SessionError<diesel::result::Error>> {
        use diesel_async::{AnsiTransactionManager, RunQueryDsl};
        let mut followed = 0;
        loop {
            // Before BEGIN is sent: from then on a dropped session must not pool its
            // connection.
            self.snapshot = true;
            self.run(Intent::Read, async |c| {
                AnsiTransactionManager::begin_transaction_sql(
                    c,
                    "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                )
                .await?;
                // Taken by the transaction's first statement, not by BEGIN.
                diesel::sql_query("SELECT 1").execute(c).await.map(drop)
            })
            .await?;
            let Some(peer) = self.departed_to().await? else {
                return Ok(());
            };
            self.end_snapshot().await?;
            self.shards.forget(&self.tenant);
            let next = self.shards.set().by_name(&peer).map(|s| s.id());
            match next {
                Some(next) if followed < 2 => {
                    followed += 1;
                    self.switch_to(next);
                }
                _ => {
                    let shard = self.name.as_str().to_owned();
                    return Err(ShardError::TenantMoved { shard, to: peer }.into());
                }
            }
        }
    }

    /// Ends the snapshot [`Self::begin_snapshot`] opened.
    pub async fn end_snapshot(&mut self) -> Result<(), SessionError<diesel::result::Error>> {
        use diesel_async::{AnsiTransactionManager, TransactionManager};
        self.run(Intent::Read, async |c| {
            AnsiTransactionManager::commit_transaction(c).await
        })
        .await?;
        self.snapshot = false;
        Ok(())
    }

    /// Whether this session's shard has given the tenant away, and to which shard.
    async fn departed_to(&self) -> Result<Option<String>, SessionError<diesel::result::Error>> {
        use diesel_async::RunQueryDsl;
        let shard = self.shards.set().get(self.shard);
        let mut conn = self.shards.primary(shard, RowScope::NoTenant).await?;
        let tenant = &*self.tenant;
        let asked = conn
            .within(Intent::Read, async |c| {
                diesel::sql_query(DEPARTED_TO)
                    .bind::<diesel::sql_types::Text, _>(tenant)
                    .get_result::<Departed>(c)
                    .await
            })
            .await?;
        match asked {
            Ok(departed) => Ok(departed.peer),
            Err(e) => {
                let lost = conn.lost_after(&e).await;
                Err(self.classify(Intent::Read, e, lost).into())
            }
        }
    }
}

impl<M> Drop for TenantSession<M> {
    fn drop(&mut self) {
        if self.snapshot
            && let Some(conn) = self.inner.take()
        {
            conn.discard();
        }
    }
}

impl<M: ConnectionMode> TenantSession<M> {
    pub fn shard(&self) -> &str {
        self.name.as_str()
    }

    /// True when a replica-aware read landed on the replica.
    pub fn on_replica(&self) -> bool {
        self.inner.as_ref().is_some_and(|c| c.on_replica)
    }

    /// The connection, checked out now if this is the first statement.
    async fn conn(&mut self) -> Result<&mut ShardConn, ShardError> {
        if self.inner.is_none() {
            // Before the shard is chosen: catching up may route the tenant afresh.
            if M::READ
                && let Some(epoch) = self.after.as_ref().map(|t| t.epoch)
                && epoch > self.shards.set().arrivals().epoch()
            {
                self.catch_up(epoch).await;
            }
            let shards = self.shards.clone();
            let shard = shards.set().get(self.shard);
            let conn = if M::READ {
                let arrivals = self.shards.set().arrivals();
                let need = need(
                    self.after.as_ref(),
                    &self.name,
                    arrivals.floor(self.shard.index()),
                    arrivals.epoch(),
                );
                let scope = RowScope::Tenant(&self.tenant);
                let (conn, from) = self.shards.read_for(shard, need, scope).await?;
                if let Some(observer) = &self.observer {
                    observer.read_from(from);
                }
                conn
            } else {
                self.shards
                    .primary(shard, RowScope::Tenant(&self.tenant))
                    .await?
            };
            self.inner = Some(conn);
        }
        Ok(self.inner.as_mut().expect("checked out above"))
    }

    /// The client's token was minted after a move this process has not heard of (another
    /// web replica wrote it): its route for the tenant may be the old one. Forgets the
    /// route, asks for the slot map again and routes afresh, waiting (at most the move
    /// wait budget, holding no connection) until the arrivals it knows reach the token's.
    /// If they never do, the read goes to the primary of the fresh route (see
    /// [`super::consistency::need`]).
    async fn catch_up(&mut self, epoch: u64) {
        let shards = self.shards.clone();
        let changes = shards.set().route_changes().clone();
        let deadline = tokio::time::Instant::now() + shards.set().topology().move_wait.budget;
        shards.forget(&self.tenant);
        loop {
            let mut change = std::pin::pin!(changes.next());
            change.as_mut().enable();
            // A directory lookup raises the arrival of the shard it names.
            if let Ok(route) = shards.route(&*self.tenant).await {
                self.switch_to(route.shard);
            }
            if shards.set().arrivals().epoch() >= epoch {
                return;
            }
            if tokio::time::timeout_at(deadline, change).await.is_err() {
                return;
            }
        }
    }

    /// Runs statements that change nothing, within the shard's query deadline. A read that
    /// a silent replica left unanswered is retried once, by the shard's read path again:
    /// the replica's breaker is open by then, so the retry goes where `replica_fallback`
    /// says.
    pub async fn read<T, E: QueryFailure>(
        &mut self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E> + Clone,
    ) -> Result<T, SessionError<E>> {
        match self.run(Intent::Read, work.clone()).await {
            Err(SessionError::Shard(ShardError::Timeout { .. })) if self.on_replica() => {
                // Dropping the cut-off connection discards it; the next checkout takes the
                // read path again.
                self.inner = None;
                self.run(Intent::Read, work).await
            }
            outcome => outcome,
        }
    }

    /// Runs statements that may change data, within the shard's query deadline. If the
    /// shard goes silent after a statement was sent, the answer says the outcome is unknown
    /// rather than guessing.
    ///
    /// `work` is one statement or one transaction: a move's guard refuses it before it
    /// commits, so it may be sent again. A write refused because its tenant is fenced
    /// waits for the fence to lift (bounded by `[sharding] move_wait_ms`) and goes where
    /// the tenant routes by then; one refused as departed goes once, at once, to the shard
    /// the refusal names (see [`super::move_wait`]).
    pub async fn write<T, E: QueryFailure>(
        &mut self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E> + Clone,
    ) -> Result<T, SessionError<E>> {
        let shards = self.shards.clone();
        let changes = shards.set().route_changes().clone();
        let mut wait = shards.move_waits().begin();
        let outcome = loop {
            // Enabled before the write is sent: a re-pin announced while it is refused
            // still wakes the wait below.
            let mut change = std::pin::pin!(changes.next());
            change.as_mut().enable();
            let refusal = match self.run(Intent::Write, work.clone()).await {
                Err(SessionError::Shard(refusal @ ShardError::TenantMoving { .. })) => refusal,
                Err(SessionError::Shard(ShardError::TenantMoved { shard, to }))
                    if wait.departed().is_ok() =>
                {
                    match shards.set().by_name(&to) {
                        Some(next) => {
                            self.switch_to(next.id());
                            continue;
                        }
                        None => break Err(ShardError::TenantMoved { shard, to }.into()),
                    }
                }
                outcome => break outcome,
            };
            // Waiting holds no connection: the pool serves the shard's other tenants.
            self.inner = None;
            if wait.fenced(change).await.is_err() {
                break Err(refusal.into());
            }
            match shards.route(&*self.tenant).await {
                Ok(route) => self.switch_to(route.shard),
                Err(e) => break Err(e.into()),
            }
        };
        if let Some(observer) = &self.observer {
            if !wait.waited().is_zero() {
                observer.waited(wait.waited());
            }
            if outcome.is_ok() {
                self.mint(observer.clone()).await;
            }
        }
        outcome
    }

    /// Tells `observer` the token of the write that just committed on this session's
    /// connection: the shard's WAL position now, at or after the end of its commit record.
    /// A token that cannot be read costs the client a primary read, not the write.
    async fn mint(&mut self, observer: Arc<dyn SessionObserver>) {
        let Some(conn) = self.inner.as_mut() else {
            return;
        };
        let epoch = self.shards.set().arrivals().epoch();
        match conn
            .within(Intent::Read, async |c| {
                super::arrivals::wal_position(c).await
            })
            .await
        {
            Ok(Ok(lsn)) => observer.wrote(ConsistencyToken {
                shard: self.name.clone(),
                epoch,
                lsn,
            }),
            Ok(Err(e)) => tracing::debug!(error = %e, "no consistency token for a write"),
            Err(e) => tracing::debug!(error = %e, "no consistency token for a write"),
        }
    }

    /// Sends the next statement to `shard` (a move changed the tenant's shard).
    fn switch_to(&mut self, shard: ShardId) {
        if shard == self.shard {
            return;
        }
        self.inner = None;
        self.shard = shard;
        self.name = self.shards.set().get(shard).spec().name.clone();
        if let Some(observer) = &self.observer {
            observer.serving(&self.name);
        }
    }

    /// Runs `work` as one transaction on this shard (there are no cross-shard
    /// transactions): committed if it returns `Ok`, rolled back otherwise. A write, within
    /// the query deadline.
    pub async fn tx<T, E, F>(&mut self, work: F) -> Result<T, SessionError<E>>
    where
        F: for<'c> FnOnce(&'c mut AsyncPgConnection) -> BoxFuture<'c, Result<T, E>> + Send + Clone,
        T: Send,
        E: QueryFailure + From<diesel::result::Error> + Send,
    {
        self.write(async move |c| c.transaction(async move |c| work(c).await).await)
            .await
    }

    async fn run<T, E: QueryFailure>(
        &mut self,
        intent: Intent,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E>,
    ) -> Result<T, SessionError<E>> {
        let conn = self.conn().await?;
        match conn.within(intent, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                let lost = match e.database_error() {
                    Some(db) => conn.lost_after(db).await,
                    None => false,
                };
                match e.into_database_error() {
                    Ok(db) => Err(self.classify(intent, db, lost).into()),
                    Err(own) => Err(SessionError::Work(own)),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Maps a database error, naming this shard if the connection was lost. When the shard
    /// says the tenant has moved (this process routed by a stale cache entry), the route is
    /// forgotten so that the client's retry goes to the new shard.
    fn classify(&self, intent: Intent, e: diesel::result::Error, lost: bool) -> ShardError {
        let e = ShardError::from_query(self.name.as_str(), intent, e, lost);
        if let ShardError::TenantMoved { .. } = e {
            self.shards.forget(&self.tenant);
        }
        e
    }
}
