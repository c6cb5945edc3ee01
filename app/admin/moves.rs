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
    let load = async {
        let mut conn = state.control.get().await.map_err(|e| e.to_string())?;
        let rows = match tenant {
            Some(t) => {
                diesel::sql_query(format!(
                    "SELECT {COLUMNS} FROM tenant_moves WHERE $1 = ANY(tenants) \
                     ORDER BY id DESC LIMIT {SHOWN}"
                ))
                .bind::<Text, _>(t)
                .load(&mut conn)
                .await
            }
            None => {
                diesel::sql_query(format!(
                    "SELECT {COLUMNS} FROM tenant_moves ORDER BY id DESC LIMIT {SHOWN}"
                ))
                .load(&mut conn)
                .await
            }
        };
        rows.map_err(|e| e.to_string())
    };
    match tokio::time::timeout(state.shard_timeout, load).await {
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(cause)) => {
            tracing::warn!(error = %cause, "admin: cannot read tenant moves");
            Err("unreachable".to_owned())
        }
        Err(_) => Err(format!(
            "no answer within {} ms",
            state.shard_timeout.as_millis()
        )),
    }
}
