//! The validated shard topology: which shards exist, how to reach them, and which slots each
//! one owns. The configuration builds it from the `[database]` and `[sharding]` sections
//! of `autumn.toml` (`crate::configuration`), reporting every problem at once; what it
//! holds here has passed those checks.

use std::collections::BTreeMap;
use std::time::Duration;

use super::shard_name::ShardName;
use super::slot_range::SlotRange;
use crate::pg::db_url::DbUrl;

/// What a shard's replica reads do when the replica is not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaFallback {
    /// Stay ready and serve reads from the shard's primary.
    Primary,
    /// Report the shard down and refuse replica reads.
    FailReadiness,
}

impl ReplicaFallback {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "primary" => Some(Self::Primary),
            "fail_readiness" => Some(Self::FailReadiness),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::FailReadiness => "fail_readiness",
        }
    }
}

/// One validated shard.
#[derive(Debug, Clone)]
pub struct ShardSpec {
    pub name: ShardName,
    pub primary_url: DbUrl,
    pub replica_url: Option<DbUrl>,
    pub replica_fallback: ReplicaFallback,
    pub primary_pool_size: u32,
    pub replica_pool_size: u32,
    /// The slots this shard owns, compacted; empty for a drained shard.
    pub slots: Vec<SlotRange>,
}

impl ShardSpec {
    pub fn slot_count(&self) -> u32 {
        self.slots.iter().map(|r| r.len()).sum()
    }
}

/// The whole validated topology: control role, shards in declaration order, slot map, pins.
#[derive(Debug, Clone)]
pub struct Topology {
    pub control_url: DbUrl,
    pub control_pool_size: u32,
    pub connect_timeout: Duration,
    pub acquire_timeout: Duration,
    pub query_timeout: Duration,
    pub statement_timeout: Duration,
    /// How long a pooled connection may sit unused before it is closed.
    pub pool_idle_timeout: Duration,
    /// How many app processes share these servers: the connection budget's multiplier.
    pub processes: u32,
    pub shards: Vec<ShardSpec>,
    /// `owner[slot]` is the index into `shards` of the slot's owner.
    pub(crate) owner: Box<[u16]>,
    /// Tenant key → index into `shards`.
    pub pins: BTreeMap<String, usize>,
    pub directory_router: bool,
    /// How long a directory lookup is trusted without a notification saying it changed.
    pub directory_cache_ttl: Duration,
    /// Whether the slot map was auto-split (no shard declared `slots`).
    pub auto_assigned: bool,
    /// How writes refused by a move's fence wait for it to lift.
    pub move_wait: MoveWaitPolicy,
    /// When a tenant read may be served by its shard's replica.
    pub replica_reads: ReplicaReadPolicy,
}

/// `[database] max_replica_lag_ms`, `ryow_wait_ms`, `replay_poll_ms` and
/// `reads_without_token`: when a tenant read may use its shard's replica (see
/// [`super::consistency`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaReadPolicy {
    /// A replica further behind its primary serves no read.
    pub max_lag: Duration,
    /// How long a read waits for the replica to replay its consistency token.
    pub ryow_wait: Duration,
    /// How often each replica's replay position is read.
    pub poll: Duration,
    /// Whether a read without a token may use the replica (stale by at most `max_lag`).
    pub without_token: bool,
}

/// `[sharding] move_wait_ms` and `move_wait_max`: a write refused because its tenant is
/// fenced waits at most `budget` for the fence to lift, and at most `max` requests of a
/// process wait at once; past either, the client gets the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveWaitPolicy {
    pub budget: Duration,
    pub max: usize,
}

impl Topology {
    /// The shard declared as `name`.
    pub fn shard_named(&self, name: &str) -> Option<&ShardSpec> {
        self.shards.iter().find(|s| s.name.as_str() == name)
    }

    /// Every shard's name in declaration order, for errors that say what exists.
    pub fn shard_names(&self) -> String {
        let names: Vec<&str> = self.shards.iter().map(|s| s.name.as_str()).collect();
        names.join(", ")
    }

    /// Index into `shards` of the shard that owns `slot`.
    pub fn owner_of(&self, slot: u16) -> usize {
        usize::from(self.owner[usize::from(slot)])
    }
}

impl Topology {
    /// The bounds of every pool this topology's servers get.
    pub fn pool_bounds(&self) -> crate::pg::pool::PoolBounds {
        crate::pg::pool::PoolBounds {
            statement_timeout: self.statement_timeout,
            acquire_timeout: self.acquire_timeout,
            connect_timeout: self.connect_timeout,
        }
    }

    /// The control database's lookups (directory, API keys) as this topology bounds them.
    pub fn lookup_bounds(&self) -> crate::pg::control::LookupBounds {
        crate::pg::control::LookupBounds {
            url: self.control_url.clone(),
            connect_timeout: self.connect_timeout,
            acquire_timeout: self.acquire_timeout,
            query_timeout: self.query_timeout,
        }
    }
}
