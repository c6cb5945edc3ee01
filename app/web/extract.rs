//! Request extractors: `Tenant`, `ShardedDb`, `ShardedReadDb`, `Shards` and `CrossShard`, and
//! the body/query/path extractors whose rejections are API errors.
//!
//! Handlers name what they need and never compute a slot: the extractor takes the tenant
//! the authentication layer proved, routes it, checks out the right connection and records
//! the serving shard in the request's [`RequestFacts`] for the `X-Shard` header, the
//! metrics and the access log.

use std::marker::PhantomData;

use axum::extract::{Form, FromRef, FromRequest, FromRequestParts, Json, Path, Query};
use axum::http::request::Parts;
use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures::future::BoxFuture;

use super::authenticate::AuthFailure;
use super::error::ApiError;
use super::request_facts::RequestFacts;
pub use super::request_facts::Tenant;
use crate::sharding::ShardId;
use crate::sharding::access::{Intent, ShardConn, ShardError, Shards};
use crate::sharding::cross_shard::CrossShard;
use crate::sharding::shard_name::ShardName;
use crate::tenancy::TenantId;
use crate::tenancy::auth::AuthError;

/// Only a tenant the authentication layer proved: a route without that layer has none.
impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        if let Some(t) = parts.extensions.get::<Tenant>() {
            return Ok(t.clone());
        }
        match parts.extensions.get::<AuthFailure>() {
            Some(AuthFailure(e)) => Err(ApiError::Auth(e.clone())),
            None => Err(ApiError::Auth(AuthError::MissingCredentials)),
        }
    }
}

/// A connection to the request tenant's shard. The extractor routes the tenant; the
/// connection is checked out when the first statement runs, so a request refused for its
/// body or its parameters never holds one. `M` says which server: [`ShardedDb`] (the
/// primary) or [`ShardedReadDb`] (replica-aware). Statements run through
/// [`ShardedConnection::read`] or [`ShardedConnection::write`], which bound them by the
/// shard's query deadline and turn their errors into API errors. There are no cross-shard
/// transactions: a transaction opened inside `work` runs on this one shard.
pub struct ShardedConnection<M> {
    /// Checked out on first use.
    inner: Option<ShardConn>,
    shard: ShardId,
    name: ShardName,
    /// To check out, and to forget the tenant's route when its shard says it has moved.
    shards: Shards,
    tenant: TenantId,
    /// Where the serving shard and a move wait are recorded (absent outside a request).
    facts: Option<RequestFacts>,
    mode: PhantomData<M>,
}

/// The shard primary: every write, and reads that must show the tenant's own latest writes.
pub type ShardedDb = ShardedConnection<Primary>;
/// The shard's replica when it is ready, else per `replica_fallback`. Replicas lag: use
/// [`ShardedDb`] for anything that must show the tenant's own latest writes.
pub type ShardedReadDb = ShardedConnection<ReplicaAware>;

/// Marker: check out the shard primary.
pub struct Primary;
/// Marker: check out a replica-aware read connection.
pub struct ReplicaAware;

/// Which server a [`ShardedConnection`] checks out.
pub trait ConnectionMode: Send + Sync + 'static {
    const READ: bool;
}

impl ConnectionMode for Primary {
    const READ: bool = false;
}

impl ConnectionMode for ReplicaAware {
    const READ: bool = true;
}

/// An error from a handler's queries that may carry a database error, which only the
/// shard's connection can classify (lost connection, tenant moved, …).
pub trait QueryFailure {
    /// The database error inside, if there is one (the connection is asked whether it
    /// survived it before it is classified).
    fn database_error(&self) -> Option<&diesel::result::Error>;
    fn into_api(self, classify: &dyn Fn(diesel::result::Error) -> ApiError) -> ApiError;
}

impl QueryFailure for diesel::result::Error {
    fn database_error(&self) -> Option<&diesel::result::Error> {
        Some(self)
    }

    fn into_api(self, classify: &dyn Fn(diesel::result::Error) -> ApiError) -> ApiError {
        classify(self)
    }
}

impl<M: ConnectionMode> ShardedConnection<M> {
    pub fn shard(&self) -> &str {
        self.name.as_str()
    }

    /// True when a replica-aware read landed on the replica.
    pub fn on_replica(&self) -> bool {
        self.inner.as_ref().is_some_and(|c| c.on_replica)
    }

    /// The connection, checked out now if this is the first statement.
    async fn conn(&mut self) -> Result<&mut ShardConn, ApiError> {
        if self.inner.is_none() {
            let shard = self.shards.set().get(self.shard);
            let conn = if M::READ {
                self.shards.read(shard).await?
            } else {
                self.shards.primary(shard).await?
            };
            self.inner = Some(conn);
        }
        Ok(self.inner.as_mut().expect("checked out above"))
    }

    /// Runs statements that change nothing, within the shard's query deadline. A read that
    /// a silent replica left unanswered is retried once, by the shard's read path again:
    /// the replica's breaker is open by then, so the retry goes where `replica_fallback`
    /// says.
    pub async fn read<T, E: QueryFailure>(
        &mut self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E> + Clone,
    ) -> Result<T, ApiError> {
        match self.run(Intent::Read, work.clone()).await {
            Err(ApiError::Shard(ShardError::Timeout { .. })) if self.on_replica() => {
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
    /// the refusal names (see [`crate::sharding::move_wait`]).
    pub async fn write<T, E: QueryFailure>(
        &mut self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E> + Clone,
    ) -> Result<T, ApiError> {
        let shards = self.shards.clone();
        let changes = shards.set().route_changes().clone();
        let mut wait = shards.move_waits().begin();
        let outcome = loop {
            // Enabled before the write is sent: a re-pin announced while it is refused
            // still wakes the wait below.
            let mut change = std::pin::pin!(changes.next());
            change.as_mut().enable();
            let refusal = match self.run(Intent::Write, work.clone()).await {
                Err(ApiError::Shard(refusal @ ShardError::TenantMoving { .. })) => refusal,
                Err(ApiError::Shard(ShardError::TenantMoved { shard, to }))
                    if wait.departed().is_ok() =>
                {
                    match shards.set().by_name(&to) {
                        Some(next) => {
                            self.switch_to(next.id());
                            continue;
                        }
                        None => break Err(ApiError::Shard(ShardError::TenantMoved { shard, to })),
                    }
                }
                outcome => break outcome,
            };
            // Waiting holds no connection: the pool serves the shard's other tenants.
            self.inner = None;
            if wait.fenced(change).await.is_err() {
                break Err(ApiError::Shard(refusal));
            }
            match shards.route(self.tenant.as_str()).await {
                Ok(route) => self.switch_to(route.shard),
                Err(e) => break Err(ApiError::Shard(e)),
            }
        };
        if let Some(facts) = &self.facts
            && !wait.waited().is_zero()
        {
            facts.record_wait(wait.waited());
        }
        outcome
    }

    /// Sends the next statement to `shard` (a move changed the tenant's shard).
    fn switch_to(&mut self, shard: ShardId) {
        if shard == self.shard {
            return;
        }
        self.inner = None;
        self.shard = shard;
        self.name = self.shards.set().get(shard).spec().name.clone();
        if let Some(facts) = &self.facts {
            facts.set_shard(&self.name);
        }
    }

    /// Runs `work` as one transaction on this shard (there are no cross-shard
    /// transactions): committed if it returns `Ok`, rolled back otherwise. A write, within
    /// the query deadline.
    pub async fn tx<T, E, F>(&mut self, work: F) -> Result<T, ApiError>
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
    ) -> Result<T, ApiError> {
        let conn = self.conn().await?;
        match conn.within(intent, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                let lost = match e.database_error() {
                    Some(db) => conn.lost_after(db).await,
                    None => false,
                };
                Err(e.into_api(&|db| self.classify(intent, db, lost)))
            }
            Err(e) => Err(ApiError::Shard(e)),
        }
    }

    /// Maps a database error, naming this shard if the connection was lost. When the shard
    /// says the tenant has moved (this process routed by a stale cache entry), the route is
    /// forgotten so that the client's retry goes to the new shard.
    fn classify(&self, intent: Intent, e: diesel::result::Error, lost: bool) -> ApiError {
        let e = ShardError::from_query(self.name.as_str(), intent, e, lost);
        if let ShardError::TenantMoved { .. } = e {
            self.shards.forget(self.tenant.as_str());
        }
        ApiError::Shard(e)
    }
}

impl<M, S> FromRequestParts<S> for ShardedConnection<M>
where
    M: ConnectionMode,
    S: Send + Sync,
    Shards: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Tenant(tenant) = Tenant::from_request_parts(parts, state).await?;
        let shards = Shards::from_ref(state);
        let route = shards.route(tenant.as_str()).await?;
        let name = shards.set().get(route.shard).spec().name.clone();
        let facts = parts.extensions.get::<RequestFacts>().cloned();
        if let Some(facts) = &facts {
            facts.set_shard(&name);
        }
        Ok(Self {
            inner: None,
            shard: route.shard,
            name,
            shards,
            tenant,
            facts,
            mode: PhantomData,
        })
    }
}

impl<S> FromRequestParts<S> for Shards
where
    S: Send + Sync,
    Shards: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Shards::from_ref(state))
    }
}

/// Tenant-free, read-only access to every shard, each part bounded by the shard timeout.
impl<S> FromRequestParts<S> for CrossShard
where
    S: Send + Sync,
    CrossShard: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(CrossShard::from_ref(state))
    }
}

/// `Json` whose rejections are API errors (JSON bodies, never plain text).
#[derive(FromRequest)]
#[from_request(via(Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// What a client is told of text holding a NUL character, which Postgres text cannot store.
pub const NUL_MESSAGE: &str = "must not contain a NUL character";

/// Refuses a query parameter's text that holds a NUL, by name, before it reaches a database.
pub fn refuse_nul(name: &str, value: Option<&str>) -> Result<(), ApiError> {
    match value {
        Some(v) if v.contains('\0') => Err(ApiError::BadRequest {
            code: "invalid_query",
            message: format!("{name} {NUL_MESSAGE}"),
        }),
        _ => Ok(()),
    }
}

/// `Query` whose rejections are API errors.
#[derive(FromRequestParts)]
#[from_request(via(Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `Path` whose rejections are API errors (a malformed path is simply not found).
#[derive(FromRequestParts)]
#[from_request(via(Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `Form` whose rejections are API errors.
#[derive(FromRequest)]
#[from_request(via(Form), rejection(ApiError))]
pub struct UiForm<T>(pub T);
