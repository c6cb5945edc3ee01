//! `ShardSet`: the running shards, each with its own connection pools, plus the slot map.
//!
//! Pools are built lazily (no connection is opened until the first checkout), so a
//! `ShardSet` can be built by the CLI, by tests and at startup while databases are still
//! coming up; a shard that is down only fails the requests routed to it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool::Runtime;
use deadpool::managed::{Pool, PoolError, Timeouts};
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError as ConnectError, RecyclingMethod,
};

use super::DbUrl;
use super::breaker::{Breaker, Role};
use super::router::{Route, RouteVia};
use super::shard_name::ShardName;
use super::slot::{ShardKey, Slot};
use super::topology::{ReplicaFallback, ShardSpec, Topology};

/// A pool of connections to one Postgres server.
pub type PgPool = Pool<AsyncDieselConnectionManager<AsyncPgConnection>>;
/// A connection checked out of a [`PgPool`]; derefs to `AsyncPgConnection`.
pub type PgConn = deadpool::managed::Object<AsyncDieselConnectionManager<AsyncPgConnection>>;
/// Why a checkout failed (timeout, connection refused, …).
pub type CheckoutError = PoolError<ConnectError>;

/// A shard's position in declaration order; cheap to copy and compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(u16);

impl ShardId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    #[cfg(test)]
    pub(crate) fn from_index(i: u16) -> Self {
        Self(i)
    }
}

/// One shard: its configuration, its pools and a circuit breaker for each server.
pub struct Shard {
    id: ShardId,
    spec: ShardSpec,
    primary: PgPool,
    replica: Option<PgPool>,
    primary_breaker: Arc<Breaker>,
    replica_breaker: Option<Arc<Breaker>>,
    query_timeout: Duration,
}

impl Shard {
    pub fn id(&self) -> ShardId {
        self.id
    }

    pub fn name(&self) -> &str {
        self.spec.name.as_str()
    }

    pub fn shard_name(&self) -> &ShardName {
        &self.spec.name
    }

    pub fn spec(&self) -> &ShardSpec {
        &self.spec
    }

    pub fn primary_pool(&self) -> &PgPool {
        &self.primary
    }

    pub fn replica_pool(&self) -> Option<&PgPool> {
        self.replica.as_ref()
    }

    pub fn replica_fallback(&self) -> ReplicaFallback {
        self.spec.replica_fallback
    }

    pub fn primary_breaker(&self) -> &Arc<Breaker> {
        &self.primary_breaker
    }

    pub fn replica_breaker(&self) -> Option<&Arc<Breaker>> {
        self.replica_breaker.as_ref()
    }

    /// The breakers of this shard's servers, primary first.
    pub fn breakers(&self) -> impl Iterator<Item = &Arc<Breaker>> {
        std::iter::once(&self.primary_breaker).chain(self.replica_breaker.as_ref())
    }

    /// How long one statement on this shard may take before the server counts as silent.
    pub fn query_timeout(&self) -> Duration {
        self.query_timeout
    }
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard")
            .field("name", &self.name())
            .field("slots", &self.spec.slot_count())
            .field("replica", &self.replica.is_some())
            .finish()
    }
}

/// Every configured shard in declaration order, and the slot → shard map.
pub struct ShardSet {
    topology: Arc<Topology>,
    shards: Vec<Shard>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot build the connection pool for {target}: {message}")]
pub struct PoolBuildError {
    pub target: String,
    pub message: String,
}

impl ShardSet {
    /// Builds pools for every shard without connecting to any of them.
    pub fn new(topology: Arc<Topology>) -> Result<Self, PoolBuildError> {
        let shards = topology
            .shards
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let target = format!("shard {}", spec.name);
                let primary = build_pool(
                    &spec.primary_url,
                    spec.primary_pool_size,
                    &topology,
                    &target,
                )?;
                let replica = spec
                    .replica_url
                    .as_ref()
                    .map(|url| build_pool(url, spec.replica_pool_size, &topology, &target))
                    .transpose()?;
                let breaker = |role: Role, url: &DbUrl| {
                    Breaker::new(
                        format!("shard {} {}", spec.name, role.as_str()),
                        role,
                        url.clone(),
                        topology.connect_timeout,
                    )
                };
                Ok(Shard {
                    id: ShardId(i as u16),
                    spec: spec.clone(),
                    primary,
                    replica,
                    primary_breaker: breaker(Role::Primary, &spec.primary_url),
                    replica_breaker: spec
                        .replica_url
                        .as_ref()
                        .map(|url| breaker(Role::Replica, url)),
                    query_timeout: topology.query_timeout,
                })
            })
            .collect::<Result<Vec<_>, PoolBuildError>>()?;
        Ok(Self { topology, shards })
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The slot a key hashes to. The same for every process, forever.
    pub fn slot_for_key<'a>(&self, key: impl Into<ShardKey<'a>>) -> Slot {
        key.into().slot()
    }

    /// The shard that owns `slot` in the configured map.
    pub fn shard_for_slot(&self, slot: Slot) -> &Shard {
        &self.shards[self.topology.owner_of(slot.index())]
    }

    /// Hash routing without any router: key → slot → owner.
    pub fn hash_route<'a>(&self, key: impl Into<ShardKey<'a>>) -> Route {
        let slot = key.into().slot();
        Route {
            slot,
            shard: self.shard_for_slot(slot).id,
            via: RouteVia::Hash,
        }
    }

    pub fn by_name(&self, name: &str) -> Option<&Shard> {
        self.shards.iter().find(|s| s.name() == name)
    }

    pub fn get(&self, id: ShardId) -> &Shard {
        &self.shards[id.index()]
    }

    /// Shards in declaration order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Shard> {
        self.shards.iter()
    }

    pub fn len(&self) -> usize {
        self.shards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// See [`Topology::total_max_connections`].
    pub fn total_max_connections(&self) -> u32 {
        self.topology.total_max_connections()
    }
}

impl fmt::Debug for ShardSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.shards).finish()
    }
}

/// A lazily connecting pool whose every wait is bounded, so a dead server costs a request
/// `connect_timeout` rather than the operating system's TCP timeout.
///
/// Checkouts do not ping (`RecyclingMethod::Fast`). A connection whose server closed it is
/// still never handed out (the driver sees the socket close), and the ping would not help
/// with a *silent* server: it would wait out the recycle timeout on every idle connection
/// in turn before giving up, several seconds per request. Silence is caught instead by the
/// query deadline and the circuit breakers ([`super::breaker`]). It also saves a round
/// trip on every checkout.
pub fn build_pool(
    url: &DbUrl,
    size: u32,
    topology: &Topology,
    target: &str,
) -> Result<PgPool, PoolBuildError> {
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    let manager =
        AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url.expose(), config);
    Pool::builder(manager)
        .max_size(size as usize)
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: Some(topology.acquire_timeout),
            create: Some(topology.connect_timeout),
            recycle: Some(topology.connect_timeout.min(Duration::from_secs(2))),
        })
        .build()
        .map_err(|e| PoolBuildError {
            target: target.to_owned(),
            message: e.to_string(),
        })
}
