//! The directory router: per-tenant placement that operators and tools change at runtime.
//!
//! A row in the control database's `_autumn_shard_directory` table places a tenant on a shard;
//! tenants without a row fall through to the config pins and then the hash (directory → pin →
//! hash). Lookups, rows and their absence alike, are cached per process for a TTL; the control
//! [`listener`](crate::pg::listener) evicts a key the moment its row changes (Postgres delivers the
//! trigger's NOTIFY at commit), and flushes everything when it reconnects, because notifications
//! sent while it was away are lost.
//!
//! When the control database cannot be reached, cached entries keep serving past their TTL
//! (the directory cannot change while nobody can reach it), and a tenant with nothing cached
//! is refused rather than hashed: its directory state is unknown, and hashing could send a
//! pinned tenant to a shard that does not hold its data.

pub mod cache;
pub mod placed;
pub mod placement;
pub mod table;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use quanta::Instant;

use futures::future::BoxFuture;

use super::move_wait::RouteChanges;
use super::router::{PinRouter, Route, RouteError, RouteVia, ShardRouter};
use super::shard_set::ShardSet;
use super::slot::ShardKey;
use crate::pg::answer_cache::{AnswerCache, Cached};
use crate::pg::breaker::Breaker;
use crate::pg::control::ControlLookups;
use crate::pg::listener::Invalidated;
use crate::pg::pool::PgPool;
use cache::{CAPACITY, Decision, DirectoryCache};

/// Cumulative counters, for `/metrics` and `/actuator/metrics`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct DirectoryStats {
    /// Routed from a fresh cache entry.
    pub hits: u64,
    /// Had to ask the directory (nothing cached, or the entry had expired).
    pub misses: u64,
    /// Served an expired entry because the directory could not be asked.
    pub stale_hits: u64,
    /// Entries dropped because their row changed.
    pub evictions: u64,
    /// Whole-cache flushes (the listener reconnected).
    pub flushes: u64,
    pub entries: usize,
    pub listener_connected: bool,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    stale_hits: AtomicU64,
    evictions: AtomicU64,
    flushes: AtomicU64,
}

/// Routes by the directory, then config pins, then the hash. Share one instance (in an
/// `Arc`) between the request path and the control [`listener`](crate::pg::listener), so both
/// see the same cache.
pub struct DirectoryRouter {
    control: ControlLookups,
    pins: PinRouter,
    cache: DirectoryCache,
    counters: Counters,
    listener_connected: AtomicBool,
    /// Whether the last directory lookup failed, so failures are logged once, not per request.
    lookups_failing: AtomicBool,
    /// Rung after an eviction, so writes waiting out a move route again.
    changes: Arc<RouteChanges>,
}

impl DirectoryRouter {
    /// A router over `shards`' topology (pins and cache TTL) reading the directory through
    /// `control`, with a breaker of its own for the control database.
    pub fn new(control: PgPool, shards: &ShardSet) -> Self {
        Self::with_lookups(
            ControlLookups::new(control, shards.topology().lookup_bounds()),
            shards,
        )
    }

    /// A router reading the directory through `control`, whose breaker it shares with
    /// whatever else the process looks up there.
    pub fn with_lookups(control: ControlLookups, shards: &ShardSet) -> Self {
        Self {
            control,
            pins: PinRouter::from_shard_set(shards),
            cache: AnswerCache::new(shards.topology().directory_cache_ttl, CAPACITY),
            counters: Counters::default(),
            listener_connected: AtomicBool::new(false),
            lookups_failing: AtomicBool::new(false),
            changes: shards.route_changes().clone(),
        }
    }

    /// The control database's breaker: for the liveness monitor, health and metrics.
    pub fn breaker(&self) -> &Arc<Breaker> {
        self.control.breaker()
    }

    pub fn ttl(&self) -> Duration {
        self.cache.ttl()
    }

    /// Routes `key` asking the directory directly, bypassing (and not filling) the cache:
    /// for tools that must see the directory as it is now.
    pub async fn route_uncached(
        &self,
        key: ShardKey<'_>,
        shards: &ShardSet,
    ) -> Result<Route, RouteError> {
        match key.as_text() {
            None => Ok(self.pins.decide(key, shards)),
            Some(text) => self.answer(
                &self.decide(key, self.fetch(text, shards).await?, shards),
                key,
                shards,
            ),
        }
    }

    /// Records a directory answer obtained elsewhere (a bulk read of the table, a
    /// benchmark) as if it had just been looked up.
    pub fn remember(&self, key: &str, shard_name: Option<&str>, shards: &ShardSet) {
        let decision = self.decide(ShardKey::Str(key), shard_name.map(str::to_owned), shards);
        self.cache
            .insert(key.into(), decision, Instant::now(), self.cache.epoch());
    }

    /// Forgets `key` (its row changed).
    pub fn evict(&self, key: &str) {
        if self.cache.evict(key) {
            self.counters.evictions.fetch_add(1, Ordering::Relaxed);
        }
        self.changes.announce();
    }

    /// Forgets every key (changes may have been missed).
    pub fn flush(&self) {
        let n = self.cache.flush();
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(entries = n, "directory cache flushed");
        self.changes.announce();
    }

    pub fn set_listener_connected(&self, connected: bool) {
        self.listener_connected.store(connected, Ordering::Release);
    }

    pub fn listener_connected(&self) -> bool {
        self.listener_connected.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> DirectoryStats {
        let c = &self.counters;
        DirectoryStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            stale_hits: c.stale_hits.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            entries: self.cache.len(),
            listener_connected: self.listener_connected(),
        }
    }

    /// The route a (cached or fresh) directory answer gives `key`: its row's shard, or for a
    /// key without a row, config pins and the live slot map as they are now.
    fn answer(
        &self,
        decision: &Decision,
        key: ShardKey<'_>,
        shards: &ShardSet,
    ) -> Result<Route, RouteError> {
        decision.to_result(|| self.pins.decide(key, shards))
    }

    /// What a directory answer means for `key` here.
    fn decide(&self, key: ShardKey<'_>, row: Option<String>, shards: &ShardSet) -> Decision {
        let Some(name) = row else {
            return Decision::NoRow;
        };
        match shards.by_name(&name) {
            Some(shard) => Decision::Routed(Route {
                slot: key.slot(),
                shard: shard.id(),
                via: RouteVia::Directory,
            }),
            None => {
                tracing::error!(
                    tenant = key.as_text().unwrap_or_default(),
                    shard = %name,
                    "the directory places this tenant on a shard that is not configured; its \
                     requests fail until the row or the topology is fixed"
                );
                Decision::UnknownShard(name.into())
            }
        }
    }

    /// Asks the control database for `key`'s row, within the lookup timeout. While the
    /// control database's breaker is open, fails at once (cached routes keep serving).
    /// The row's shard's latest arrival raises its replica's floor before the route is
    /// used (see [`crate::sharding::arrivals`]).
    async fn fetch(&self, key: &str, shards: &ShardSet) -> Result<Option<String>, RouteError> {
        match self
            .control
            .run(async |c| table::placement_of(c, key).await)
            .await
        {
            Ok(row) => {
                if self.lookups_failing.swap(false, Ordering::AcqRel) {
                    tracing::info!("directory lookups work again");
                }
                Ok(row.map(|(shard, arrival)| {
                    if let Some(arrival) = arrival {
                        shards.arrivals().raise(&[arrival]);
                    }
                    shard
                }))
            }
            Err(cause) => {
                if !self.lookups_failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        %cause,
                        "directory lookups failing: cached routes keep serving past their TTL, \
                         tenants with nothing cached get 503"
                    );
                }
                Err(RouteError::DirectoryUnavailable {
                    cause: cause.to_string(),
                })
            }
        }
    }

    async fn route_missed(
        &self,
        key: &str,
        stale: Option<Decision>,
        shards: &ShardSet,
    ) -> Result<Route, RouteError> {
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let epoch = self.cache.epoch();
        let fetched = Instant::now();
        match self.fetch(key, shards).await {
            Ok(row) => {
                let decision = self.decide(ShardKey::Str(key), row, shards);
                let result = self.answer(&decision, ShardKey::Str(key), shards);
                self.cache.insert(key.into(), decision, fetched, epoch);
                result
            }
            Err(unavailable) => match stale {
                Some(decision) => {
                    self.counters.stale_hits.fetch_add(1, Ordering::Relaxed);
                    self.answer(&decision, ShardKey::Str(key), shards)
                }
                None => Err(unavailable),
            },
        }
    }
}

impl Invalidated for DirectoryRouter {
    fn channel(&self) -> &'static str {
        table::CHANNEL
    }

    fn evict(&self, key: &str) {
        DirectoryRouter::evict(self, key);
    }

    fn flush(&self) {
        DirectoryRouter::flush(self);
    }

    fn set_listener_connected(&self, connected: bool) {
        DirectoryRouter::set_listener_connected(self, connected);
    }
}

impl ShardRouter for DirectoryRouter {
    fn route<'a>(
        &'a self,
        key: ShardKey<'a>,
        shards: &'a ShardSet,
    ) -> BoxFuture<'a, Result<Route, RouteError>> {
        // Directory rows are text; integer keys are routed by pin and hash alone.
        let Some(text) = key.as_text() else {
            return Box::pin(std::future::ready(Ok(self.pins.decide(key, shards))));
        };
        match self.cache.get(text, Instant::now()) {
            Cached::Fresh(decision) => {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                Box::pin(std::future::ready(self.answer(&decision, key, shards)))
            }
            Cached::Expired(decision) => Box::pin(self.route_missed(text, Some(decision), shards)),
            Cached::Absent => Box::pin(self.route_missed(text, None, shards)),
        }
    }

    fn forget(&self, key: &str) {
        self.evict(key);
    }
}
