//! A move as the control database's `tenant_moves` row records it: which tenants go where,
//! how far the move got, and what it counted. Also the one table of which step may run in
//! which state ([`MoveState::next_step`]), and every statement on `tenant_moves` and
//! `tenant_move_members`: `move_slot` and the admin page both read moves through here.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bool, Double, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde::Serialize;
use serde_json::{Value, json};

use crate::sharding::directory::placement::range_move_covering;
use crate::sharding::slot_range::{SlotRanges, ranges_text};
use crate::sharding::{ShardKey, SlotRange};

/// Where a move stands. The happy path runs top to bottom; `Aborted` ends it anywhere
/// before `Done`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveState {
    /// Recorded; nothing touched on the shards yet.
    Planned,
    /// Capture is on and the bulk copy is running (or was killed).
    Copying,
    /// Bulk copy and catch-up done; the tenant is still written on the source.
    Copied,
    /// The source refuses the tenant's writes; the final copy and verification run.
    Fenced,
    /// Both shards hold the same rows; still fenced.
    Verified,
    /// The directory routes to the destination; the source says "departed".
    Repinned,
    /// The source rows are deleted.
    Done,
    Aborted,
}

/// The steps of a move, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Copy,
    Verify,
    Repin,
    Delete,
}

/// Whether a step may run on a move in a given state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepCheck {
    /// The step is what the move needs next.
    Run,
    /// The move is past this step already; running it again changes nothing.
    AlreadyDone,
    /// The move is not ready for this step, or has ended without it.
    OutOfOrder,
}

impl MoveState {
    pub const ALL: [MoveState; 8] = [
        MoveState::Planned,
        MoveState::Copying,
        MoveState::Copied,
        MoveState::Fenced,
        MoveState::Verified,
        MoveState::Repinned,
        MoveState::Done,
        MoveState::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MoveState::Planned => "planned",
            MoveState::Copying => "copying",
            MoveState::Copied => "copied",
            MoveState::Fenced => "fenced",
            MoveState::Verified => "verified",
            MoveState::Repinned => "repinned",
            MoveState::Done => "done",
            MoveState::Aborted => "aborted",
        }
    }

    pub fn is_finished(self) -> bool {
        matches!(self, MoveState::Done | MoveState::Aborted)
    }

    /// The step a move in this state needs next; `None` once it has ended. This is the one
    /// place that says which step follows which: the steps, their refusals and `run` /
    /// `resume` all ask it.
    pub fn next_step(self) -> Option<Step> {
        match self {
            MoveState::Planned | MoveState::Copying => Some(Step::Copy),
            MoveState::Copied | MoveState::Fenced => Some(Step::Verify),
            MoveState::Verified => Some(Step::Repin),
            MoveState::Repinned => Some(Step::Delete),
            MoveState::Done | MoveState::Aborted => None,
        }
    }

    /// Whether `step` may run now: it is the next step, or one the move is already past
    /// (deleting a done move counts as past), or neither.
    pub fn check(self, step: Step) -> StepCheck {
        match self.next_step() {
            Some(next) if next == step => StepCheck::Run,
            Some(next) if next > step => StepCheck::AlreadyDone,
            None if self == MoveState::Done && step == Step::Delete => StepCheck::AlreadyDone,
            _ => StepCheck::OutOfOrder,
        }
    }
}

impl Step {
    pub const ALL: [Step; 4] = [Step::Copy, Step::Verify, Step::Repin, Step::Delete];

    /// The `move_slot` subcommand that runs it.
    pub fn command(self) -> &'static str {
        match self {
            Step::Copy => "copy",
            Step::Verify => "verify",
            Step::Repin => "repin",
            Step::Delete => "delete",
        }
    }

    /// The states in which it runs, in words (see [`MoveState::next_step`]).
    pub fn needs(self) -> &'static str {
        match self {
            Step::Copy => "planned or copying",
            Step::Verify => "copied",
            Step::Repin => "verified",
            Step::Delete => "re-pinned",
        }
    }

    /// What running it again on a move already past it says.
    pub fn already(self) -> &'static str {
        match self {
            Step::Copy => "already copied",
            Step::Verify => "already verified",
            Step::Repin => "already re-pinned",
            Step::Delete => "already deleted",
        }
    }
}

impl fmt::Display for MoveState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `tenant_moves.state` this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown move state {0:?}")]
pub struct UnknownMoveState(String);

impl FromStr for MoveState {
    type Err = UnknownMoveState;
    fn from_str(s: &str) -> Result<Self, UnknownMoveState> {
        MoveState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownMoveState(s.to_owned()))
    }
}

/// One `tenant_moves` row.
#[derive(Clone, Debug)]
pub struct MoveRecord {
    pub id: i64,
    pub tenants: Vec<String>,
    pub from: String,
    pub to: String,
    pub slot: Option<i32>,
    /// A range move's slot ranges (`--slots`); `tenants` then lists the tenants it found.
    pub slots: Option<Vec<SlotRange>>,
    pub state: MoveState,
    pub confirm: bool,
    /// Each tenant's directory shard before the move (`None`: it had no row).
    pub previous: BTreeMap<String, Option<String>>,
    pub rows_copied: i64,
    pub changes_applied: i64,
    pub rows_verified: i64,
    pub rows_deleted: i64,
    pub checksums: Option<Value>,
    pub fence_ms: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub repinned_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// Why a move could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
    /// The row holds something this build cannot read (a state or JSON it does not know).
    #[error("move {id}'s row cannot be read: {why}")]
    Unreadable { id: i64, why: String },
}

/// The row as it comes off the wire; [`MoveRecord`] is what it means.
#[derive(QueryableByName)]
struct MoveRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Array<Text>)]
    tenants: Vec<String>,
    #[diesel(sql_type = Text)]
    from_shard: String,
    #[diesel(sql_type = Text)]
    to_shard: String,
    #[diesel(sql_type = Nullable<Integer>)]
    slot: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    slots: Option<String>,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Bool)]
    confirm: bool,
    #[diesel(sql_type = Text)]
    previous: String,
    #[diesel(sql_type = BigInt)]
    rows_copied: i64,
    #[diesel(sql_type = BigInt)]
    changes_applied: i64,
    #[diesel(sql_type = BigInt)]
    rows_verified: i64,
    #[diesel(sql_type = BigInt)]
    rows_deleted: i64,
    #[diesel(sql_type = Nullable<Text>)]
    checksums: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    fence_ms: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    repinned_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Timestamptz)]
    updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, tenants, from_shard, to_shard, slot, slots, state, confirm, \
     previous::text AS previous, rows_copied, changes_applied, rows_verified, rows_deleted, \
     checksums::text AS checksums, fence_ms, last_error, created_at, repinned_at, updated_at";

impl TryFrom<MoveRow> for MoveRecord {
    type Error = RecordError;

    fn try_from(row: MoveRow) -> Result<Self, RecordError> {
        let unreadable = |why: String| RecordError::Unreadable { id: row.id, why };
        let state = row
            .state
            .parse::<MoveState>()
            .map_err(|e| unreadable(e.to_string()))?;
        let slots = row
            .slots
            .as_deref()
            .map(|text| text.parse::<SlotRanges>().map(SlotRanges::into_vec))
            .transpose()
            .map_err(|e| unreadable(e.to_string()))?;
        let previous =
            serde_json::from_str(&row.previous).map_err(|e| unreadable(e.to_string()))?;
        let checksums = row
            .checksums
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| unreadable(e.to_string()))?;
        Ok(Self {
            id: row.id,
            tenants: row.tenants,
            from: row.from_shard,
            to: row.to_shard,
            slot: row.slot,
            slots,
            state,
            confirm: row.confirm,
            previous,
            rows_copied: row.rows_copied,
            changes_applied: row.changes_applied,
            rows_verified: row.rows_verified,
            rows_deleted: row.rows_deleted,
            checksums,
            fence_ms: row.fence_ms,
            last_error: row.last_error,
            created_at: row.created_at,
            repinned_at: row.repinned_at,
            updated_at: row.updated_at,
        })
    }
}

/// Whether two lists name the same tenants, in any order.
pub fn same_tenants(a: &[String], b: &[String]) -> bool {
    use std::collections::BTreeSet;
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

fn records(rows: Vec<MoveRow>) -> Result<Vec<MoveRecord>, RecordError> {
    rows.into_iter().map(MoveRecord::try_from).collect()
}

impl MoveRecord {
    /// The `move_slot status` line.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "tenants": self.tenants,
            "from": self.from,
            "to": self.to,
            "slot": self.slot,
            "slots": self.slots.as_deref().map(ranges_text),
            "state": self.state,
            "confirm": self.confirm,
            "rows_copied": self.rows_copied,
            "changes_applied": self.changes_applied,
            "rows_verified": self.rows_verified,
            "rows_deleted": self.rows_deleted,
            "fence_ms": self.fence_ms,
            "last_error": self.last_error,
            "created_at": self.created_at,
            "repinned_at": self.repinned_at,
            "updated_at": self.updated_at,
        })
    }

    /// `--tenant a --tenant b` or `--slot N`, as the step commands take them.
    pub fn selection_args(&self) -> String {
        if let Some(ranges) = &self.slots {
            return format!("--slots {}", ranges_text(ranges));
        }
        match self.slot {
            Some(slot) => format!("--slot {slot}"),
            None => self
                .tenants
                .iter()
                .map(|t| format!("--tenant {t}"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// What a new move is.
#[derive(Clone, Debug)]
pub struct NewMove<'a> {
    pub tenants: &'a [String],
    pub from: &'a str,
    pub to: &'a str,
    pub slot: Option<u16>,
    pub slots: Option<&'a [SlotRange]>,
    pub confirm: bool,
    pub previous: &'a BTreeMap<String, Option<String>>,
}

/// Why a move could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// A tenant is already in an unfinished move.
    #[error("tenant {tenant} is already in move {move_id}")]
    Busy { tenant: String, move_id: i64 },
    /// A slot of a new range move is already being moved.
    #[error("slot {slot} is already being moved by move {move_id}")]
    SlotBusy { slot: u16, move_id: i64 },
    #[error(transparent)]
    Record(#[from] RecordError),
}

impl From<diesel::result::Error> for CreateError {
    fn from(e: diesel::result::Error) -> Self {
        CreateError::Record(RecordError::Db(e))
    }
}

#[derive(QueryableByName)]
struct Member {
    #[diesel(sql_type = Text)]
    tenant_key: String,
    #[diesel(sql_type = BigInt)]
    move_id: i64,
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Records a new move and its members, atomically: either every tenant joins it, or a
/// tenant already in another unfinished move refuses it.
pub async fn create(
    control: &mut AsyncPgConnection,
    new: &NewMove<'_>,
) -> Result<MoveRecord, CreateError> {
    let previous = serde_json::to_string(new.previous).expect("a map of strings serializes");
    let tenants = new.tenants.to_vec();
    let (from, to) = (new.from.to_owned(), new.to.to_owned());
    let (slot, confirm) = (new.slot.map(i32::from), new.confirm);
    let slots = new.slots.map(ranges_text);
    let ranges = new.slots.map(<[SlotRange]>::to_vec);
    control
        .transaction(async move |tx| {
            if let Some(ranges) = &ranges {
                // Range moves are few: serialise their creation and look for an overlap.
                diesel::sql_query("LOCK TABLE tenant_moves IN SHARE ROW EXCLUSIVE MODE")
                    .execute(tx)
                    .await?;
                if let Some(busy) = overlapping(tx, ranges).await? {
                    return Err(busy);
                }
            } else {
                for tenant in &tenants {
                    let slot = ShardKey::Str(tenant).slot().index();
                    if let Some(other) = active_for_range_slot(tx, slot).await? {
                        return Err(CreateError::SlotBusy {
                            slot,
                            move_id: other.id,
                        });
                    }
                }
            }
            let busy: Vec<Member> = diesel::sql_query(
                "SELECT tenant_key, move_id FROM tenant_move_members \
                 WHERE tenant_key = ANY($1) ORDER BY tenant_key FOR UPDATE",
            )
            .bind::<Array<Text>, _>(&tenants)
            .load(tx)
            .await?;
            if let Some(m) = busy.into_iter().next() {
                return Err(CreateError::Busy {
                    tenant: m.tenant_key,
                    move_id: m.move_id,
                });
            }
            let row: MoveRow = diesel::sql_query(format!(
                "INSERT INTO tenant_moves (tenants, from_shard, to_shard, slot, slots, confirm, previous) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb) RETURNING {COLUMNS}"
            ))
            .bind::<Array<Text>, _>(&tenants)
            .bind::<Text, _>(&from)
            .bind::<Text, _>(&to)
            .bind::<Nullable<Integer>, _>(slot)
            .bind::<Nullable<Text>, _>(&slots)
            .bind::<Bool, _>(confirm)
            .bind::<Text, _>(&previous)
            .get_result(tx)
            .await?;
            let record = MoveRecord::try_from(row)?;
            // A range move's tenants are whoever the slot map sends through its ranges
            // (new ones too): the overlap checks cover them, not member rows.
            let members: &[String] = if ranges.is_some() { &[] } else { &tenants };
            for tenant in members {
                // A concurrent create of the same tenant fails here on the primary key.
                let inserted = diesel::sql_query(
                    "INSERT INTO tenant_move_members (tenant_key, move_id) VALUES ($1, $2) \
                     ON CONFLICT (tenant_key) DO NOTHING",
                )
                .bind::<Text, _>(tenant)
                .bind::<BigInt, _>(record.id)
                .execute(tx)
                .await?;
                if inserted == 0 {
                    let other: Member = diesel::sql_query(
                        "SELECT tenant_key, move_id FROM tenant_move_members WHERE tenant_key = $1",
                    )
                    .bind::<Text, _>(tenant)
                    .get_result(tx)
                    .await?;
                    return Err(CreateError::Busy {
                        tenant: other.tenant_key,
                        move_id: other.move_id,
                    });
                }
            }
            Ok(record)
        })
        .await
}

/// An unfinished move that a range move of `ranges` would collide with: another range
/// move over any of its slots, or a tenant move of a tenant hashing into them.
async fn overlapping(
    tx: &mut AsyncPgConnection,
    ranges: &[SlotRange],
) -> Result<Option<CreateError>, CreateError> {
    let inside = |slot: u16| ranges.iter().any(|r| r.contains(slot));
    for other in unfinished(tx).await? {
        let hit = match &other.slots {
            Some(theirs) => theirs.iter().flat_map(|r| r.iter()).find(|&s| inside(s)),
            None => other
                .tenants
                .iter()
                .map(|t| ShardKey::Str(t).slot().index())
                .find(|&s| inside(s)),
        };
        if let Some(slot) = hit {
            return Ok(Some(CreateError::SlotBusy {
                slot,
                move_id: other.id,
            }));
        }
    }
    Ok(None)
}

/// Every move that is not done or aborted.
pub async fn unfinished(control: &mut AsyncPgConnection) -> Result<Vec<MoveRecord>, RecordError> {
    let rows: Vec<MoveRow> = diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM tenant_moves WHERE state NOT IN ('done', 'aborted') ORDER BY id"
    ))
    .load(control)
    .await?;
    records(rows)
}

/// The unfinished range move whose ranges hold `slot`, if any.
pub async fn active_for_range_slot(
    control: &mut AsyncPgConnection,
    slot: u16,
) -> Result<Option<MoveRecord>, RecordError> {
    let id = range_move_covering(control, slot).await?;
    load_some(control, id.map(|id| Id { id })).await
}

pub async fn load(
    control: &mut AsyncPgConnection,
    id: i64,
) -> Result<Option<MoveRecord>, RecordError> {
    let rows: Vec<MoveRow> =
        diesel::sql_query(format!("SELECT {COLUMNS} FROM tenant_moves WHERE id = $1"))
            .bind::<BigInt, _>(id)
            .load(control)
            .await?;
    Ok(records(rows)?.pop())
}

/// Every move, oldest first.
pub async fn list(control: &mut AsyncPgConnection) -> Result<Vec<MoveRecord>, RecordError> {
    let rows: Vec<MoveRow> =
        diesel::sql_query(format!("SELECT {COLUMNS} FROM tenant_moves ORDER BY id"))
            .load(control)
            .await?;
    records(rows)
}

/// The newest `limit` moves, newest first: all of them, or those of one tenant.
pub async fn recent(
    control: &mut AsyncPgConnection,
    tenant: Option<&str>,
    limit: i64,
) -> Result<Vec<MoveRecord>, RecordError> {
    let rows: Vec<MoveRow> = diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM tenant_moves WHERE $1::text IS NULL OR $1 = ANY(tenants) \
         ORDER BY id DESC LIMIT $2"
    ))
    .bind::<Nullable<Text>, _>(tenant)
    .bind::<BigInt, _>(limit)
    .load(control)
    .await?;
    records(rows)
}

async fn load_some(
    control: &mut AsyncPgConnection,
    id: Option<Id>,
) -> Result<Option<MoveRecord>, RecordError> {
    match id {
        Some(Id { id }) => load(control, id).await,
        None => Ok(None),
    }
}

/// The unfinished move holding any of `tenants`, if there is one.
pub async fn active_for(
    control: &mut AsyncPgConnection,
    tenants: &[String],
) -> Result<Option<MoveRecord>, RecordError> {
    let ids: Vec<Id> = diesel::sql_query(
        "SELECT move_id AS id FROM tenant_move_members WHERE tenant_key = ANY($1) LIMIT 1",
    )
    .bind::<Array<Text>, _>(tenants)
    .load(control)
    .await?;
    load_some(control, ids.into_iter().next()).await
}

/// The unfinished move of `slot` between two shards, if there is one.
pub async fn active_for_slot(
    control: &mut AsyncPgConnection,
    slot: u16,
    from: &str,
    to: &str,
) -> Result<Option<MoveRecord>, RecordError> {
    let ids: Vec<Id> = diesel::sql_query(
        "SELECT id FROM tenant_moves WHERE slot = $1 AND from_shard = $2 AND to_shard = $3 \
         AND state NOT IN ('done', 'aborted') ORDER BY id DESC LIMIT 1",
    )
    .bind::<Integer, _>(i32::from(slot))
    .bind::<Text, _>(from)
    .bind::<Text, _>(to)
    .load(control)
    .await?;
    load_some(control, ids.into_iter().next()).await
}

/// One column to set with a new state: a counter, a timestamp stamped now, and so on.
pub enum Set<'a> {
    Count(&'static str, i64),
    /// The tenants a range move found.
    Tenants(&'a [String]),
    Now(&'static str),
    /// Empties a timestamp column.
    Null(&'static str),
    Json(&'static str, &'a Value),
    Error(Option<&'a str>),
    /// `fence_ms`: how long the tenants' writes have been refused, from the fence to now.
    FenceWindow,
}

/// Moves `record` to `state`, setting `also` in the same statement, and reloads it.
/// Finishing a move (done or aborted) releases its tenants for other moves.
pub async fn advance(
    control: &mut AsyncPgConnection,
    record: &mut MoveRecord,
    state: MoveState,
    also: &[Set<'_>],
) -> Result<(), RecordError> {
    // Parameters $1 (id) and $2 (state) come first; each `Set` that carries a value adds
    // the next one, bound below in the same order.
    let mut sets = vec!["state = $2".to_owned(), "updated_at = now()".to_owned()];
    let mut next = 3;
    for set in also {
        let clause = match set {
            Set::Count(column, _) => format!("{column} = ${next}"),
            Set::Tenants(_) => format!("tenants = ${next}"),
            Set::Json(column, _) => format!("{column} = ${next}::text::jsonb"),
            Set::Error(_) => format!("last_error = ${next}"),
            Set::Now(column) => {
                sets.push(format!("{column} = now()"));
                continue;
            }
            Set::Null(column) => {
                sets.push(format!("{column} = NULL"));
                continue;
            }
            Set::FenceWindow => {
                sets.push(
                    "fence_ms = (extract(epoch FROM now() - fenced_at) * 1000)::bigint".to_owned(),
                );
                continue;
            }
        };
        sets.push(clause);
        next += 1;
    }
    // One statement, so a finished move never keeps its tenants from later moves.
    let mut query = diesel::sql_query(format!(
        "WITH released AS (DELETE FROM tenant_move_members WHERE move_id = $1 \
         AND $2 IN ('done', 'aborted')) \
         UPDATE tenant_moves SET {} WHERE id = $1 RETURNING {COLUMNS}",
        sets.join(", ")
    ))
    .into_boxed::<Pg>()
    .bind::<BigInt, _>(record.id)
    .bind::<Text, _>(state.as_str());
    for set in also {
        query = match set {
            Set::Count(_, n) => query.bind::<BigInt, _>(*n),
            Set::Tenants(t) => query.bind::<Array<Text>, _>(t.to_vec()),
            Set::Json(_, value) => query.bind::<Text, _>(value.to_string()),
            Set::Error(e) => query.bind::<Nullable<Text>, _>(e.map(str::to_owned)),
            Set::Now(_) | Set::Null(_) | Set::FenceWindow => query,
        };
    }
    let row: MoveRow = query.get_result(control).await?;
    *record = MoveRecord::try_from(row)?;
    Ok(())
}

#[derive(QueryableByName)]
struct Wait {
    #[diesel(sql_type = Double)]
    seconds: f64,
}

/// Seconds left until the move's re-pin is `grace` old (0 when it is already).
pub async fn until_repin_is(
    control: &mut AsyncPgConnection,
    id: i64,
    grace: std::time::Duration,
) -> Result<f64, RecordError> {
    let wait: Wait = diesel::sql_query(
        "SELECT greatest(0, extract(epoch FROM repinned_at - now()) + $2::float8)::float8 \
         AS seconds FROM tenant_moves WHERE id = $1",
    )
    .bind::<BigInt, _>(id)
    .bind::<Double, _>(grace.as_secs_f64())
    .get_result(control)
    .await?;
    Ok(wait.seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_exactly_the_next_step_of_the_happy_path() {
        let expected = [
            (MoveState::Planned, Some(Step::Copy)),
            (MoveState::Copying, Some(Step::Copy)),
            (MoveState::Copied, Some(Step::Verify)),
            (MoveState::Fenced, Some(Step::Verify)),
            (MoveState::Verified, Some(Step::Repin)),
            (MoveState::Repinned, Some(Step::Delete)),
            (MoveState::Done, None),
            (MoveState::Aborted, None),
        ];
        for (state, next) in expected {
            assert_eq!(state.next_step(), next, "{state}");
        }
    }

    #[test]
    fn every_step_in_every_state_runs_is_already_done_or_is_out_of_order() {
        use StepCheck::{AlreadyDone as Past, OutOfOrder as No, Run};
        // Rows: states in order; columns: copy, verify, repin, delete.
        let table = [
            (MoveState::Planned, [Run, No, No, No]),
            (MoveState::Copying, [Run, No, No, No]),
            (MoveState::Copied, [Past, Run, No, No]),
            (MoveState::Fenced, [Past, Run, No, No]),
            (MoveState::Verified, [Past, Past, Run, No]),
            (MoveState::Repinned, [Past, Past, Past, Run]),
            (MoveState::Done, [No, No, No, Past]),
            (MoveState::Aborted, [No, No, No, No]),
        ];
        assert_eq!(table.len(), MoveState::ALL.len());
        for (state, row) in table {
            for (step, expected) in Step::ALL.into_iter().zip(row) {
                assert_eq!(state.check(step), expected, "{step:?} on a {state} move");
            }
        }
    }

    #[test]
    fn each_steps_wording_names_a_state_in_which_it_runs() {
        for step in Step::ALL {
            let runs_in: Vec<MoveState> = MoveState::ALL
                .into_iter()
                .filter(|s| s.check(step) == StepCheck::Run)
                .collect();
            let named = runs_in
                .iter()
                .any(|s| step.needs().replace('-', "").contains(s.as_str()));
            assert!(
                named,
                "{step:?} needs {:?}, runs in {runs_in:?}",
                step.needs()
            );
        }
    }

    #[test]
    fn states_read_back_from_their_names() {
        for state in MoveState::ALL {
            assert_eq!(state.as_str().parse::<MoveState>(), Ok(state));
        }
        assert!("paused".parse::<MoveState>().is_err());
    }
}
