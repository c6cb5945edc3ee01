//! Everything a move's steps ask of the world, as one narrow interface: the two shards
//! (guards, copies, checksums, deletes) and the control database (the move's record,
//! the directory, the slot map, the job queue).
//!
//! The steps and the driver decide *what* happens and in which order; a [`MoveIo`] only
//! carries it out. [`postgres::PgMoveIo`] is the real one. The tests have an in-memory one
//! (`memory`) that models the guards, the change log and the routing, so the driver's
//! logic (every step in every state, a crash before any I/O, resume, abort, refusals) runs
//! in milliseconds, beside the end-to-end tests on real Postgres.

use std::collections::BTreeMap;
use std::time::Duration;

use super::checksum::TableSum;
use super::error::DbError;
use super::pause::PausePoint;
use super::progress::MoveProgress;
use super::record::{MoveRecord, MoveState, Set};
use super::scope::{Placed, Scope, Side};
use super::tenant_guard::GuardState;
use super::transfer::Keys;
use crate::sharding::SlotRange;
use crate::tenancy::TenantId;

pub mod postgres;

#[cfg(test)]
pub mod memory;

/// Each row's 64-bit hash, by table, then (tenant, key).
pub type RowHashes = BTreeMap<String, BTreeMap<(String, String), i64>>;

/// Where a read is made: one of the move's two shards as they are now, or the source as
/// the snapshot opened by [`MoveIo::open_snapshot`] saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Source,
    Dest,
    Snapshot,
}

impl From<Side> for At {
    fn from(side: Side) -> Self {
        match side {
            Side::Source => At::Source,
            Side::Dest => At::Dest,
        }
    }
}

/// What the steps need done. Reads take `&self`, so a step can run them on both shards at
/// once; the rest change something and take `&mut self`. An error is only the cause: the
/// step says what it was doing (`error::on_db`).
// The driver runs one move on one task; no caller needs these futures to be `Send`.
#[allow(async_fn_in_trait)]
pub trait MoveIo {
    // The two shards.

    /// Sets the move's guard on one side: per tenant, or per slot for a range.
    async fn guard(
        &mut self,
        side: Side,
        scope: &Scope,
        move_id: i64,
        state: GuardState,
        peer: &str,
    ) -> Result<(), DbError>;

    /// Removes the move's guard from one side.
    async fn unguard(&mut self, side: Side, scope: &Scope, move_id: i64) -> Result<(), DbError>;

    /// Opens the destination to the move's keys: its guard goes, and for a range also
    /// whatever an earlier move left there.
    async fn open_destination(&mut self, scope: &Scope, move_id: i64) -> Result<(), DbError>;

    /// The tenants with rows at `at` whose key hashes into `ranges`.
    async fn tenants_in(&self, at: At, ranges: &[SlotRange]) -> Result<Vec<String>, DbError>;

    /// Which of `tenants` have rows at `at`.
    async fn tenants_with_rows(&self, at: At, tenants: &[String]) -> Result<Vec<String>, DbError>;

    /// How many rows `tenants` have at `at`, in every table.
    async fn row_count(&self, at: At, tenants: &[String]) -> Result<i64, DbError>;

    /// Copies every row of `tenants` from the source to the destination in one snapshot,
    /// replacing what an interrupted attempt left; the rows copied.
    async fn bulk_copy(
        &mut self,
        move_id: i64,
        tenants: &[String],
        progress: &MoveProgress,
    ) -> Result<u64, DbError>;

    /// One catch-up round: copies every change logged when it starts; how many it
    /// applied. Adds the rows they named to `applied`.
    async fn catch_up(&mut self, move_id: i64, applied: Option<&mut Keys>) -> Result<u64, DbError>;

    /// Opens a snapshot of the source (read as [`At::Snapshot`] until closed); the rows
    /// whose logged change had not been copied when it was taken.
    async fn open_snapshot(&mut self, move_id: i64) -> Result<Keys, DbError>;

    fn close_snapshot(&mut self);

    /// Per table, the count and checksum of `tenants`' rows at `at`, less the rows
    /// `except` names.
    async fn sums_except(
        &self,
        at: At,
        tenants: &[String],
        except: &Keys,
    ) -> Result<Vec<TableSum>, DbError>;

    /// The hash of each row `keys` names that `at` has.
    async fn row_hashes(&self, at: At, keys: &Keys) -> Result<RowHashes, DbError>;

    /// Deletes `tenants`' rows on one side (paced); how many.
    async fn delete_moved_rows(
        &mut self,
        side: Side,
        move_id: i64,
        tenants: &[String],
    ) -> Result<u64, DbError>;

    /// Forgets the source's change log of the move.
    async fn clear_changes(&mut self, move_id: i64) -> Result<(), DbError>;

    /// A point where tests stop or hold a move (see [`super::pause`]).
    async fn pause(&mut self, point: PausePoint) -> Result<(), DbError>;

    // The control database.

    /// Moves the record to `state`, setting `also`, and reloads it.
    async fn advance(
        &mut self,
        m: &mut MoveRecord,
        state: MoveState,
        also: &[Set<'_>],
    ) -> Result<(), DbError>;

    /// The tenants of `ranges` that a directory row or a config pin places.
    async fn placed_in(&self, ranges: &[SlotRange]) -> Result<Placed, DbError>;

    /// Lets `shard` accept `tenant` whatever its slot guard says, or takes that away.
    async fn set_placed(&mut self, shard: &str, tenant: &str, placed: bool) -> Result<(), DbError>;

    /// `tenant`'s directory row: the shard it names.
    async fn directory_row(&self, tenant: &str) -> Result<Option<String>, DbError>;

    /// Writes `tenant`'s directory row (`Some`, with `note`) or removes it (`None`).
    async fn set_directory_row(
        &mut self,
        tenant: &str,
        shard: Option<&str>,
        note: &str,
    ) -> Result<(), DbError>;

    /// Records that the move's tenants arrive on `to` with every copied row at or before
    /// the destination's WAL position now (see [`crate::sharding::arrivals`]).
    async fn record_arrival(&mut self, to: &str) -> Result<(), DbError>;

    /// Gives `ranges` to `to` in the live slot map.
    async fn assign_slots(
        &mut self,
        ranges: &[SlotRange],
        to: &str,
        move_id: i64,
    ) -> Result<(), DbError>;

    /// The first slot of `ranges` the live slot map does not route to `to`, and where it
    /// routes instead.
    async fn slot_routed_elsewhere(
        &self,
        ranges: &[SlotRange],
        to: &str,
    ) -> Result<Option<(u16, String)>, DbError>;

    /// Queues one reindex job per tenant; a key per (move, tenant) queues each once.
    async fn enqueue_reindex(&mut self, move_id: i64, tenants: &[TenantId]) -> Result<(), DbError>;

    /// How long until the move's re-pin is `grace` old (zero when it is already).
    async fn until_repin_is(&self, move_id: i64, grace: Duration) -> Result<Duration, DbError>;
}
