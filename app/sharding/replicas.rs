//! Readiness of each shard's read replica, as last observed by the health checks. The read
//! path consults it on every replica-aware checkout, so it must be lock-free to read.

use std::sync::atomic::{AtomicBool, Ordering};

use super::shard_set::{Shard, ShardId, ShardSet};

/// One flag per shard (shards without a replica are simply never ready).
pub struct ReplicaStates {
    ready: Vec<AtomicBool>,
}

impl ReplicaStates {
    /// Every replica starts unready until a check has seen it: reads go to primaries first.
    pub fn new(shards: &ShardSet) -> Self {
        Self {
            ready: shards.iter().map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub fn is_ready(&self, shard: ShardId) -> bool {
        self.ready[shard.index()].load(Ordering::Acquire)
    }

    pub fn mark_ready(&self, shard: &Shard) {
        if !self.ready[shard.id().index()].swap(true, Ordering::AcqRel) {
            tracing::info!(
                shard = shard.name(),
                "replica ready: replica-aware reads use it"
            );
        }
    }

    /// Records a failed check; logs only the transition, not every failed probe.
    pub fn mark_unready(&self, shard: &Shard, why: &str) {
        if self.ready[shard.id().index()].swap(false, Ordering::AcqRel) {
            tracing::warn!(
                shard = shard.name(),
                why,
                fallback = shard.replica_fallback().as_str(),
                "replica not ready"
            );
        }
    }
}
