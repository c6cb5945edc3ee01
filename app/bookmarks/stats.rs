//! `GET /api/stats`: per-shard counts across every shard, needing no tenant. Reads through
//! `CrossShard` (replica-aware: cross-tenant numbers tolerate lag) and degrades to a
//! partial answer when a shard is down.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::store;
use crate::sharding::cross_shard::{CrossShard, Server, public_reason};
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

pub async fn stats(State(state): State<AppState>, cross: CrossShard) -> Json<StatsView> {
    let fan_out = cross
        .read(|conn| Box::pin(async move { store::shard_counts(conn).await }))
        .await;
    let shards = fan_out
        .answers
        .into_iter()
        .zip(state.shards.set().iter())
        .map(|(answer, shard)| {
            let base = ShardStats {
                name: answer.shard,
                slots: shard.spec().slot_count(),
                status: "up",
                bookmarks: None,
                tenants: None,
                served_by: None,
                error: None,
            };
            match answer.outcome {
                Ok(ok) => ShardStats {
                    bookmarks: Some(ok.value.0),
                    tenants: Some(ok.value.1),
                    served_by: Some(match ok.server {
                        Server::Replica => "replica",
                        Server::Primary => "primary",
                    }),
                    ..base
                },
                Err(e) => ShardStats {
                    status: "down",
                    error: Some(public_reason(&e)),
                    ..base
                },
            }
        })
        .collect();
    Json(StatsView { shards })
}
