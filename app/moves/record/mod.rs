//! A move as the control database's `tenant_moves` row records it: which tenants go where,
//! how far the move got, and what it counted; and every statement on `tenant_moves` and
//! `tenant_move_members`: `move_slot` and the admin page both read moves through here.
//! Which step may run in which state is [`super::state`]'s alone.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bool, Double, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::{Value, json};

mod create;

pub use super::state::{MoveState, Step};
use crate::sharding::SlotRange;
use crate::sharding::directory::placement::range_move_covering;
use crate::sharding::slot_range::{SlotRanges, ranges_text};
pub use create::{CreateError, NewMove, create};

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
pub(super) struct MoveRow {
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

pub(super) const COLUMNS: &str = "id, tenants, from_shard, to_shard, slot, slots, state, confirm, \
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

#[derive(QueryableByName)]
pub(super) struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
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
