//! What the layers around the router learn about a request from the extractors inside it:
//! its tenant, the shard that served it, how long it waited out a move, where its read went
//! and its write's consistency token. The access log, the metrics and the `X-Shard`,
//! `X-Read-From` and `X-Consistency-Token` headers read them once the request is answered.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::http::Extensions;

use crate::sharding::consistency::{ConsistencyToken, ReadFrom};
use crate::sharding::session::SessionObserver;
use crate::sharding::shard_name::ShardName;
use crate::tenancy::TenantId;

/// What the extractors learn while serving a request, kept for the layers around the router
/// that log, count and label it once it is answered: its tenant and the shard that served
/// it. Shared, because those layers have passed the request on by the time it is known.
#[derive(Clone, Default)]
pub struct RequestFacts(Arc<Facts>);

#[derive(Default)]
struct Facts {
    tenant: OnceLock<TenantId>,
    /// Changes when a write waiting out a move is sent to the tenant's new shard.
    shard: Mutex<Option<ShardName>>,
    /// How long the request's write waited for a move's fence to lift.
    waited: OnceLock<Duration>,
    /// Where its latest tenant read went (a read a silent replica cut off is sent again,
    /// to the primary).
    read_from: Mutex<Option<ReadFrom>>,
    /// Its latest write's token.
    token: Mutex<Option<ConsistencyToken>>,
}

impl SessionObserver for Facts {
    fn serving(&self, shard: &ShardName) {
        *self.shard.lock().unwrap_or_else(|p| p.into_inner()) = Some(shard.clone());
    }

    fn waited(&self, waited: Duration) {
        let _ = self.waited.set(waited);
    }

    fn read_from(&self, from: ReadFrom) {
        *self.read_from.lock().unwrap_or_else(|p| p.into_inner()) = Some(from);
    }

    fn wrote(&self, token: ConsistencyToken) {
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
    }
}

impl RequestFacts {
    /// What the request's tenant session tells about where it went.
    pub fn observer(&self) -> Arc<dyn SessionObserver> {
        self.0.clone()
    }

    /// The request's facts, attached to it first if no outer layer has done so.
    pub fn of(request: &mut axum::extract::Request) -> Self {
        let extensions = request.extensions_mut();
        if let Some(facts) = extensions.get::<Self>() {
            return facts.clone();
        }
        let facts = Self::default();
        extensions.insert(facts.clone());
        facts
    }

    pub fn tenant(&self) -> Option<&TenantId> {
        self.0.tenant.get()
    }

    /// Runs `f` with the shard that served the request, if one did.
    pub fn with_shard<R>(&self, f: impl FnOnce(Option<&str>) -> R) -> R {
        let shard = self.0.shard.lock().unwrap_or_else(|p| p.into_inner());
        f(shard.as_ref().map(ShardName::as_str))
    }

    /// Where the request's tenant read went, if it made one.
    pub fn read_from(&self) -> Option<ReadFrom> {
        *self.0.read_from.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token of the request's latest write, if it wrote.
    pub fn token(&self) -> Option<ConsistencyToken> {
        self.0
            .token
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How long the request waited out a move, if it did.
    pub fn waited(&self) -> Option<Duration> {
        self.0.waited.get().copied()
    }
}

/// Keeps the tenant a request resolved to, so that later extractors need not resolve it
/// again and the access log can name it.
pub fn remember_tenant(extensions: &mut Extensions, tenant: &TenantId) {
    if let Some(facts) = extensions.get::<RequestFacts>() {
        let _ = facts.0.tenant.set(tenant.clone());
    }
    extensions.insert(Tenant(tenant.clone()));
}

/// The request's tenant.
#[derive(Debug, Clone)]
pub struct Tenant(pub TenantId);
