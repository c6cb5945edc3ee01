//! A shard's health: its primary probed unless its breaker already says it is silent, and
//! its replica probed and its readiness recorded for the read path, once or on a timer.
//!
//! Readiness checks a primary in full (its role, recovery, migrations) until that passes,
//! and then again only every few minutes or after its server was lost: in between, the
//! liveness monitor's one session per server says whether it answers. So a probe of a fleet
//! costs a query per server, not per shard, and an idle shard's pool is left to empty.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::replicas::ReplicaStates;
use super::row_security;
use super::shard_set::{Shard, ShardSet};
use crate::pg::health::{Probe, probe};
use crate::pg::pool::AfterCheck;

/// What a probe says about a server whose breaker is open: it is known to be unreachable
/// (refusing, or silent), and saying so at once keeps readiness fast during a partition;
/// the breaker's own recovery task finds out when it answers again. The same word as a
/// failed probe's, so that the two read alike; the circuit's state is reported beside it.
const CIRCUIT_OPEN: &str = "unreachable";

/// How long a primary's passed full check stands while its breaker stays closed. Each
/// shard's is stretched by up to as much again, by its place in the set, so that a fleet's
/// rechecks spread out instead of arriving together.
pub const PRIMARY_RECHECK: Duration = Duration::from_secs(300);

/// The shard primaries whose full check passed, per shard name.
#[derive(Default)]
pub struct PrimaryChecks {
    passed: Mutex<HashMap<String, Passed>>,
}

struct Passed {
    until: Instant,
    /// The breaker's trips when it passed: a trip since means the server was lost (a
    /// restart, a failover), and what it is now must be checked again.
    trips: u64,
    probe: Probe,
}

impl PrimaryChecks {
    /// Probes a shard's primary in full unless a passed check of it still stands; with the
    /// breaker open it is down whatever was found before.
    pub async fn probe(
        &self,
        set: &ShardSet,
        shard: &Shard,
        expected: &BTreeSet<String>,
        timeout: Duration,
    ) -> Probe {
        let breaker = shard.primary_breaker();
        if breaker.is_open() {
            return Probe::down(CIRCUIT_OPEN);
        }
        let trips = breaker.trips();
        if let Some(p) = self.lock().get(shard.name())
            && p.trips == trips
            && Instant::now() < p.until
        {
            return p.probe.clone();
        }
        // Closed after: rechecks are minutes apart, and an idle shard's pool stays empty.
        let probe = probe_primary(shard, expected, timeout, AfterCheck::Close).await;
        if probe.up {
            let place = shard.id().index() as u32;
            let spread = PRIMARY_RECHECK * place / set.len().max(1) as u32;
            let passed = Passed {
                until: Instant::now() + PRIMARY_RECHECK + spread,
                trips,
                probe: probe.clone(),
            };
            self.lock().insert(shard.name().to_owned(), passed);
        } else {
            self.lock().remove(shard.name());
        }
        probe
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Passed>> {
        self.passed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Probes a shard's primary in full, unless its breaker already says it is silent.
pub async fn probe_primary(
    shard: &Shard,
    expected: &BTreeSet<String>,
    timeout: Duration,
    after: AfterCheck,
) -> Probe {
    if shard.primary_breaker().is_open() {
        return Probe::down(CIRCUIT_OPEN);
    }
    probe(
        shard.primary_pool(),
        false,
        expected,
        timeout,
        Some(&row_security::probe_session()),
        after,
    )
    .await
}

/// Probes a shard's replica, if it has one, and records the result for the read path.
pub async fn check_replica(
    shard: &Shard,
    states: &ReplicaStates,
    expected: &BTreeSet<String>,
    timeout: Duration,
) -> Option<Probe> {
    let pool = shard.replica_pool()?;
    let p = if shard.replica_breaker().is_some_and(|b| b.is_open()) {
        Probe::down(CIRCUIT_OPEN)
    } else {
        probe(
            pool,
            true,
            expected,
            timeout,
            Some(&row_security::probe_session()),
            AfterCheck::Return,
        )
        .await
    };
    if p.up {
        states.mark_ready(shard);
    } else {
        states.mark_unready(shard, &p.detail);
    }
    Some(p)
}

/// Probes every replica once and records the results for the read path.
pub async fn refresh_replicas(
    shards: &ShardSet,
    states: &ReplicaStates,
    expected: &BTreeSet<String>,
    timeout: Duration,
) {
    let checks = shards
        .iter()
        .map(|shard| check_replica(shard, states, expected, timeout));
    futures::future::join_all(checks).await;
}

/// Keeps replica readiness fresh between readiness probes, so reads move back to a replica
/// that recovered (and off one that failed) without waiting for an orchestrator's probe.
pub fn spawn_replica_monitor(
    shards: Arc<ShardSet>,
    states: Arc<ReplicaStates>,
    expected: Arc<BTreeSet<String>>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            refresh_replicas(&shards, &states, &expected, every).await;
        }
    })
}
