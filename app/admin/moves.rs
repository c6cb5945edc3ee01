//! The tenant moves recorded by `move_slot`, as the admin page lists them: read through the
//! same `moves::record` functions `move_slot status` uses, shown as a summary.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::ControlError;
use super::state::AdminState;
use crate::moves::MoveRecord;
use crate::moves::record;

/// How many moves the page lists (newest first).
const SHOWN: i64 = 50;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MoveSummary {
    pub id: i64,
    /// The tenants moved (for a range move: those its copy found).
    pub tenants: Vec<String>,
    /// A range move's slot ranges, e.g. `0-4095,9000`; absent for a tenant move.
    pub slots: Option<String>,
    pub from_shard: String,
    pub to_shard: String,
    pub state: String,
    pub rows_copied: i64,
    pub rows_verified: i64,
    pub rows_deleted: i64,
    pub fence_ms: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<MoveRecord> for MoveSummary {
    fn from(m: MoveRecord) -> Self {
        Self {
            id: m.id,
            tenants: m.tenants,
            slots: m
                .slots
                .as_deref()
                .map(crate::sharding::slot_range::ranges_text),
            from_shard: m.from,
            to_shard: m.to,
            state: m.state.as_str().to_owned(),
            rows_copied: m.rows_copied,
            rows_verified: m.rows_verified,
            rows_deleted: m.rows_deleted,
            fence_ms: m.fence_ms,
            last_error: m.last_error,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

/// The newest moves, all of them or those of one tenant.
pub async fn recent(
    state: &AdminState,
    tenant: Option<&str>,
) -> Result<Vec<MoveSummary>, ControlError> {
    let tenant = tenant.map(str::to_owned);
    let moves = state
        .control
        .run("read tenant moves", |conn| {
            Box::pin(async move { record::recent(conn, tenant.as_deref(), SHOWN).await })
        })
        .await?;
    Ok(moves.into_iter().map(MoveSummary::from).collect())
}
