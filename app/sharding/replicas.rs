//! Readiness of each shard's read replica, as last observed by the health checks. The read
//! path consults it on every replica-aware checkout, so it must be lock-free to read.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::shard_set::{ShardId, ShardSet};

struct ReplicaState {
    ready: AtomicBool,
    detail: Mutex<String>,
}

/// One entry per shard (shards without a replica are simply never ready).
pub struct ReplicaStates {
    states: Vec<ReplicaState>,
}

impl ReplicaStates {
    /// Every replica starts unready until a check has seen it: reads go to primaries first.
    pub fn new(shards: &ShardSet) -> Self {
        Self {
            states: shards
                .iter()
                .map(|_| ReplicaState {
                    ready: AtomicBool::new(false),
                    detail: Mutex::new("not checked yet".to_owned()),
                })
                .collect(),
        }
    }

    pub fn is_ready(&self, shard: ShardId) -> bool {
        self.states[shard.index()].ready.load(Ordering::Acquire)
    }

    pub fn detail(&self, shard: ShardId) -> String {
        self.states[shard.index()]
            .detail
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    }

    pub fn mark_ready(&self, shard: ShardId) {
        self.set(shard, true, "streaming and in sync".to_owned());
    }

    pub fn mark_unready(&self, shard: ShardId, why: String) {
        self.set(shard, false, why);
    }

    fn set(&self, shard: ShardId, ready: bool, detail: String) {
        let state = &self.states[shard.index()];
        if let Ok(mut d) = state.detail.lock() {
            *d = detail;
        }
        state.ready.store(ready, Ordering::Release);
    }
}
