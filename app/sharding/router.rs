//! The routing contract: a [`Route`] (which shard serves a key, and which rule said so),
//! the [`ShardRouter`] trait, hash routing, and the pin router that lets configured tenants
//! (whales, data-residency customers) bypass the hash. The directory router
//! ([`super::directory`]) puts runtime placement from the control database in front of both.

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
    /// A slot override in the control database's live slot map (a range move).
    SlotMap,
}

impl RouteVia {
    pub fn as_str(self) -> &'static str {
        match self {
            RouteVia::Hash => "hash",
            RouteVia::Pin => "pin",
            RouteVia::Directory => "directory",
            RouteVia::SlotMap => "slot_map",
        }
    }
}

/// Why a key could not be routed. Only routers that consult something outside the process
/// (the directory) can fail.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RouteError {
    /// The directory could not be read and nothing cached says where the key lives.
    /// `cause` is for the log, never for clients.
    #[error("the tenant directory on the control database is unreachable: {cause}")]
    DirectoryUnavailable { cause: String },
    /// The directory places the key on a shard this topology does not have.
    #[error("the tenant directory places this tenant on shard {shard:?}, which is not configured")]
    UnknownShard { shard: String },
}

/// Decides a key's shard. Async so that a router may consult a cache or the control database.
pub trait ShardRouter: Send + Sync {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>>;

    /// Drops anything remembered about `key` (a shard said the tenant has moved), so its
    /// next request is routed afresh. Routers that remember nothing ignore it.
    fn forget(&self, _key: &str) {}
}

impl<T: ShardRouter + ?Sized> ShardRouter for Arc<T> {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>> {
        (**self).route(key, shards)
    }

    fn forget(&self, key: &str) {
        (**self).forget(key)
    }
}

/// Hash routing without any router: key → slot → the slot's owner in the live slot map
/// (`via` says whether an override or `autumn.toml` named it).
pub fn hash_route<'a>(shards: &ShardSet, key: impl Into<ShardKey<'a>>) -> Route {
    let slot = key.into().slot();
    let owner = shards.slot_owner(slot);
    Route {
        slot,
        shard: ShardId::from_index(owner.shard),
        via: if owner.overridden {
            RouteVia::SlotMap
        } else {
            RouteVia::Hash
        },
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

    /// The pin if there is one, else the hash; never waits for anything.
    pub fn decide(&self, key: ShardKey<'_>, shards: &ShardSet) -> Route {
        match self.pinned(key) {
            Some(shard) => Route {
                slot: key.slot(),
                shard,
                via: RouteVia::Pin,
            },
            None => hash_route(shards, key),
        }
    }
}

impl ShardRouter for PinRouter {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>> {
        Box::pin(std::future::ready(Ok(self.decide(key, shards))))
    }
}
