//! The live slot map: `autumn.toml`'s `slots` (the documented baseline) with the control
//! database's `_autumn_slot_map` overrides on top, which range moves write.
//!
//! Every process holds one [`LiveSlotMap`] in its [`ShardSet`](super::ShardSet), so every
//! hash route reads it. The table's trigger notifies on every change and the control
//! [`listener`](crate::pg::listener) asks for a reload (also after it reconnects, because
//! notifications sent meanwhile are lost); a periodic reload bounds how long a process
//! whose listener is down can miss one. A process whose map is stale is harmless: the
//! shard that gave a range away refuses its keys' writes (the shard migration
//! `create_slot_guard`), and such a refusal asks for a reload too.
//!
//! Precedence, first match wins: tenant directory row, config pin, slot override, config
//! slots.

mod owners;
mod table;

pub use owners::{Drift, Override, Owner, Run, SlotOwners};
pub use table::{CompactError, Compacted, assign, compact_overrides, current, load};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use diesel_async::AsyncPgConnection;
use tokio::sync::Notify;

use super::arrivals::{self, Arrivals};
use super::move_wait::RouteChanges;
use super::slot_range::SlotRange;
use super::topology::Topology;
use crate::pg::control::{ControlLookups, LookupError};
use crate::pg::listener::Invalidated;

/// The channel `_autumn_slot_map`'s trigger notifies on (always with an empty payload).
pub const CHANNEL: &str = "autumn_slot_map";

/// Cumulative figures, for metrics and health.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct SlotMapStats {
    pub overrides: usize,
    pub reloads: u64,
    pub reload_failures: u64,
    pub listener_connected: bool,
}

/// The map every route in the process reads: swapped whole on reload, read without a lock.
pub struct LiveSlotMap {
    current: ArcSwap<SlotOwners>,
    reload: Notify,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
    listener_connected: AtomicBool,
    /// Whether the last reload failed, so a failing streak is logged once.
    failing: AtomicBool,
    /// Rung after an install that changed an owner.
    changes: Arc<RouteChanges>,
    /// Raised from the same reload, before the map it came with is installed.
    arrivals: Arc<Arrivals>,
}

impl LiveSlotMap {
    pub fn new(topology: &Topology, changes: Arc<RouteChanges>, arrivals: Arc<Arrivals>) -> Self {
        Self {
            changes,
            arrivals,
            current: ArcSwap::from_pointee(SlotOwners::baseline(topology)),
            reload: Notify::new(),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            listener_connected: AtomicBool::new(false),
            failing: AtomicBool::new(false),
        }
    }

    #[inline]
    pub fn owner(&self, slot: u16) -> Owner {
        self.current.load().owner(slot)
    }

    pub fn snapshot(&self) -> Arc<SlotOwners> {
        self.current.load_full()
    }

    /// Installs `overrides` over the baseline.
    pub fn install(&self, topology: &Topology, overrides: Vec<Override>) {
        let next = SlotOwners::build(topology, overrides);
        for problem in next.problems() {
            tracing::error!("{problem}");
        }
        let owners = |map: &SlotOwners| -> Vec<(SlotRange, String)> {
            map.overrides()
                .iter()
                .map(|o| (o.range, o.shard.clone()))
                .collect()
        };
        let changed = owners(&next) != owners(&self.current.load());
        if changed {
            tracing::info!(overrides = ?next.overrides().iter().map(|o| format!("{}→{}", o.range, o.shard)).collect::<Vec<_>>(), "slot map changed");
        }
        self.current.store(Arc::new(next));
        self.reloads.fetch_add(1, Ordering::Relaxed);
        if changed {
            // After the store: a woken write routes by the new map.
            self.changes.announce();
        }
    }

    /// Reads the overrides on `conn` and installs them (tools that route once).
    pub async fn load_from(
        &self,
        topology: &Topology,
        conn: &mut AsyncPgConnection,
    ) -> diesel::QueryResult<()> {
        let overrides = load(conn).await?;
        // Read after the map: a move records an arrival before it changes the map.
        self.arrivals.raise(&arrivals::load(conn).await?);
        self.install(topology, overrides);
        Ok(())
    }

    /// Asks the reloader to read the table again soon.
    pub fn request_reload(&self) {
        self.reload.notify_one();
    }

    /// Reads the overrides through `lookups` and installs them; on failure keeps the map
    /// and says why (for the log, never for clients).
    pub async fn reload(
        &self,
        topology: &Topology,
        lookups: &ControlLookups,
    ) -> Result<(), LookupError> {
        // The arrivals are read after the map: a move records one before it changes the map.
        let read = lookups.run(async |c| Ok((load(c).await?, arrivals::load(c).await?)));
        match read.await {
            Ok((overrides, arrived)) => {
                self.arrivals.raise(&arrived);
                self.install(topology, overrides);
                if self.failing.swap(false, Ordering::AcqRel) {
                    tracing::info!("the slot map reloads again");
                }
                Ok(())
            }
            Err(cause) => {
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                if !self.failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        %cause,
                        "cannot reload the slot map; routing by the one loaded last (the \
                         shards refuse what it would misroute), retrying each second"
                    );
                }
                Err(cause)
            }
        }
    }

    /// Keeps the map current until aborted: reloads when asked (a notification, a shard's
    /// refusal) and every `every` regardless; retries a failed reload each second.
    pub fn spawn_reloader(
        self: Arc<Self>,
        topology: Arc<Topology>,
        lookups: ControlLookups,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = self.reload.notified() => {}
                    _ = tokio::time::sleep(every) => {}
                }
                while self.reload(&topology, &lookups).await.is_err() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        })
    }

    pub fn stats(&self) -> SlotMapStats {
        SlotMapStats {
            overrides: self.current.load().overrides().len(),
            reloads: self.reloads.load(Ordering::Relaxed),
            reload_failures: self.reload_failures.load(Ordering::Relaxed),
            listener_connected: self.listener_connected.load(Ordering::Acquire),
        }
    }
}

impl Invalidated for LiveSlotMap {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn evict(&self, _key: &str) {
        self.request_reload();
    }

    fn flush(&self) {
        self.request_reload();
    }

    fn set_listener_connected(&self, connected: bool) {
        self.listener_connected.store(connected, Ordering::Release);
    }
}
