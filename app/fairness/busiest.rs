//! The busiest tenants of this process over the last one to two minutes, with bounded
//! memory whatever the number of tenants: a Space-Saving summary of `CAPACITY` counters
//! (a tenant that is not tracked takes the place of the least busy one and inherits its
//! count as an error bound), plus exact request counts per shard so that each tenant's share
//! of its shard can be told.
//!
//! Two windows are kept, the current one and the one before it; a report merges them, so it
//! always covers at least one whole window. Per-tenant latency is kept in coarse buckets,
//! enough to tell a tenant whose p99 is 5 ms from one whose p99 is 500 ms.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::tenancy::TenantId;

/// Tenants tracked at once. Far more than are reported, so that the reported ones are
/// exact unless the traffic is spread very thin.
pub const CAPACITY: usize = 64;
/// Tenants reported (in `/metrics` and on the admin page).
pub const TOP: usize = 10;
pub const WINDOW: Duration = Duration::from_secs(60);

/// Upper bounds of the latency buckets, in microseconds (the last one catches the rest).
const BUCKETS_US: [u64; 14] = [
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    u64::MAX,
];

/// What one response tells about its tenant.
pub struct Outcome<'a> {
    /// The shard that served it; `None` when the request never reached one (refused by the
    /// bulkhead, failed before routing).
    pub shard: Option<&'a str>,
    pub latency: Duration,
    /// Refused by the bulkhead.
    pub rejected: bool,
}

pub struct Busiest {
    windows: Mutex<Windows>,
    window: Duration,
}

struct Windows {
    current: Window,
    previous: Option<Window>,
}

struct Window {
    started: Instant,
    entries: Vec<Entry>,
    index: HashMap<TenantId, usize, foldhash::fast::RandomState>,
    /// Requests served by each shard (exact), in first-seen order.
    shards: Vec<(String, u64)>,
}

#[derive(Clone)]
struct Entry {
    tenant: TenantId,
    /// Space-Saving count: this tenant's requests plus at most `error` others'.
    count: u64,
    error: u64,
    rejected: u64,
    /// Requests served per shard (a tenant moved during the window has two).
    served: Vec<(String, u64)>,
    latency: [u64; BUCKETS_US.len()],
}

/// One tenant in a report.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct TenantLoad {
    pub tenant: String,
    /// The shard that served most of its requests (`None` if none was served).
    pub shard: Option<String>,
    pub requests: u64,
    /// How many of `requests` may belong to other tenants (Space-Saving's bound; 0 = exact).
    pub error: u64,
    pub rejected: u64,
    /// Its requests on `shard` over all requests that shard served.
    pub shard_share: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The report: busiest tenants first, and each shard's total.
#[derive(Debug, Clone, Serialize)]
pub struct BusiestReport {
    pub window_seconds: u64,
    pub tenants: Vec<TenantLoad>,
    pub shards: Vec<(String, u64)>,
}

impl Busiest {
    pub fn new() -> Self {
        Self::with_window(WINDOW)
    }

    pub fn with_window(window: Duration) -> Self {
        Self {
            windows: Mutex::new(Windows {
                current: Window::new(Instant::now()),
                previous: None,
            }),
            window,
        }
    }

    pub fn record(&self, tenant: &TenantId, outcome: Outcome<'_>) {
        let now = Instant::now();
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        windows.rotate(now, self.window);
        windows.current.record(tenant, &outcome);
    }

    /// The `TOP` busiest tenants of the current and previous windows.
    pub fn report(&self) -> BusiestReport {
        let now = Instant::now();
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        windows.rotate(now, self.window);
        let mut merged = windows.current.clone_counts();
        if let Some(previous) = &windows.previous {
            merged.absorb(previous);
        }
        let span = now.duration_since(
            windows
                .previous
                .as_ref()
                .map_or(windows.current.started, |p| p.started),
        );
        drop(windows);
        merged.report(span)
    }
}

impl Default for Busiest {
    fn default() -> Self {
        Self::new()
    }
}

impl Windows {
    fn rotate(&mut self, now: Instant, window: Duration) {
        let age = now.duration_since(self.current.started);
        if age < window {
            return;
        }
        let fresh = Window::new(now);
        // After a quiet spell of two windows or more, the last window is not "previous".
        let current = std::mem::replace(&mut self.current, fresh);
        self.previous = (age < window * 2).then_some(current);
    }
}

impl Window {
    fn new(started: Instant) -> Self {
        Self {
            started,
            entries: Vec::with_capacity(CAPACITY),
            index: HashMap::default(),
            shards: Vec::new(),
        }
    }

    fn record(&mut self, tenant: &TenantId, outcome: &Outcome<'_>) {
        let slot = match self.index.get(tenant) {
            Some(&i) => i,
            None => self.admit(tenant),
        };
        let entry = &mut self.entries[slot];
        entry.count += 1;
        if outcome.rejected {
            entry.rejected += 1;
        }
        if let Some(shard) = outcome.shard {
            add(&mut entry.served, shard, 1);
            add(&mut self.shards, shard, 1);
        }
        let us = u64::try_from(outcome.latency.as_micros()).unwrap_or(u64::MAX);
        let bucket = BUCKETS_US.iter().position(|&b| us <= b).unwrap_or(0);
        entry.latency[bucket] += 1;
    }

    /// Finds a counter for an untracked tenant: a free one, else the least busy one's.
    fn admit(&mut self, tenant: &TenantId) -> usize {
        if self.entries.len() < CAPACITY {
            self.entries.push(Entry::new(tenant.clone(), 0));
            let i = self.entries.len() - 1;
            self.index.insert(tenant.clone(), i);
            return i;
        }
        let (i, least) = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.count)
            .map(|(i, e)| (i, e.count))
            .expect("CAPACITY > 0");
        self.index.remove(&self.entries[i].tenant);
        self.entries[i] = Entry::new(tenant.clone(), least);
        self.index.insert(tenant.clone(), i);
        i
    }

    fn clone_counts(&self) -> Window {
        Window {
            started: self.started,
            entries: self.entries.clone(),
            index: self.index.clone(),
            shards: self.shards.clone(),
        }
    }

    /// Adds another window's counts (a merge of two summaries: tracked tenants add up; the
    /// merged list may exceed `CAPACITY`, which a report trims).
    fn absorb(&mut self, other: &Window) {
        for (shard, n) in &other.shards {
            add(&mut self.shards, shard, *n);
        }
        for theirs in &other.entries {
            match self.index.get(&theirs.tenant) {
                Some(&i) => {
                    let ours = &mut self.entries[i];
                    ours.count += theirs.count;
                    ours.error += theirs.error;
                    ours.rejected += theirs.rejected;
                    for (shard, n) in &theirs.served {
                        add(&mut ours.served, shard, *n);
                    }
                    for (a, b) in ours.latency.iter_mut().zip(theirs.latency) {
                        *a += b;
                    }
                }
                None => {
                    self.index.insert(theirs.tenant.clone(), self.entries.len());
                    self.entries.push(theirs.clone());
                }
            }
        }
    }

    fn report(mut self, span: Duration) -> BusiestReport {
        self.entries
            .sort_by(|a, b| b.count.cmp(&a.count).then(a.tenant.cmp(&b.tenant)));
        self.entries.truncate(TOP);
        let shard_total = |name: &str| {
            self.shards
                .iter()
                .find(|(s, _)| s == name)
                .map_or(0, |(_, n)| *n)
        };
        let tenants = self
            .entries
            .iter()
            .map(|e| {
                let main = e.served.iter().max_by_key(|(_, n)| *n);
                let shard_share = main.map_or(0.0, |(shard, n)| {
                    *n as f64 / shard_total(shard).max(1) as f64
                });
                TenantLoad {
                    tenant: e.tenant.to_string(),
                    shard: main.map(|(s, _)| s.clone()),
                    requests: e.count,
                    error: e.error,
                    rejected: e.rejected,
                    shard_share,
                    p50_ms: quantile_ms(&e.latency, 0.50),
                    p99_ms: quantile_ms(&e.latency, 0.99),
                }
            })
            .collect();
        BusiestReport {
            window_seconds: span.as_secs(),
            tenants,
            shards: self.shards,
        }
    }
}

impl Entry {
    fn new(tenant: TenantId, inherited: u64) -> Self {
        Self {
            tenant,
            count: inherited,
            error: inherited,
            rejected: 0,
            served: Vec::new(),
            latency: [0; BUCKETS_US.len()],
        }
    }
}

fn add(counts: &mut Vec<(String, u64)>, name: &str, n: u64) {
    match counts.iter_mut().find(|(s, _)| s == name) {
        Some((_, count)) => *count += n,
        None => counts.push((name.to_owned(), n)),
    }
}

/// The upper bound of the bucket holding quantile `q`, in milliseconds (0 when empty).
fn quantile_ms(buckets: &[u64; BUCKETS_US.len()], q: f64) -> f64 {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= rank {
            // The open-ended last bucket is reported at its lower bound.
            let bound = if i + 1 == BUCKETS_US.len() {
                BUCKETS_US[i - 1]
            } else {
                BUCKETS_US[i]
            };
            return bound as f64 / 1000.0;
        }
    }
    0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    fn served(shard: &str, ms: u64) -> Outcome<'_> {
        Outcome {
            shard: Some(shard),
            latency: Duration::from_millis(ms),
            rejected: false,
        }
    }

    #[test]
    fn a_whale_among_many_minnows_is_reported_first_with_its_exact_share() {
        let busiest = Busiest::new();
        let whale = tenant("whale");
        // 1 000 minnows, 3 requests each, interleaved with the whale's 3 000: far more
        // tenants than counters, yet the whale is counted exactly.
        for round in 0..3 {
            for m in 0..1_000 {
                busiest.record(&tenant(&format!("minnow-{m}")), served("shard0", 2));
                busiest.record(&whale, served("shard0", 40 + round));
            }
        }
        let report = busiest.report();
        let top = &report.tenants[0];
        assert_eq!(top.tenant, "whale");
        assert_eq!((top.requests, top.error), (3_000, 0));
        assert_eq!(top.shard.as_deref(), Some("shard0"));
        assert!((top.shard_share - 0.5).abs() < 1e-9, "{}", top.shard_share);
        assert_eq!(top.p99_ms, 50.0);
        assert_eq!(report.shards, vec![("shard0".to_owned(), 6_000)]);
        assert!(report.tenants.len() <= TOP);
    }

    #[test]
    fn refused_requests_count_for_the_tenant_but_for_no_shard() {
        let busiest = Busiest::new();
        let t = tenant("t");
        busiest.record(&t, served("shard1", 1));
        busiest.record(
            &t,
            Outcome {
                shard: None,
                latency: Duration::ZERO,
                rejected: true,
            },
        );
        let report = busiest.report();
        assert_eq!(report.tenants[0].requests, 2);
        assert_eq!(report.tenants[0].rejected, 1);
        assert_eq!(report.shards, vec![("shard1".to_owned(), 1)]);
    }

    #[test]
    fn a_report_covers_the_previous_window_and_forgets_older_ones() {
        let busiest = Busiest::with_window(Duration::from_millis(50));
        busiest.record(&tenant("old"), served("shard0", 1));
        std::thread::sleep(Duration::from_millis(60));
        busiest.record(&tenant("new"), served("shard0", 1));
        let names: Vec<_> = busiest
            .report()
            .tenants
            .into_iter()
            .map(|t| t.tenant)
            .collect();
        assert_eq!(names, ["new", "old"]);
        std::thread::sleep(Duration::from_millis(110));
        assert!(busiest.report().tenants.is_empty());
    }
}
