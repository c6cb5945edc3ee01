//! `ShardSet`: the configured shards, each with its own connection pools and breakers, and
//! the slot map that says which of them owns a slot.
//!
//! Pools are built lazily (no connection is opened until the first checkout), so a
//! `ShardSet` can be built by the CLI, by tests and at startup while databases are still
//! coming up; a shard that is down only fails the requests routed to it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::arrivals::Arrivals;
use super::move_wait::RouteChanges;
use super::slot::Slot;
use super::slot_map::{LiveSlotMap, Owner};
use super::topology::{ReplicaFallback, ShardSpec, Topology};
use crate::pg::breaker::{Breaker, Role};
use crate::pg::db_url::DbUrl;
use crate::pg::pool::{PgPool, PoolBuildError, build_pool};

/// A shard's position in declaration order; cheap to copy and compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(u16);

impl ShardId {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The id of the shard at `index` in declaration order (callers hold a valid index).
    pub fn from_index(index: usize) -> Self {
        Self(index as u16)
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
    /// `autumn.toml`'s slots with the control database's overrides on top.
    slot_map: Arc<LiveSlotMap>,
    /// Rung when routing may have changed (slot map installs, directory evictions).
    route_changes: Arc<RouteChanges>,
    /// What each shard's replica must have replayed before it serves reads.
    arrivals: Arc<Arrivals>,
}

impl ShardSet {
    /// Builds pools for every shard without connecting to any of them.
    pub fn new(topology: Arc<Topology>) -> Result<Self, PoolBuildError> {
        let run_as = super::row_security::run_as_app_role();
        let shards = topology
            .shards
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let target = format!("shard {}", spec.name);
                let primary = build_pool(
                    &spec.primary_url,
                    spec.primary_pool_size,
                    topology.pool_bounds(),
                    &target,
                    Some(&run_as),
                )?;
                let replica = spec
                    .replica_url
                    .as_ref()
                    .map(|url| {
                        build_pool(
                            url,
                            spec.replica_pool_size,
                            topology.pool_bounds(),
                            &target,
                            Some(&run_as),
                        )
                    })
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
        let route_changes = Arc::new(RouteChanges::default());
        let arrivals = Arc::new(Arrivals::new(&topology));
        let slot_map = Arc::new(LiveSlotMap::new(
            &topology,
            route_changes.clone(),
            arrivals.clone(),
        ));
        Ok(Self {
            topology,
            shards,
            slot_map,
            route_changes,
            arrivals,
        })
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The shard that owns `slot` in the live slot map.
    pub fn shard_for_slot(&self, slot: Slot) -> &Shard {
        &self.shards[self.slot_owner(slot).shard]
    }

    /// Who owns `slot` in the live slot map, and whether an override said so.
    #[inline]
    pub fn slot_owner(&self, slot: Slot) -> Owner {
        self.slot_map.owner(slot.index())
    }

    /// The live slot map, to reload or to show.
    pub fn slot_map(&self) -> &Arc<LiveSlotMap> {
        &self.slot_map
    }

    /// Where tenants last arrived on each shard (see [`super::arrivals`]).
    pub fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }

    /// What writes waiting out a move listen to (see [`super::move_wait`]).
    pub fn route_changes(&self) -> &Arc<RouteChanges> {
        &self.route_changes
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

    /// See [`super::budget::total_max_connections`].
    pub fn total_max_connections(&self) -> u32 {
        super::budget::total_max_connections(&self.topology)
    }
}

impl fmt::Debug for ShardSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.shards).finish()
    }
}
