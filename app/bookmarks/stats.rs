//! `GET /api/stats`: per-shard counts across every shard, needing no tenant. Uses the
//! replica-aware read path (cross-tenant numbers tolerate replica lag) and degrades to a
//! partial answer when a shard is down.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::store;
use crate::sharding::access::ShardError;
use crate::web::state::AppState;

#[derive(Serialize)]
pub struct ShardStats {
    pub name: String,
    pub slots: u32,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bookmarks: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenants: Option<i64>,
    /// `replica` or `primary`: which server answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_by: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize)]
pub struct StatsView {
    pub shards: Vec<ShardStats>,
}

pub async fn stats(State(state): State<AppState>) -> Json<StatsView> {
    let outcomes = state
        .shards
        .each_shard(true, state.shard_timeout, |mut conn| async move {
            let counts = store::shard_counts(&mut conn.conn)
                .await
                .map_err(|e| ShardError::from_query(&conn.name, e))?;
            Ok((counts, conn.on_replica))
        })
        .await;
    let shards = outcomes
        .into_iter()
        .map(|(id, outcome)| {
            let shard = state.shards.set().get(id);
            let base = ShardStats {
                name: shard.name().to_owned(),
                slots: shard.spec().slot_count(),
                status: "up",
                bookmarks: None,
                tenants: None,
                served_by: None,
                error: None,
            };
            match outcome {
                Ok(((bookmarks, tenants), on_replica)) => ShardStats {
                    bookmarks: Some(bookmarks),
                    tenants: Some(tenants),
                    served_by: Some(if on_replica { "replica" } else { "primary" }),
                    ..base
                },
                Err(e) => {
                    tracing::warn!(shard = shard.name(), error = %e, "stats: shard failed");
                    ShardStats {
                        status: "down",
                        error: Some(public_reason(&e)),
                        ..base
                    }
                }
            }
        })
        .collect();
    Json(StatsView { shards })
}

/// What a client may learn about a failure: its kind, not the server's words.
fn public_reason(e: &ShardError) -> String {
    match e {
        ShardError::Unavailable { .. } => "unreachable".to_owned(),
        ShardError::Timeout { timeout, .. } => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        ShardError::ReplicaUnavailable { .. } => "replica not ready (fail_readiness)".to_owned(),
        _ => "query failed".to_owned(),
    }
}
