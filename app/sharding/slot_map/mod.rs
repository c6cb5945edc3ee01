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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use tokio::sync::Notify;

use super::move_wait::RouteChanges;
use super::slot::SLOT_COUNT;
use super::slot_range::{SlotRange, compact};
use super::topology::Topology;
use crate::pg::control::{ControlLookups, LookupError};
use crate::pg::listener::Invalidated;

/// The channel `_autumn_slot_map`'s trigger notifies on (always with an empty payload).
pub const CHANNEL: &str = "autumn_slot_map";

/// One `_autumn_slot_map` row: a range whose owner is not the one `autumn.toml` names.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Override {
    pub range: SlotRange,
    pub shard: String,
    /// The range move that wrote it.
    pub move_id: Option<i64>,
}

/// Who owns one slot, and which rule said so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Index into the topology's shards.
    pub shard: usize,
    /// True when a slot override decided (even one that names the configured owner).
    pub overridden: bool,
}

/// One snapshot of the effective map.
#[derive(Clone, Debug)]
pub struct SlotOwners {
    owners: Vec<Owner>,
    overrides: Vec<Override>,
    /// Overrides that cannot apply (a shard this topology lacks): their slots keep the
    /// configured owner, and the log and `bookmarks slots` say so.
    problems: Vec<String>,
}

/// A run of slots with one owner and one source, as `bookmarks slots` prints it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Run {
    pub slots: String,
    pub shard: String,
    /// `config` (autumn.toml) or `slot_map` (a control database override).
    pub source: &'static str,
}

/// One shard whose slots differ from its `slots = [...]` in `autumn.toml`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Drift {
    pub shard: String,
    pub config: String,
    pub live: String,
    /// The line to write in that shard's `[[database.shards]]` block.
    pub edit: String,
}

impl SlotOwners {
    /// The map `autumn.toml` alone gives.
    pub fn baseline(topology: &Topology) -> Self {
        Self::build(topology, Vec::new())
    }

    pub fn build(topology: &Topology, overrides: Vec<Override>) -> Self {
        let mut owners: Vec<Owner> = (0..SLOT_COUNT)
            .map(|slot| Owner {
                shard: topology.owner_of(slot),
                overridden: false,
            })
            .collect();
        let mut problems = Vec::new();
        for o in &overrides {
            match topology
                .shards
                .iter()
                .position(|s| s.name.as_str() == o.shard)
            {
                Some(shard) => {
                    for slot in o.range.iter() {
                        owners[usize::from(slot)] = Owner {
                            shard,
                            overridden: true,
                        };
                    }
                }
                None => problems.push(format!(
                    "the slot map gives slots {} to shard {:?}, which is not configured; they \
                     stay with their autumn.toml owner",
                    o.range, o.shard
                )),
            }
        }
        Self {
            owners,
            overrides,
            problems,
        }
    }

    pub fn owner(&self, slot: u16) -> Owner {
        self.owners[usize::from(slot)]
    }

    pub fn overrides(&self) -> &[Override] {
        &self.overrides
    }

    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// How many slots the shard at `index` owns.
    pub fn slot_count_of(&self, index: usize) -> u32 {
        self.owners.iter().filter(|o| o.shard == index).count() as u32
    }

    /// The slots of the shard at `index`, as the fewest ranges.
    pub fn ranges_of(&self, index: usize) -> Vec<SlotRange> {
        compact((0..SLOT_COUNT).filter(|&s| self.owners[usize::from(s)].shard == index))
    }

    /// The whole map as runs of one owner and source, in slot order.
    pub fn runs(&self, topology: &Topology) -> Vec<Run> {
        let mut runs: Vec<(u16, u16, Owner)> = Vec::new();
        for (slot, owner) in self.owners.iter().enumerate() {
            let slot = slot as u16;
            match runs.last_mut() {
                Some((_, end, last)) if last == owner => *end = slot,
                _ => runs.push((slot, slot, *owner)),
            }
        }
        runs.into_iter()
            .map(|(start, end, owner)| Run {
                slots: SlotRange::new(start, end).expect("ordered").to_string(),
                shard: topology.shards[owner.shard].name.as_str().to_owned(),
                source: if owner.overridden {
                    "slot_map"
                } else {
                    "config"
                },
            })
            .collect()
    }

    /// Every shard whose slots here differ from `autumn.toml`, with the edit that folds
    /// the difference into the file. Empty when the file says it all.
    pub fn drift(&self, topology: &Topology) -> Vec<Drift> {
        let quoted = |ranges: &[SlotRange]| -> String {
            let items: Vec<String> = ranges.iter().map(|r| format!("\"{r}\"")).collect();
            format!("[{}]", items.join(", "))
        };
        topology
            .shards
            .iter()
            .enumerate()
            .filter_map(|(index, spec)| {
                let live = self.ranges_of(index);
                let config = compact((0..SLOT_COUNT).filter(|&s| topology.owner_of(s) == index));
                (live != config).then(|| Drift {
                    shard: spec.name.as_str().to_owned(),
                    config: quoted(&config),
                    live: quoted(&live),
                    edit: format!("slots = {}", quoted(&live)),
                })
            })
            .collect()
    }

    /// The slots of `ranges` whose override differs from the configured owner: removing
    /// their overrides would change routing.
    pub fn would_change(&self, topology: &Topology, ranges: &[SlotRange]) -> Vec<SlotRange> {
        compact(ranges.iter().flat_map(|r| r.iter()).filter(|&s| {
            let owner = self.owners[usize::from(s)];
            owner.overridden && owner.shard != topology.owner_of(s)
        }))
    }
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Integer)]
    first_slot: i32,
    #[diesel(sql_type = Integer)]
    last_slot: i32,
    #[diesel(sql_type = Text)]
    shard_name: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    move_id: Option<i64>,
}

/// Every override, in slot order.
pub async fn load(conn: &mut AsyncPgConnection) -> diesel::QueryResult<Vec<Override>> {
    use diesel_async::RunQueryDsl;
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT first_slot, last_slot, shard_name, move_id FROM _autumn_slot_map \
         ORDER BY first_slot",
    )
    .load(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let range = SlotRange::new(
                u16::try_from(r.first_slot).ok()?,
                u16::try_from(r.last_slot).ok()?,
            )?;
            Some(Override {
                range,
                shard: r.shard_name,
                move_id: r.move_id,
            })
        })
        .collect())
}

/// The effective map as the control database has it now.
pub async fn current(
    conn: &mut AsyncPgConnection,
    topology: &Topology,
) -> diesel::QueryResult<SlotOwners> {
    Ok(SlotOwners::build(topology, load(conn).await?))
}

/// Per slot, the override's (shard, move) if it has one.
type PerSlot = Vec<Option<(String, Option<i64>)>>;

/// Rewrites the table as `change` leaves it, in one transaction that holds the table
/// against concurrent rewrites; one notification reaches every process at commit.
async fn rewrite(
    conn: &mut AsyncPgConnection,
    change: impl FnOnce(&mut PerSlot) + Send,
) -> diesel::QueryResult<()> {
    use diesel_async::RunQueryDsl;
    conn.transaction(async move |tx| {
        diesel::sql_query("LOCK TABLE _autumn_slot_map IN SHARE ROW EXCLUSIVE MODE")
            .execute(tx)
            .await?;
        let mut per_slot: PerSlot = vec![None; usize::from(SLOT_COUNT)];
        for o in load(tx).await? {
            for slot in o.range.iter() {
                per_slot[usize::from(slot)] = Some((o.shard.clone(), o.move_id));
            }
        }
        change(&mut per_slot);
        diesel::sql_query("DELETE FROM _autumn_slot_map")
            .execute(tx)
            .await?;
        let mut start = 0usize;
        while start < per_slot.len() {
            let mut end = start;
            while end + 1 < per_slot.len() && per_slot[end + 1] == per_slot[start] {
                end += 1;
            }
            if let Some((shard, move_id)) = &per_slot[start] {
                diesel::sql_query(
                    "INSERT INTO _autumn_slot_map (first_slot, last_slot, shard_name, move_id) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind::<Integer, _>(start as i32)
                .bind::<Integer, _>(end as i32)
                .bind::<Text, _>(shard)
                .bind::<Nullable<BigInt>, _>(*move_id)
                .execute(tx)
                .await?;
            }
            start = end + 1;
        }
        Ok(())
    })
    .await
}

/// Gives `ranges` to `shard`: an override where `autumn.toml` names another owner, none
/// where it names this one (a range moved back leaves nothing behind).
pub async fn assign(
    conn: &mut AsyncPgConnection,
    topology: &Topology,
    ranges: &[SlotRange],
    shard: &str,
    move_id: i64,
) -> diesel::QueryResult<()> {
    let configured: Vec<bool> = (0..SLOT_COUNT)
        .map(|s| topology.shards[topology.owner_of(s)].name.as_str() == shard)
        .collect();
    let ranges = ranges.to_vec();
    let shard = shard.to_owned();
    rewrite(conn, move |per_slot| {
        for slot in ranges.iter().flat_map(|r| r.iter()) {
            let i = usize::from(slot);
            per_slot[i] = (!configured[i]).then(|| (shard.clone(), Some(move_id)));
        }
    })
    .await
}

/// What `compact` did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Compacted {
    /// Slots whose override named the configured owner, now removed.
    pub removed: String,
    /// Slots whose override still changes routing, kept.
    pub kept: String,
}

/// Why `compact` refused.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(
        "refusing to remove the overrides of slots {0}: autumn.toml gives them to another \
         shard, so removing them would route their tenants away from their data. Fold them \
         into autumn.toml first (`bookmarks slots` prints the edit), deploy, then compact"
    )]
    WouldChangeRouting(String),
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

/// Removes the overrides that change nothing (they name the owner `autumn.toml` names, as
/// after the edit `bookmarks slots` suggests is deployed). With `only`, just those slots,
/// and refuses if any of them would change routing.
pub async fn compact_overrides(
    conn: &mut AsyncPgConnection,
    topology: &Topology,
    only: Option<&[SlotRange]>,
) -> Result<Compacted, CompactError> {
    let now = current(conn, topology).await?;
    let wanted: Vec<SlotRange> = only.map_or_else(|| vec![SlotRange::full()], <[_]>::to_vec);
    let refused = now.would_change(topology, &wanted);
    if only.is_some() && !refused.is_empty() {
        return Err(CompactError::WouldChangeRouting(
            super::slot_range::display_ranges(&refused),
        ));
    }
    let in_wanted = |s: u16| wanted.iter().any(|r| r.contains(s));
    let removable: Vec<u16> = (0..SLOT_COUNT)
        .filter(|&s| {
            let owner = now.owner(s);
            in_wanted(s) && owner.overridden && owner.shard == topology.owner_of(s)
        })
        .collect();
    let removed = compact(removable.iter().copied());
    let gone = removable.clone();
    rewrite(conn, move |per_slot| {
        for slot in gone {
            per_slot[usize::from(slot)] = None;
        }
    })
    .await?;
    Ok(Compacted {
        removed: super::slot_range::display_ranges(&removed),
        kept: super::slot_range::display_ranges(&refused),
    })
}

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
}

impl LiveSlotMap {
    pub fn new(topology: &Topology, changes: Arc<RouteChanges>) -> Self {
        Self {
            changes,
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
        match lookups.run(async |c| load(c).await).await {
            Ok(overrides) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Settings;

    fn two_shards() -> Topology {
        Settings::from_toml_str(
            r#"
[database]
primary_url = "postgres://u@localhost/control"
[[database.shards]]
name = "shard0"
primary_url = "postgres://u@localhost/s0"
slots = ["0-8191"]
[[database.shards]]
name = "shard1"
primary_url = "postgres://u@localhost/s1"
slots = ["8192-16383"]
"#,
            "test",
            Vec::new(),
        )
        .unwrap()
        .topology
    }

    fn moved(range: &str, shard: &str) -> Override {
        Override {
            range: range.parse().unwrap(),
            shard: shard.to_owned(),
            move_id: Some(1),
        }
    }

    #[test]
    fn an_override_decides_its_slots_and_nothing_else() {
        let t = two_shards();
        let map = SlotOwners::build(&t, vec![moved("0-4095", "shard1")]);
        assert_eq!(
            map.owner(0),
            Owner {
                shard: 1,
                overridden: true
            }
        );
        assert_eq!(
            map.owner(4096),
            Owner {
                shard: 0,
                overridden: false
            }
        );
        let runs = map.runs(&t);
        assert_eq!(runs.len(), 3);
        assert_eq!(
            (runs[0].slots.as_str(), runs[0].source),
            ("0-4095", "slot_map")
        );
    }

    #[test]
    fn drift_names_the_autumn_toml_edit_for_each_changed_shard() {
        let t = two_shards();
        let map = SlotOwners::build(&t, vec![moved("0-4095", "shard1")]);
        let drift = map.drift(&t);
        assert_eq!(drift.len(), 2);
        assert_eq!(drift[0].edit, r#"slots = ["4096-8191"]"#);
        assert_eq!(drift[1].edit, r#"slots = ["0-4095", "8192-16383"]"#);
        assert!(SlotOwners::baseline(&t).drift(&t).is_empty());
    }

    #[test]
    fn an_override_on_an_unknown_shard_keeps_the_configured_owner_and_says_so() {
        let t = two_shards();
        let map = SlotOwners::build(&t, vec![moved("10-20", "shard9")]);
        assert_eq!(
            map.owner(10),
            Owner {
                shard: 0,
                overridden: false
            }
        );
        assert_eq!(map.problems().len(), 1);
    }

    #[test]
    fn only_overrides_that_differ_from_the_file_would_change_routing() {
        let t = two_shards();
        let map = SlotOwners::build(
            &t,
            vec![moved("0-99", "shard1"), moved("8192-8200", "shard1")],
        );
        let all = [SlotRange::full()];
        assert_eq!(map.would_change(&t, &all), vec!["0-99".parse().unwrap()]);
    }
}
