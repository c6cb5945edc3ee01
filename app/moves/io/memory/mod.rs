//! An in-memory [`MoveIo`] for the driver's unit tests, over a shared [`World`]: it can
//! crash the mover before any call or at a pause point, so a test can resume or abort
//! from there, and it lets the world's client write between any two calls.

mod world;

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use chrono::Utc;

use super::{At, MoveIo, RowHashes};
use crate::moves::checksum::TableSum;
use crate::moves::error::DbError;
use crate::moves::pause::PausePoint;
use crate::moves::progress::MoveProgress;
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{Placed, Scope, Side, in_ranges};
use crate::moves::tenant_guard::GuardState;
use crate::moves::transfer::{Keys, note};
use crate::sharding::SlotRange;
use crate::tenancy::TenantId;
use world::Guard;
pub use world::{Refusal, RowId, Shard, TABLES, World, configured_owner, slot_of};

/// The move's view of a shared [`World`], for one run of the mover: a crash ends it.
pub struct MemoryIo {
    world: Rc<RefCell<World>>,
    from: String,
    to: String,
    snapshot: Option<Shard>,
    calls: Cell<usize>,
    /// Crash before this call (counted from 0), or at this pause point.
    crash_before: Option<usize>,
    crash_at: Option<PausePoint>,
    crashed: Cell<bool>,
}

impl MemoryIo {
    pub fn new(world: &Rc<RefCell<World>>, m: &MoveRecord) -> Self {
        Self {
            world: Rc::clone(world),
            from: m.from.clone(),
            to: m.to.clone(),
            snapshot: None,
            calls: Cell::new(0),
            crash_before: None,
            crash_at: None,
            crashed: Cell::new(false),
        }
    }

    pub fn crashing_before(mut self, call: usize) -> Self {
        self.crash_before = Some(call);
        self
    }

    pub fn crashing_at(mut self, point: PausePoint) -> Self {
        self.crash_at = Some(point);
        self
    }

    /// The calls made so far.
    pub fn calls(&self) -> usize {
        self.calls.get()
    }

    pub fn crashed(&self) -> bool {
        self.crashed.get()
    }

    /// Every call starts here: the client may write first, and a crash ends the run.
    fn call(&self) -> Result<(), DbError> {
        if self.crashed.get() {
            return Err(crash());
        }
        let n = self.calls.get();
        self.calls.set(n + 1);
        if self.crash_before == Some(n) {
            self.crashed.set(true);
            return Err(crash());
        }
        self.world.borrow_mut().client_writes();
        Ok(())
    }

    fn name(&self, side: Side) -> &str {
        match side {
            Side::Source => &self.from,
            Side::Dest => &self.to,
        }
    }

    /// A read of `at`: the shard as it is now, or the snapshot.
    fn read<T>(&self, at: At, f: impl FnOnce(&Shard) -> T) -> Result<T, DbError> {
        self.call()?;
        match at {
            At::Snapshot => self
                .snapshot
                .as_ref()
                .map(f)
                .ok_or_else(|| DbError::Pool("no snapshot is open".to_owned())),
            At::Source => Ok(f(self.world.borrow().shard(&self.from))),
            At::Dest => Ok(f(self.world.borrow().shard(&self.to))),
        }
    }

    fn shard_mut<T>(&self, side: Side, f: impl FnOnce(&mut Shard) -> T) -> Result<T, DbError> {
        self.call()?;
        Ok(f(self.world.borrow_mut().shard_mut(self.name(side))))
    }

    fn control<T>(&self, f: impl FnOnce(&mut World) -> T) -> Result<T, DbError> {
        self.call()?;
        Ok(f(&mut self.world.borrow_mut()))
    }
}

fn crash() -> DbError {
    DbError::Pool("the mover crashed here (injected)".to_owned())
}

fn slots(ranges: &[SlotRange]) -> impl Iterator<Item = u16> + '_ {
    ranges.iter().flat_map(|r| r.iter())
}

fn guard_rows(shard: &mut Shard, scope: &Scope, guard: Option<Guard>, only_move: Option<i64>) {
    let keep = |g: &Guard| only_move.is_some_and(|id| g.move_id != id);
    match scope {
        Scope::Tenants(tenants) => {
            for t in tenants {
                match &guard {
                    Some(g) => drop(shard.tenant_guard.insert(t.clone(), g.clone())),
                    None => {
                        if shard.tenant_guard.get(t).is_some_and(|g| !keep(g)) {
                            shard.tenant_guard.remove(t);
                        }
                    }
                }
            }
        }
        Scope::Ranges(ranges) => {
            for slot in slots(ranges) {
                match &guard {
                    Some(g) => drop(shard.slot_guard.insert(slot, g.clone())),
                    None => {
                        if shard.slot_guard.get(&slot).is_some_and(|g| !keep(g)) {
                            shard.slot_guard.remove(&slot);
                        }
                    }
                }
            }
        }
    }
}

fn sums(shard: &Shard, tenants: &[String], except: &Keys) -> Vec<TableSum> {
    TABLES
        .iter()
        .map(|table| {
            let skip = except.get(*table);
            let rows: Vec<i64> = shard
                .rows
                .iter()
                .filter(|(id, _)| id.0 == *table && tenants.contains(&id.1))
                .filter(|(id, _)| !skip.is_some_and(|s| s.contains(&(id.1.clone(), id.2.clone()))))
                .map(|(_, v)| *v)
                .collect();
            TableSum {
                table: table.to_string(),
                rows: rows.len() as i64,
                checksum: rows
                    .iter()
                    .map(|&v| i128::from(v))
                    .sum::<i128>()
                    .to_string(),
            }
        })
        .collect()
}

impl MoveIo for MemoryIo {
    async fn guard(
        &mut self,
        side: Side,
        scope: &Scope,
        move_id: i64,
        state: GuardState,
        peer: &str,
    ) -> Result<(), DbError> {
        // A range's destination gets no incoming guard: nobody routes there before the flip.
        if state == GuardState::Incoming && matches!(scope, Scope::Ranges(_)) {
            return self.call();
        }
        let guard = Guard {
            move_id,
            state,
            peer: peer.to_owned(),
        };
        self.shard_mut(side, |s| guard_rows(s, scope, Some(guard), None))
    }

    async fn unguard(&mut self, side: Side, scope: &Scope, move_id: i64) -> Result<(), DbError> {
        self.shard_mut(side, |s| guard_rows(s, scope, None, Some(move_id)))
    }

    async fn open_destination(&mut self, scope: &Scope, move_id: i64) -> Result<(), DbError> {
        let only = matches!(scope, Scope::Tenants(_)).then_some(move_id);
        self.shard_mut(Side::Dest, |s| guard_rows(s, scope, None, only))
    }

    async fn tenants_in(&self, at: At, ranges: &[SlotRange]) -> Result<Vec<String>, DbError> {
        self.read(at, |s| {
            s.tenants()
                .into_iter()
                .filter(|t| in_ranges(ranges, t))
                .collect()
        })
    }

    async fn tenants_with_rows(&self, at: At, tenants: &[String]) -> Result<Vec<String>, DbError> {
        self.read(at, |s| {
            let have = s.tenants();
            let found: BTreeSet<String> = tenants
                .iter()
                .filter(|t| have.contains(*t))
                .cloned()
                .collect();
            found.into_iter().collect()
        })
    }

    async fn row_count(&self, at: At, tenants: &[String]) -> Result<i64, DbError> {
        self.read(at, |s| {
            s.rows.keys().filter(|id| tenants.contains(&id.1)).count() as i64
        })
    }

    async fn bulk_copy(
        &mut self,
        _move_id: i64,
        tenants: &[String],
        _progress: &MoveProgress,
    ) -> Result<u64, DbError> {
        self.call()?;
        // The real copy pauses after its first row, inside one destination transaction
        // that a crash rolls back: nothing is written yet.
        self.pause(PausePoint::DuringCopy).await?;
        let mut world = self.world.borrow_mut();
        let source = world.shard(&self.from).clone();
        let dest = world.shard_mut(&self.to);
        dest.rows.retain(|id, _| !tenants.contains(&id.1));
        let mut copied = 0;
        for (id, v) in source.rows.iter().filter(|(id, _)| tenants.contains(&id.1)) {
            dest.rows.insert(id.clone(), *v);
            copied += 1;
        }
        Ok(copied)
    }

    async fn catch_up(
        &mut self,
        move_id: i64,
        mut applied: Option<&mut Keys>,
    ) -> Result<u64, DbError> {
        self.call()?;
        let mut world = self.world.borrow_mut();
        let source = world.shard(&self.from).clone();
        let batch: Vec<(String, String, String)> = source
            .changes
            .iter()
            .filter(|c| c.0 == move_id)
            .map(|c| (c.1.clone(), c.2.clone(), c.3.clone()))
            .collect();
        let dest = world.shard_mut(&self.to);
        for (table, tenant, key) in &batch {
            let id = (table.clone(), tenant.clone(), key.clone());
            match source.rows.get(&id) {
                Some(v) => drop(dest.rows.insert(id, *v)),
                None => drop(dest.rows.remove(&id)),
            }
            if let Some(keys) = applied.as_deref_mut() {
                note(keys, table, tenant, key);
            }
        }
        // The entries applied leave the log; any logged meanwhile stay.
        let mut left = batch.len();
        world.shard_mut(&self.from).changes.retain(|c| {
            if left > 0 && c.0 == move_id {
                left -= 1;
                return false;
            }
            true
        });
        Ok(batch.len() as u64)
    }

    async fn open_snapshot(&mut self, move_id: i64) -> Result<Keys, DbError> {
        self.call()?;
        let snapshot = self.world.borrow().shard(&self.from).clone();
        let mut pending = Keys::new();
        for (_, table, tenant, key) in snapshot.changes.iter().filter(|c| c.0 == move_id) {
            note(&mut pending, table, tenant, key);
        }
        self.snapshot = Some(snapshot);
        Ok(pending)
    }

    fn close_snapshot(&mut self) {
        self.snapshot = None;
    }

    async fn sums_except(
        &self,
        at: At,
        tenants: &[String],
        except: &Keys,
    ) -> Result<Vec<TableSum>, DbError> {
        self.read(at, |s| sums(s, tenants, except))
    }

    async fn row_hashes(&self, at: At, keys: &Keys) -> Result<RowHashes, DbError> {
        self.read(at, |s| {
            let mut out = RowHashes::new();
            for (table, named) in keys.iter().filter(|(_, k)| !k.is_empty()) {
                let found = out.entry(table.clone()).or_default();
                for (tenant, key) in named {
                    let id = (table.clone(), tenant.clone(), key.clone());
                    if let Some(v) = s.rows.get(&id) {
                        found.insert((tenant.clone(), key.clone()), *v);
                    }
                }
            }
            out
        })
    }

    async fn delete_moved_rows(
        &mut self,
        side: Side,
        _move_id: i64,
        tenants: &[String],
    ) -> Result<u64, DbError> {
        self.shard_mut(side, |s| {
            let before = s.rows.len();
            s.rows.retain(|id, _| !tenants.contains(&id.1));
            (before - s.rows.len()) as u64
        })
    }

    async fn clear_changes(&mut self, move_id: i64) -> Result<(), DbError> {
        self.shard_mut(Side::Source, |s| s.changes.retain(|c| c.0 != move_id))
    }

    async fn pause(&mut self, point: PausePoint) -> Result<(), DbError> {
        if self.crash_at == Some(point) {
            self.crashed.set(true);
            return Err(crash());
        }
        Ok(())
    }

    async fn advance(
        &mut self,
        m: &mut MoveRecord,
        state: MoveState,
        also: &[Set<'_>],
    ) -> Result<(), DbError> {
        self.call()?;
        let mut next = m.clone();
        next.state = state;
        next.updated_at = Utc::now();
        for set in also {
            match set {
                Set::Count("rows_copied", n) => next.rows_copied = *n,
                Set::Count("changes_applied", n) => next.changes_applied = *n,
                Set::Count("rows_verified", n) => next.rows_verified = *n,
                Set::Count("rows_deleted", n) => next.rows_deleted = *n,
                Set::Count(column, _) => panic!("no count column {column}"),
                Set::Tenants(t) => next.tenants = t.to_vec(),
                Set::Now("repinned_at") => next.repinned_at = Some(Utc::now()),
                Set::Now(_) | Set::Null(_) => {}
                Set::Json("checksums", v) => next.checksums = Some((*v).clone()),
                Set::Json(column, _) => panic!("no JSON column {column}"),
                Set::Error(e) => next.last_error = e.map(str::to_owned),
                Set::FenceWindow => next.fence_ms = Some(0),
            }
        }
        self.world
            .borrow_mut()
            .records
            .insert(next.id, next.clone());
        *m = next;
        Ok(())
    }

    async fn placed_in(&self, ranges: &[SlotRange]) -> Result<Placed, DbError> {
        self.control(|w| {
            w.directory
                .iter()
                .filter(|(t, _)| in_ranges(ranges, t))
                .map(|(t, s)| (t.clone(), (s.clone(), "directory")))
                .collect()
        })
    }

    async fn set_placed(&mut self, shard: &str, tenant: &str, on: bool) -> Result<(), DbError> {
        self.control(|w| {
            let placed = &mut w.shard_mut(shard).placed;
            match on {
                true => drop(placed.insert(tenant.to_owned())),
                false => drop(placed.remove(tenant)),
            }
        })
    }

    async fn directory_row(&self, tenant: &str) -> Result<Option<String>, DbError> {
        self.control(|w| w.directory.get(tenant).cloned())
    }

    async fn set_directory_row(
        &mut self,
        tenant: &str,
        shard: Option<&str>,
        _note: &str,
    ) -> Result<(), DbError> {
        self.control(|w| match shard {
            Some(shard) => drop(w.directory.insert(tenant.to_owned(), shard.to_owned())),
            None => drop(w.directory.remove(tenant)),
        })
    }

    async fn assign_slots(
        &mut self,
        ranges: &[SlotRange],
        to: &str,
        _move_id: i64,
    ) -> Result<(), DbError> {
        self.control(|w| {
            for slot in slots(ranges) {
                w.slot_map.insert(slot, to.to_owned());
            }
        })
    }

    async fn slot_routed_elsewhere(
        &self,
        ranges: &[SlotRange],
        to: &str,
    ) -> Result<Option<(u16, String)>, DbError> {
        self.control(|w| {
            slots(ranges).find_map(|slot| {
                let now = w
                    .slot_map
                    .get(&slot)
                    .cloned()
                    .unwrap_or_else(|| configured_owner(slot).to_owned());
                (now != to).then_some((slot, now))
            })
        })
    }

    async fn record_arrival(&mut self, _to: &str) -> Result<(), DbError> {
        // Only replica reads use arrivals: a call that may crash, and nothing else.
        self.call()
    }

    async fn enqueue_reindex(&mut self, move_id: i64, tenants: &[TenantId]) -> Result<(), DbError> {
        self.control(|w| {
            for t in tenants {
                w.jobs
                    .insert(format!("move-{move_id}-reindex-{}", t.as_str()));
            }
        })
    }

    async fn until_repin_is(&self, _move_id: i64, _grace: Duration) -> Result<Duration, DbError> {
        self.control(|_| Duration::ZERO)
    }
}
