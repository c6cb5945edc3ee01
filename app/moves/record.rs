//! A move as the control database's `tenant_moves` row records it: which tenants go where,
//! how far the move got, and what it counted.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

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

impl MoveState {
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
}

impl fmt::Display for MoveState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MoveState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [
            MoveState::Planned,
            MoveState::Copying,
            MoveState::Copied,
            MoveState::Fenced,
            MoveState::Verified,
            MoveState::Repinned,
            MoveState::Done,
            MoveState::Aborted,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
        .ok_or_else(|| format!("unknown move state {s:?}"))
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

const COLUMNS: &str = "id, tenants, from_shard, to_shard, slot, state, confirm, previous::text, \
     rows_copied, changes_applied, rows_verified, rows_deleted, checksums::text, fence_ms, \
     last_error, created_at, repinned_at, updated_at";

impl MoveRecord {
    fn from_row(row: &Row) -> Result<Self, String> {
        let previous: String = row.get(7);
        let checksums: Option<String> = row.get(12);
        Ok(Self {
            id: row.get(0),
            tenants: row.get(1),
            from: row.get(2),
            to: row.get(3),
            slot: row.get(4),
            state: row.get::<_, String>(5).parse()?,
            confirm: row.get(6),
            previous: serde_json::from_str(&previous).map_err(|e| e.to_string())?,
            rows_copied: row.get(8),
            changes_applied: row.get(9),
            rows_verified: row.get(10),
            rows_deleted: row.get(11),
            checksums: checksums
                .map(|c| serde_json::from_str(&c))
                .transpose()
                .map_err(|e| e.to_string())?,
            fence_ms: row.get(13),
            last_error: row.get(14),
            created_at: row.get(15),
            repinned_at: row.get(16),
            updated_at: row.get(17),
        })
    }

    /// The `move_slot status` line.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "tenants": self.tenants,
            "from": self.from,
            "to": self.to,
            "slot": self.slot,
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
    pub confirm: bool,
    pub previous: &'a BTreeMap<String, Option<String>>,
}

/// Why a move could not be recorded.
#[derive(Debug)]
pub enum CreateError {
    /// A tenant is already in an unfinished move.
    Busy {
        tenant: String,
        move_id: i64,
    },
    Db(tokio_postgres::Error),
}

/// Records a new move and its members, atomically: either every tenant joins it, or a
/// tenant already in another unfinished move refuses it.
pub async fn create(control: &mut Client, new: &NewMove<'_>) -> Result<MoveRecord, CreateError> {
    let tx = control.transaction().await.map_err(CreateError::Db)?;
    let busy = tx
        .query(
            "SELECT tenant_key, move_id FROM tenant_move_members WHERE tenant_key = ANY($1) \
             ORDER BY tenant_key FOR UPDATE",
            &[&new.tenants],
        )
        .await
        .map_err(CreateError::Db)?;
    if let Some(row) = busy.first() {
        return Err(CreateError::Busy {
            tenant: row.get(0),
            move_id: row.get(1),
        });
    }
    let previous = serde_json::to_string(new.previous).expect("a map of strings serializes");
    let row = tx
        .query_one(
            &format!(
                "INSERT INTO tenant_moves (tenants, from_shard, to_shard, slot, confirm, previous) \
                 VALUES ($1, $2, $3, $4, $5, $6::text::jsonb) RETURNING {COLUMNS}"
            ),
            &[
                &new.tenants,
                &new.from,
                &new.to,
                &new.slot.map(i32::from),
                &new.confirm,
                &previous,
            ],
        )
        .await
        .map_err(CreateError::Db)?;
    let record = MoveRecord::from_row(&row).expect("a row just written reads back");
    for tenant in new.tenants {
        // A concurrent create of the same tenant fails here on the primary key.
        let inserted = tx
            .execute(
                "INSERT INTO tenant_move_members (tenant_key, move_id) VALUES ($1, $2) \
                 ON CONFLICT (tenant_key) DO NOTHING",
                &[tenant, &record.id],
            )
            .await
            .map_err(CreateError::Db)?;
        if inserted == 0 {
            let other: i64 = tx
                .query_one(
                    "SELECT move_id FROM tenant_move_members WHERE tenant_key = $1",
                    &[tenant],
                )
                .await
                .map_err(CreateError::Db)?
                .get(0);
            return Err(CreateError::Busy {
                tenant: tenant.clone(),
                move_id: other,
            });
        }
    }
    tx.commit().await.map_err(CreateError::Db)?;
    Ok(record)
}

pub async fn load(control: &Client, id: i64) -> Result<Option<MoveRecord>, String> {
    let row = control
        .query_opt(
            &format!("SELECT {COLUMNS} FROM tenant_moves WHERE id = $1"),
            &[&id],
        )
        .await
        .map_err(|e| e.to_string())?;
    row.as_ref().map(MoveRecord::from_row).transpose()
}

/// Every move, oldest first.
pub async fn list(control: &Client) -> Result<Vec<MoveRecord>, String> {
    control
        .query(
            &format!("SELECT {COLUMNS} FROM tenant_moves ORDER BY id"),
            &[],
        )
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(MoveRecord::from_row)
        .collect()
}

/// The unfinished move holding any of `tenants`, if there is one.
pub async fn active_for(
    control: &Client,
    tenants: &[String],
) -> Result<Option<MoveRecord>, String> {
    let id: Option<i64> = control
        .query_opt(
            "SELECT move_id FROM tenant_move_members WHERE tenant_key = ANY($1) LIMIT 1",
            &[&tenants],
        )
        .await
        .map_err(|e| e.to_string())?
        .map(|r| r.get(0));
    load_some(control, id).await
}

async fn load_some(control: &Client, id: Option<i64>) -> Result<Option<MoveRecord>, String> {
    match id {
        Some(id) => load(control, id).await,
        None => Ok(None),
    }
}

/// The unfinished move of `slot` between two shards, if there is one.
pub async fn active_for_slot(
    control: &Client,
    slot: u16,
    from: &str,
    to: &str,
) -> Result<Option<MoveRecord>, String> {
    let id: Option<i64> = control
        .query_opt(
            "SELECT id FROM tenant_moves WHERE slot = $1 AND from_shard = $2 AND to_shard = $3 \
             AND state NOT IN ('done', 'aborted') ORDER BY id DESC LIMIT 1",
            &[&i32::from(slot), &from, &to],
        )
        .await
        .map_err(|e| e.to_string())?
        .map(|r| r.get(0));
    load_some(control, id).await
}

/// One column to set with a new state: a counter, a timestamp stamped now, and so on.
pub enum Set<'a> {
    Count(&'static str, i64),
    Now(&'static str),
    Json(&'static str, &'a Value),
    Error(Option<&'a str>),
}

/// Moves `record` to `state`, setting `also` in the same statement, and reloads it.
/// Finishing a move (done or aborted) releases its tenants for other moves.
pub async fn advance(
    control: &Client,
    record: &mut MoveRecord,
    state: MoveState,
    also: &[Set<'_>],
) -> Result<(), String> {
    type Param = Box<dyn ToSql + Sync + Send>;
    let mut params: Vec<Param> = vec![Box::new(record.id), Box::new(state.as_str().to_owned())];
    let mut sets = vec!["state = $2".to_owned(), "updated_at = now()".to_owned()];
    for set in also {
        match set {
            Set::Count(column, n) => {
                params.push(Box::new(*n));
                sets.push(format!("{column} = ${}", params.len()));
            }
            Set::Now(column) => sets.push(format!("{column} = now()")),
            Set::Json(column, value) => {
                params.push(Box::new(value.to_string()));
                sets.push(format!("{column} = ${}::text::jsonb", params.len()));
            }
            Set::Error(e) => {
                params.push(Box::new(e.map(str::to_owned)));
                sets.push(format!("last_error = ${}", params.len()));
            }
        }
    }
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    // One statement, so a finished move never keeps its tenants from later moves.
    let row = control
        .query_one(
            &format!(
                "WITH released AS (DELETE FROM tenant_move_members WHERE move_id = $1 \
                 AND $2 IN ('done', 'aborted')) \
                 UPDATE tenant_moves SET {} WHERE id = $1 RETURNING {COLUMNS}",
                sets.join(", ")
            ),
            &refs,
        )
        .await
        .map_err(|e| e.to_string())?;
    *record = MoveRecord::from_row(&row)?;
    Ok(())
}
