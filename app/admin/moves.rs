//! The tenant moves recorded by `move_slot` on the control database, as the admin page
//! lists them. `move_slot` writes these rows (see `crate::moves::record`); this is a
//! read-only view through the web's own control pool.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;
use serde::Serialize;

use crate::web::state::AppState;

/// How many moves the page lists (newest first).
const SHOWN: i64 = 50;

#[derive(Debug, Clone, QueryableByName, Serialize)]
pub struct MoveSummary {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = Array<Text>)]
    pub tenants: Vec<String>,
    #[diesel(sql_type = Text)]
    pub from_shard: String,
    #[diesel(sql_type = Text)]
    pub to_shard: String,
    #[diesel(sql_type = Text)]
    pub state: String,
    #[diesel(sql_type = BigInt)]
    pub rows_copied: i64,
    #[diesel(sql_type = BigInt)]
    pub rows_verified: i64,
    #[diesel(sql_type = BigInt)]
    pub rows_deleted: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub fence_ms: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    pub last_error: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, tenants, from_shard, to_shard, state, rows_copied, rows_verified, \
     rows_deleted, fence_ms, last_error, created_at, updated_at";

/// The newest moves, all of them or those of one tenant; `Err` names the kind of failure.
pub async fn recent(state: &AppState, tenant: Option<&str>) -> Result<Vec<MoveSummary>, String> {
    let tenant = tenant.map(str::to_owned);
    super::on_control(state, "read tenant moves", |conn| {
        Box::pin(async move {
            diesel::sql_query(format!(
                "SELECT {COLUMNS} FROM tenant_moves WHERE $1::text IS NULL OR $1 = ANY(tenants) \
                 ORDER BY id DESC LIMIT {SHOWN}"
            ))
            .bind::<Nullable<Text>, _>(tenant)
            .load(conn)
            .await
        })
    })
    .await
}
