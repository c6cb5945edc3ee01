//! `MoveError`: why a move command did not do what it was asked. Refusals change nothing;
//! failures leave the move in a state its record names. The `move_slot` command line turns
//! each into advice (`cli::explain`); the messages here say what happened.

use super::conn::ConnectError;
use super::record::{MoveRecord, RecordError, Step};
use crate::pg::pool::CheckoutError;
use crate::tenancy::TenantIdError;

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    // Refusals: bad arguments, a step out of order, a tenant or move that is busy.
    #[error("no shard is named {name:?} (shards: {known})")]
    UnknownShard { name: String, known: String },
    #[error("--from and --to are both {shard}: a move needs two shards")]
    SameShard { shard: String },
    #[error("--tenant {raw:?}: {reason}")]
    InvalidTenant { raw: String, reason: TenantIdError },
    #[error(
        "move_slot re-routes tenants through the directory, and directory routing is off: set \
         [sharding] directory_router = true (and deploy it) first"
    )]
    DirectoryOff,
    #[error("cannot move {tenant}: {blocker}")]
    CannotMove { tenant: String, blocker: String },
    #[error("slot {slot} has no tenant with rows on {from} that routes there: nothing to move")]
    NothingInSlot { slot: u16, from: String },
    #[error("tenant(s) {tenants}: already in move {move_id}, which is not finished")]
    Busy { tenants: String, move_id: i64 },
    #[error("slot {slot} is already being moved by move {move_id}, which is not finished")]
    SlotBusy { slot: u16, move_id: i64 },
    /// A range move's slots must all be the source's by the slot map.
    #[error(
        "slot {slot} routes to {owner} (via {via}), not {from}: a range move moves slots the \
         source owns; `bookmarks slots` shows the map"
    )]
    RangeNotOwned {
        slot: u16,
        owner: String,
        via: &'static str,
        from: String,
    },
    /// The named tenants are in an unfinished move of other tenants or other shards.
    #[error("those tenants are in move {}, which is a different move", .other.id)]
    DifferentMove { other: Box<MoveRecord> },
    #[error("no unfinished move of those tenants from {from} to {to}")]
    NoMoveFound { from: String, to: String },
    #[error("there is no move {0}")]
    NoSuchMove(i64),
    #[error("move {move_id} is being run by another move_slot process")]
    ClaimedElsewhere { move_id: i64 },
    #[error("cannot {} move {}: it is {}", .step.command(), .record.id, .record.state)]
    OutOfOrder { record: Box<MoveRecord>, step: Step },
    /// Someone changed a tenant's directory row after the re-pin: its source rows stay.
    #[error(
        "cannot delete move {move_id}'s source rows: tenant {tenant} routes to {} in the \
         directory now, not {to}; someone changed it since the re-pin",
        .now.as_deref().unwrap_or("(no row: pin or hash)")
    )]
    Rerouted {
        move_id: i64,
        tenant: String,
        now: Option<String>,
        to: String,
    },
    /// Someone changed the slot map after a range move's flip: its source rows stay.
    #[error(
        "cannot delete move {move_id}'s source rows: slot {slot} routes to {now} in the slot \
         map now, not {to}; someone changed it since the flip"
    )]
    RangeRerouted {
        move_id: i64,
        slot: u16,
        now: String,
        to: String,
    },
    #[error("move {} is done and its source rows are deleted", .record.id)]
    AbortAfterDone { record: Box<MoveRecord> },
    #[error(
        "cannot abort move {}: {} has taken writes for the tenants since the re-pin, and \
         aborting would lose them", .record.id, .record.to
    )]
    AbortAfterWrites { record: Box<MoveRecord> },
    #[error(
        "cannot abort move {}: its rows on {} no longer match what was verified, so an \
         interrupted delete has begun removing them; `move_slot delete` finishes the move",
        .record.id, .record.from
    )]
    AbortDuringDelete { record: Box<MoveRecord> },

    // Failures: a step could not finish; the move's state says where it stopped.
    #[error("{what}: {source}")]
    Db { what: String, source: DbError },
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("cannot connect to the control database ({url}): {source}")]
    ConnectControl {
        /// As `DbUrl` shows it: without the password.
        url: String,
        source: Box<CheckoutError>,
    },
    #[error(
        "verification failed, so the move was aborted (the source keeps the tenants, nothing \
         was deleted from it): {differences}"
    )]
    VerificationFailed { differences: String },
    #[error(
        "move {move_id}: the fence would have lasted longer than --max-fence {max_ms} ms \
         ({took_ms} ms when {during}), so it was lifted: the source keeps the tenants and \
         takes their writes again, still capturing them; `move_slot resume {move_id}` tries \
         the fence again"
    )]
    FenceTooLong {
        move_id: i64,
        max_ms: u128,
        took_ms: u128,
        during: &'static str,
    },
    #[error("{0}")]
    Setup(String),
}

/// A database error on a shard (the mover's own sessions) or on the control database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{}", describe(.0))]
    Shard(tokio_postgres::Error),
    #[error(transparent)]
    Control(#[from] diesel::result::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("{0}")]
    Pool(String),
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// The server's own message when there is one (not the driver's wrapping of it).
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}

impl MoveError {
    /// Refused: nothing was changed (the command exits 2 rather than 1).
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            MoveError::Db { .. }
                | MoveError::Connect(_)
                | MoveError::ConnectControl { .. }
                | MoveError::VerificationFailed { .. }
                | MoveError::FenceTooLong { .. }
                | MoveError::Setup(_)
        )
    }
}

/// Turns a shard session's error into a failure saying what was being done.
pub fn on_shard(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> MoveError {
    let what = what.into();
    move |e| MoveError::Db {
        what,
        source: DbError::Shard(e),
    }
}

/// Turns a [`MoveIo`](super::io::MoveIo) error into a failure saying what was being done.
pub fn on_db(what: impl Into<String>) -> impl FnOnce(DbError) -> MoveError {
    on_control(what)
}

/// Turns a control database error into a failure saying what was being done.
pub fn on_control<E: Into<DbError>>(what: impl Into<String>) -> impl FnOnce(E) -> MoveError {
    let what = what.into();
    move |e| MoveError::Db {
        what,
        source: e.into(),
    }
}
