//! `GET /api/stats`: per-shard counts across every shard, needing no tenant. Reads through
//! `CrossShard` (replica-aware: cross-tenant numbers tolerate lag) and degrades to a
//! partial answer when a shard is down. Anyone may ask, so each process fans out at most
//! once a second ([`StatsCache`]) however many ask.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{FromRef, State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::store;
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::{CrossShard, Server, public_reason};

#[derive(Clone, Serialize, ToSchema)]
pub struct ShardStats {
    pub name: String,
    pub slots: u32,
    /// `up`, or `down` with an `error`.
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

/// Every shard's counts; a shard that did not answer in time is `down`, and the others
/// are still counted.
#[derive(Clone, Serialize, ToSchema)]
pub struct StatsView {
    pub shards: Vec<ShardStats>,
}

/// How long one answer serves every asker.
pub const STATS_FRESH_FOR: Duration = Duration::from_secs(1);

/// This process's last answer and when it was computed. One lock: askers who arrive while
/// it is being computed wait for that answer rather than each fanning out.
#[derive(Clone, Default)]
pub struct StatsCache(Arc<tokio::sync::Mutex<Option<(Instant, StatsView)>>>);

/// `/api/stats`: no tenant, so it passes no tenant's bulkhead.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
    CrossShard: FromRef<S>,
    StatsCache: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(stats))
}

/// Bookmarks and tenants per shard, across every shard; needs no tenant and shows none.
#[utoipa::path(
    get,
    path = "/api/stats",
    tag = crate::web::openapi::OPERATIONS_TAG,
    responses((status = 200, description = "Counts per shard, at most a second old.", body = StatsView))
)]
async fn stats(
    State(shards): State<Shards>,
    State(cache): State<StatsCache>,
    cross: CrossShard,
) -> Json<StatsView> {
    let mut last = cache.0.lock().await;
    if let Some((at, view)) = last.as_ref()
        && at.elapsed() < STATS_FRESH_FOR
    {
        return Json(view.clone());
    }
    let view = count(&shards, &cross).await;
    *last = Some((Instant::now(), view.clone()));
    Json(view)
}

async fn count(shards: &Shards, cross: &CrossShard) -> StatsView {
    let fan_out = cross
        .read(|conn| Box::pin(async move { store::shard_counts(conn).await }))
        .await;
    // Owned now, range moves included (the live slot map), not as autumn.toml says.
    let owners = shards.set().slot_map().snapshot();
    let shards = fan_out
        .answers
        .into_iter()
        .zip(shards.set().iter())
        .map(|(answer, shard)| {
            let base = ShardStats {
                name: answer.shard,
                slots: owners.slot_count_of(shard.id().index()),
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
    StatsView { shards }
}
