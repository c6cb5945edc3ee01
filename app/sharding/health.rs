//! A shard's health: its primary probed unless its breaker already says it is silent, and
//! its replica probed and its readiness recorded for the read path, once or on a timer.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::replicas::ReplicaStates;
use super::row_security;
use super::shard_set::{Shard, ShardSet};
use crate::pg::health::{Probe, probe};

/// What a probe says about a server whose breaker is open: it is known to be unreachable
/// (refusing, or silent), and saying so at once keeps readiness fast during a partition;
/// the breaker's own recovery task finds out when it answers again. The same word as a
/// failed probe's, so that the two read alike; the circuit's state is reported beside it.
const CIRCUIT_OPEN: &str = "unreachable";

/// Probes a shard's primary, unless its breaker already says it is silent.
pub async fn probe_primary(shard: &Shard, expected: &BTreeSet<String>, timeout: Duration) -> Probe {
    if shard.primary_breaker().is_open() {
        return Probe::down(CIRCUIT_OPEN);
    }
    probe(
        shard.primary_pool(),
        false,
        expected,
        timeout,
        Some(&row_security::probe_session()),
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
