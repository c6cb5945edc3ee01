//! Request extractors: `Tenant`, `ShardedDb`, `ShardedReadDb` and `Shards`.
//!
//! Handlers name what they need and never compute a slot: the extractor resolves the tenant,
//! routes it, checks out the right connection and records the serving shard for the
//! `X-Shard` header, the metrics label and the request's tracing span.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use diesel_async::AsyncPgConnection;

use super::error::ApiError;
use super::state::AppState;
use crate::sharding::access::{ShardConn, ShardError, Shards};
use crate::tenancy::{self, TenantId};

/// Filled in by the extractors with the name of the shard that served the request.
#[derive(Clone, Default)]
pub struct ServedByShard(pub Arc<OnceLock<String>>);

fn record_shard(parts: &Parts, name: &str) {
    if let Some(slot) = parts.extensions.get::<ServedByShard>() {
        let _ = slot.0.set(name.to_owned());
    }
    tracing::Span::current().record("shard", name);
}

/// The request's tenant.
#[derive(Debug, Clone)]
pub struct Tenant(pub TenantId);

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(t) = parts.extensions.get::<Tenant>() {
            return Ok(t.clone());
        }
        let tenant = tenancy::resolve(parts, &state.settings.tenancy.header)?;
        tracing::Span::current().record("tenant", tenant.as_str());
        parts.extensions.insert(Tenant(tenant.clone()));
        Ok(Tenant(tenant))
    }
}

/// A connection to the primary of the request tenant's shard. It derefs to
/// `AsyncPgConnection`, so `db.transaction(async |conn| …)` runs a transaction on that one
/// shard (there are no cross-shard transactions).
pub struct ShardedDb {
    inner: ShardConn,
}

impl ShardedDb {
    pub fn shard(&self) -> &str {
        &self.inner.name
    }

    /// Maps a query error to the API, naming this shard if the connection was lost.
    pub fn fail(&self, e: diesel::result::Error) -> ApiError {
        ApiError::Shard(ShardError::from_query(&self.inner.name, e))
    }
}

impl Deref for ShardedDb {
    type Target = AsyncPgConnection;
    fn deref(&self) -> &AsyncPgConnection {
        &self.inner.conn
    }
}

impl DerefMut for ShardedDb {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        &mut self.inner.conn
    }
}

impl FromRequestParts<AppState> for ShardedDb {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Tenant(tenant) = Tenant::from_request_parts(parts, state).await?;
        let route = state.shards.route(tenant.as_str()).await?;
        let shard = state.shards.set().get(route.shard);
        record_shard(parts, shard.name());
        let inner = state.shards.primary(shard).await?;
        Ok(Self { inner })
    }
}

/// A replica-aware read connection for the request tenant's shard. Replicas lag: use
/// [`ShardedDb`] for anything that must show the tenant's own latest writes.
pub struct ShardedReadDb {
    inner: ShardConn,
}

impl ShardedReadDb {
    pub fn shard(&self) -> &str {
        &self.inner.name
    }

    pub fn on_replica(&self) -> bool {
        self.inner.on_replica
    }

    pub fn fail(&self, e: diesel::result::Error) -> ApiError {
        ApiError::Shard(ShardError::from_query(&self.inner.name, e))
    }
}

impl Deref for ShardedReadDb {
    type Target = AsyncPgConnection;
    fn deref(&self) -> &AsyncPgConnection {
        &self.inner.conn
    }
}

impl DerefMut for ShardedReadDb {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        &mut self.inner.conn
    }
}

impl FromRequestParts<AppState> for ShardedReadDb {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Tenant(tenant) = Tenant::from_request_parts(parts, state).await?;
        let route = state.shards.route(tenant.as_str()).await?;
        let shard = state.shards.set().get(route.shard);
        record_shard(parts, shard.name());
        let inner = state.shards.read(shard).await?;
        Ok(Self { inner })
    }
}

impl FromRequestParts<AppState> for Shards {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(state.shards.clone())
    }
}
