//! Routers decide which shard serves a key. The hash router is the default; the pin router
//! lets configured tenants (whales, data-residency customers) bypass the hash; a directory
//! router backed by the control database implements the same trait.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::shard_set::{ShardId, ShardSet};
use super::slot::{ShardKey, Slot};

/// Where a key was sent and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The key's hash slot (reported even when a pin overrides it).
    pub slot: Slot,
    pub shard: ShardId,
    pub via: RouteVia,
}

/// Which rule decided a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteVia {
    Hash,
    Pin,
    Directory,
}

impl RouteVia {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteVia::Hash => "hash",
            RouteVia::Pin => "pin",
            RouteVia::Directory => "directory",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// A router that consults an external source (the directory) could not reach it.
    #[error("routing lookup failed: {0}")]
    Lookup(String),
}

/// Decides a key's shard. Async so that a router may consult a cache or the control database.
pub trait ShardRouter: Send + Sync {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>>;
}

impl<T: ShardRouter + ?Sized> ShardRouter for Arc<T> {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>> {
        (**self).route(key, shards)
    }
}

/// key → slot → owning shard, nothing else.
#[derive(Debug, Default, Clone, Copy)]
pub struct HashRouter;

impl ShardRouter for HashRouter {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>> {
        Box::pin(std::future::ready(Ok(shards.hash_route(key))))
    }
}

/// Configured pins first (`[sharding] pins`), the hash for every other key.
///
/// Pins match text keys exactly (tenant ids are case-sensitive); integer keys always hash.
#[derive(Debug, Clone)]
pub struct PinRouter {
    pins: HashMap<String, ShardId>,
}

impl PinRouter {
    /// Uses the pins of the set's topology.
    pub fn from_shard_set(shards: &ShardSet) -> Self {
        let pins = shards
            .topology()
            .pins
            .iter()
            .map(|(key, &index)| {
                (
                    key.clone(),
                    shards.iter().nth(index).expect("pins are validated").id(),
                )
            })
            .collect();
        Self { pins }
    }

    /// The pin for a key, if it has one, without touching the hash.
    pub fn pinned(&self, key: ShardKey<'_>) -> Option<ShardId> {
        key.as_text().and_then(|k| self.pins.get(k).copied())
    }
}

impl ShardRouter for PinRouter {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>> {
        let route = match self.pinned(key) {
            Some(shard) => Route {
                slot: key.slot(),
                shard,
                via: RouteVia::Pin,
            },
            None => shards.hash_route(key),
        };
        Box::pin(std::future::ready(Ok(route)))
    }
}
