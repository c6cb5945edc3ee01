//! Waiting out a move's cutover: a write that a shard refused because its tenant is fenced
//! waits here, bounded, for the fence to lift, and a write refused as "departed" (this
//! process routed by a stale answer) is sent once, at once, to the shard the refusal names.
//! Clients see a short delay instead of a `503`; the shard-side fence stays exactly as
//! strong, since every retry is checked by a shard's guard again.
//!
//! Why a retry is safe: the guard refuses inside the write's own statement, so Postgres
//! rolls the statement (or the transaction it is in) back before anything commits. A
//! refused write changed nothing, and sending it again cannot apply it twice. Writes whose
//! outcome is unknown (a lost connection, a cut-off statement) are never retried here.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use super::topology::MoveWaitPolicy;

/// The first pause when no routing change wakes a waiter; it doubles up to `MAX_PAUSE`.
/// A fence that lifts without a re-pin (an aborted or capped move) says nothing, so the
/// pauses are what find out.
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Rung when this process's routing may have changed: the directory evicted an entry or
/// the live slot map installed a new version. A re-pin notifies both ways.
#[derive(Default)]
pub struct RouteChanges(Notify);

impl RouteChanges {
    pub fn announce(&self) {
        self.0.notify_waiters();
    }

    /// A future that completes at the next announcement after it was enabled.
    pub fn next(&self) -> Notified<'_> {
        self.0.notified()
    }
}

/// One process's waits: the policy and how many are waiting now, plus counters.
pub struct MoveWaits {
    policy: MoveWaitPolicy,
    waiting: AtomicUsize,
    counters: WaitCounters,
}

/// What this process's waits did (the histogram of wait times is recorded directly).
#[derive(Default)]
struct WaitCounters {
    waited: AtomicU64,
    rerouted: AtomicU64,
    over_budget: AtomicU64,
    over_cap: AtomicU64,
}

/// The counters as metrics show them.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct MoveWaitStats {
    /// Requests that waited for a fence to lift (and were answered either way).
    pub waited: u64,
    /// Writes sent on to the shard a "departed" refusal named.
    pub rerouted: u64,
    /// Requests refused after waiting their whole budget.
    pub over_budget: u64,
    /// Requests refused at once because `move_wait_max` were waiting.
    pub over_cap: u64,
    /// Requests waiting now.
    pub waiting: usize,
}

/// Why a refused write goes back to the client after all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// Waiting is off (`move_wait_ms = 0`).
    Off,
    /// The request waited its whole budget and the fence is still up.
    Budget,
    /// `move_wait_max` requests of this process are waiting already.
    Cap,
    /// A second "departed" refusal: routing does not settle within one request.
    Departed,
}

impl MoveWaits {
    pub fn new(policy: MoveWaitPolicy) -> Self {
        Self {
            policy,
            waiting: AtomicUsize::new(0),
            counters: WaitCounters::default(),
        }
    }

    pub fn policy(&self) -> MoveWaitPolicy {
        self.policy
    }

    pub fn stats(&self) -> MoveWaitStats {
        let c = &self.counters;
        MoveWaitStats {
            waited: c.waited.load(Ordering::Relaxed),
            rerouted: c.rerouted.load(Ordering::Relaxed),
            over_budget: c.over_budget.load(Ordering::Relaxed),
            over_cap: c.over_cap.load(Ordering::Relaxed),
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }

    /// The wait state of one request's write.
    pub fn begin(&self) -> Wait<'_> {
        Wait {
            waits: self,
            started: Instant::now(),
            admitted: false,
            followed_departure: false,
            pause: FIRST_PAUSE,
            waited: Duration::ZERO,
        }
    }
}

/// One request's write going through a cutover.
pub struct Wait<'a> {
    waits: &'a MoveWaits,
    started: Instant,
    /// Whether this request holds one of the process's `move_wait_max` places.
    admitted: bool,
    followed_departure: bool,
    pause: Duration,
    waited: Duration,
}

impl Wait<'_> {
    /// How long this request has waited for fences so far.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The shard refused the write as fenced: waits until `change` fires (routing changed)
    /// or a pause passes, whichever is first, so the caller can route and try again.
    /// `change` must have been enabled before the write was sent, so that a re-pin between
    /// the refusal and this call is not missed.
    pub async fn fenced(&mut self, change: std::pin::Pin<&mut Notified<'_>>) -> Result<(), GiveUp> {
        let policy = self.waits.policy;
        if policy.budget.is_zero() {
            return Err(GiveUp::Off);
        }
        if !self.admitted {
            let taken = self
                .waits
                .waiting
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < policy.max).then_some(n + 1)
                });
            if taken.is_err() {
                self.waits.counters.over_cap.fetch_add(1, Ordering::Relaxed);
                return Err(GiveUp::Cap);
            }
            self.admitted = true;
        }
        let left = policy.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            self.waits
                .counters
                .over_budget
                .fetch_add(1, Ordering::Relaxed);
            return Err(GiveUp::Budget);
        }
        let paused = Instant::now();
        let _ = tokio::time::timeout(self.pause.min(left), change).await;
        self.waited += paused.elapsed();
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        Ok(())
    }

    /// The shard refused the write as departed: the caller may send it once, at once, to
    /// the shard the refusal names (unless waiting is off: then clients see every refusal).
    pub fn departed(&mut self) -> Result<(), GiveUp> {
        if self.waits.policy.budget.is_zero() {
            return Err(GiveUp::Off);
        }
        if self.followed_departure {
            return Err(GiveUp::Departed);
        }
        self.followed_departure = true;
        self.waits.counters.rerouted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if self.admitted {
            self.waits.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        if !self.waited.is_zero() {
            self.waits.counters.waited.fetch_add(1, Ordering::Relaxed);
            metrics::histogram!("move_wait_seconds").record(self.waited.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(budget_ms: u64, max: usize) -> MoveWaits {
        MoveWaits::new(MoveWaitPolicy {
            budget: Duration::from_millis(budget_ms),
            max,
        })
    }

    #[tokio::test]
    async fn a_zero_budget_never_waits_nor_follows_a_departure() {
        let waits = waits(0, 10);
        let changes = RouteChanges::default();
        let mut wait = waits.begin();
        let change = std::pin::pin!(changes.next());
        assert_eq!(wait.fenced(change).await, Err(GiveUp::Off));
        assert_eq!(wait.departed(), Err(GiveUp::Off));
        assert_eq!(waits.stats().waiting, 0);
    }

    #[tokio::test]
    async fn waiting_ends_at_the_budget_and_frees_its_place() {
        let waits = waits(120, 10);
        let changes = RouteChanges::default();
        let started = Instant::now();
        let mut wait = waits.begin();
        let outcome = loop {
            let mut change = std::pin::pin!(changes.next());
            change.as_mut().enable();
            if let Err(why) = wait.fenced(change).await {
                break why;
            }
            assert_eq!(waits.stats().waiting, 1);
        };
        assert_eq!(outcome, GiveUp::Budget);
        assert!(started.elapsed() >= Duration::from_millis(120));
        assert!(wait.waited() >= Duration::from_millis(100));
        drop(wait);
        assert_eq!(waits.stats().waiting, 0);
        assert_eq!(waits.stats().over_budget, 1);
        assert_eq!(waits.stats().waited, 1);
    }

    #[tokio::test]
    async fn a_routing_change_wakes_a_waiter_before_its_pause_ends() {
        let waits = waits(5_000, 10);
        let changes = RouteChanges::default();
        let mut wait = waits.begin();
        // Long pauses: only the announcement can end this one quickly.
        wait.pause = Duration::from_secs(3);
        let mut change = std::pin::pin!(changes.next());
        change.as_mut().enable();
        // Announced after the refusal but before the waiter sleeps: not missed.
        changes.announce();
        let started = Instant::now();
        wait.fenced(change).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn past_the_cap_a_request_is_refused_while_the_admitted_ones_wait() {
        let waits = waits(5_000, 1);
        let changes = RouteChanges::default();
        let mut first = waits.begin();
        first.pause = Duration::from_millis(1);
        first.fenced(std::pin::pin!(changes.next())).await.unwrap();
        let mut second = waits.begin();
        assert_eq!(
            second.fenced(std::pin::pin!(changes.next())).await,
            Err(GiveUp::Cap)
        );
        drop(first);
        second.pause = Duration::from_millis(1);
        second.fenced(std::pin::pin!(changes.next())).await.unwrap();
        assert_eq!(waits.stats().over_cap, 1);
    }

    #[test]
    fn a_departed_write_is_followed_once() {
        let waits = waits(2_000, 10);
        let mut wait = waits.begin();
        assert_eq!(wait.departed(), Ok(()));
        assert_eq!(wait.departed(), Err(GiveUp::Departed));
    }
}
