//! What the read path knows of each shard's replica, without a query per request: its
//! readiness as the health checks last saw it, and its replay position and lag as the
//! replay poller ([`super::replay`]) last read them. Read on every replica-aware checkout,
//! so lock-free to read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::shard_set::{Shard, ShardId, ShardSet};

/// A lag nobody has measured yet (no poll has answered).
const UNKNOWN: u64 = u64::MAX;

/// How often the poller reads a replica's position while reads wait on it: a token read
/// then learns of its write's replay within about this much, not within `replay_poll_ms`.
pub const WAITING_POLL: Duration = Duration::from_millis(2);

/// One shard's replica as last observed, and what its reads did.
struct ReplicaState {
    ready: AtomicBool,
    /// WAL position the replica has replayed, as a byte offset.
    replayed: AtomicU64,
    /// How far behind its primary the replica was at the last poll, in ms.
    lag_ms: AtomicU64,
    /// Woken at every poll, for reads waiting on a token.
    polled: Notify,
    /// Reads waiting on a token right now: while there are any, the poller reads the
    /// replica's position every [`WAITING_POLL`] instead of every `replay_poll_ms`.
    waiting: AtomicU64,
    /// Wakes the poller when a read starts waiting, so that its first look is immediate.
    wanted: Notify,
    replica_reads: AtomicU64,
    primary_reads: AtomicU64,
    token_waits: AtomicU64,
    token_fallbacks: AtomicU64,
}

/// One entry per shard (shards without a replica are simply never ready).
pub struct ReplicaStates {
    states: Vec<ReplicaState>,
}

/// One shard's replica reads, for metrics and the admin page.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReadCounts {
    /// Tenant reads the replica served.
    pub replica: u64,
    /// Tenant reads that went to the primary (no replica, lag, or a token it had not
    /// replayed).
    pub primary: u64,
    /// Reads that waited for the replica to replay their token.
    pub token_waits: u64,
    /// Reads whose token the replica had not replayed in time: served by the primary.
    pub token_fallbacks: u64,
    /// The replica's lag at the last poll, if one has answered.
    pub lag_ms: Option<u64>,
}

impl ReplicaStates {
    /// Every replica starts unready until a check has seen it: reads go to primaries first.
    pub fn new(shards: &ShardSet) -> Self {
        Self {
            states: shards
                .iter()
                .map(|_| ReplicaState {
                    ready: AtomicBool::new(false),
                    replayed: AtomicU64::new(0),
                    lag_ms: AtomicU64::new(UNKNOWN),
                    polled: Notify::new(),
                    waiting: AtomicU64::new(0),
                    wanted: Notify::new(),
                    replica_reads: AtomicU64::new(0),
                    primary_reads: AtomicU64::new(0),
                    token_waits: AtomicU64::new(0),
                    token_fallbacks: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    pub fn is_ready(&self, shard: ShardId) -> bool {
        self.states[shard.index()].ready.load(Ordering::Acquire)
    }

    pub fn mark_ready(&self, shard: &Shard) {
        if !self.states[shard.id().index()]
            .ready
            .swap(true, Ordering::AcqRel)
        {
            tracing::info!(
                shard = shard.name(),
                "replica ready: replica-aware reads use it"
            );
        }
    }

    /// Records a failed check; logs only the transition, not every failed probe.
    pub fn mark_unready(&self, shard: &Shard, why: &str) {
        if self.states[shard.id().index()]
            .ready
            .swap(false, Ordering::AcqRel)
        {
            tracing::warn!(
                shard = shard.name(),
                why,
                fallback = shard.replica_fallback().as_str(),
                "replica not ready"
            );
        }
    }

    /// What a poll found: the replica has replayed `replayed` and was `lag` behind (`None`:
    /// the poll failed, so its lag is unknown). Wakes the reads waiting on a token.
    pub fn polled(&self, shard: ShardId, replayed: u64, lag: Option<Duration>) {
        let s = &self.states[shard.index()];
        s.replayed.fetch_max(replayed, Ordering::AcqRel);
        let lag = lag.map_or(UNKNOWN, |l| {
            l.as_millis().min(u128::from(UNKNOWN - 1)) as u64
        });
        s.lag_ms.store(lag, Ordering::Release);
        s.polled.notify_waiters();
    }

    /// The WAL position the replica has replayed, as last polled.
    pub fn replayed(&self, shard: ShardId) -> u64 {
        self.states[shard.index()].replayed.load(Ordering::Acquire)
    }

    /// The replica's lag at the last poll; `None` until a poll has answered, or after one
    /// failed.
    pub fn lag(&self, shard: ShardId) -> Option<Duration> {
        match self.states[shard.index()].lag_ms.load(Ordering::Acquire) {
            UNKNOWN => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Waits until the replica has replayed `lsn`, at most `budget`; true if it has.
    pub async fn wait_for(&self, shard: ShardId, lsn: u64, budget: Duration) -> bool {
        let s = &self.states[shard.index()];
        if s.replayed.load(Ordering::Acquire) >= lsn {
            return true;
        }
        let deadline = tokio::time::Instant::now() + budget;
        let _waiting = Waiting::start(s);
        loop {
            // Enabled before the check: a poll landing between the two still wakes us.
            let polled = s.polled.notified();
            tokio::pin!(polled);
            polled.as_mut().enable();
            if s.replayed.load(Ordering::Acquire) >= lsn {
                return true;
            }
            if tokio::time::timeout_at(deadline, polled).await.is_err() {
                return s.replayed.load(Ordering::Acquire) >= lsn;
            }
        }
    }

    /// Whether reads are waiting on `shard`'s replica (the poller then polls fast).
    pub fn has_waiters(&self, shard: ShardId) -> bool {
        self.states[shard.index()].waiting.load(Ordering::Acquire) > 0
    }

    /// Resolves when a read starts waiting on `shard`'s replica (at once if one started
    /// since the last call).
    pub async fn waiter_arrived(&self, shard: ShardId) {
        self.states[shard.index()].wanted.notified().await;
    }

    /// Counts a tenant read by where it went.
    pub fn count_read(&self, shard: ShardId, on_replica: bool) {
        let s = &self.states[shard.index()];
        let counter = if on_replica {
            &s.replica_reads
        } else {
            &s.primary_reads
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a read that waited for its token: `met` if the replica replayed it in time.
    pub fn count_token_wait(&self, shard: ShardId, met: bool) {
        let s = &self.states[shard.index()];
        s.token_waits.fetch_add(1, Ordering::Relaxed);
        if !met {
            s.token_fallbacks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a read whose token could not be honoured on the replica without waiting.
    pub fn count_token_fallback(&self, shard: ShardId) {
        self.states[shard.index()]
            .token_fallbacks
            .fetch_add(1, Ordering::Relaxed);
    }

    pub fn counts(&self, shard: ShardId) -> ReadCounts {
        let s = &self.states[shard.index()];
        ReadCounts {
            replica: s.replica_reads.load(Ordering::Relaxed),
            primary: s.primary_reads.load(Ordering::Relaxed),
            token_waits: s.token_waits.load(Ordering::Relaxed),
            token_fallbacks: s.token_fallbacks.load(Ordering::Relaxed),
            lag_ms: self.lag(shard).map(|l| l.as_millis() as u64),
        }
    }
}

/// One read waiting on a replica, for as long as it lives.
struct Waiting<'a>(&'a ReplicaState);

impl<'a> Waiting<'a> {
    fn start(s: &'a ReplicaState) -> Self {
        s.waiting.fetch_add(1, Ordering::AcqRel);
        s.wanted.notify_one();
        Waiting(s)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}
