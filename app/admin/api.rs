//! The admin's JSON API (`/admin/api/*`): the same figures as the page, as JSON.

use axum::extract::State;
use axum::response::{IntoResponse, Json, Response};

use super::state::{AdminState, TAG, tenant_param};
use super::{browse, lookup, moves, overview};
use crate::fairness::advice::Advice;
use crate::sharding::cross_shard::CrossShard;
use crate::web::error::ApiError;
use crate::web::extract::{ApiPath, ApiQuery};
use crate::web::openapi::TenantIdSchema;

/// Every shard's servers, pools, replica lag and search backlog.
#[utoipa::path(
    get,
    path = "/admin/api/shards",
    tag = TAG,
    responses((status = 200, description = "Every shard's card; a shard that did not answer in time is reported, not left out.", body = ShardsView))
)]
pub async fn api_shards(State(state): State<AdminState>, cross: CrossShard) -> Response {
    let (cards, facts) = overview::shard_cards(&state, &cross).await;
    let coverage = facts.coverage();
    Json(ShardsView {
        shards: cards,
        coverage,
    })
    .into_response()
}

/// Every shard's card, and which shards answered the counts.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct ShardsView {
    shards: Vec<overview::ShardCard>,
    coverage: Vec<crate::sharding::cross_shard::Coverage>,
}

/// The slot map as configured, and the tenants the directory places.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct SlotsView {
    slot_count: u16,
    shards: Vec<SlotOwner>,
    placed: Vec<crate::sharding::directory::placement::PinEntry>,
    /// Why the directory could not be read (then `placed` shows config pins only).
    directory_error: Option<String>,
}

/// A shard's part of the slot map.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct SlotOwner {
    name: String,
    colour: &'static str,
    slot_count: u32,
    /// Inclusive `[start, end]` ranges.
    #[schema(value_type = Vec<Vec<u16>>)]
    ranges: Vec<[u16; 2]>,
}

/// This replica's busiest tenants, per-shard totals and the advice drawn from them.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct BusiestView {
    instance: String,
    max_in_flight_per_tenant: u32,
    window_seconds: u64,
    tenants: Vec<crate::fairness::busiest::TenantLoad>,
    /// `[shard, requests]` pairs.
    #[schema(value_type = Vec<Vec<Value>>)]
    shards: Vec<(String, u64)>,
    advice: Vec<Advice>,
}

/// The slot map: each shard's slot ranges, and the tenants placed by the directory.
#[utoipa::path(
    get,
    path = "/admin/api/slots",
    tag = TAG,
    responses((status = 200, description = "The slot map and the placed tenants.", body = SlotsView))
)]
pub async fn api_slots(State(state): State<AdminState>) -> Response {
    let set = state.shards.set();
    let shards = set
        .iter()
        .enumerate()
        .map(|(i, s)| SlotOwner {
            name: s.name().to_owned(),
            colour: overview::colour(i),
            slot_count: s.spec().slot_count(),
            ranges: s
                .spec()
                .slots
                .iter()
                .map(|r| [r.start(), r.end()])
                .collect(),
        })
        .collect();
    let (placed, directory_error) = overview::pins(&state).await;
    Json(SlotsView {
        slot_count: crate::sharding::SLOT_COUNT,
        shards,
        placed,
        directory_error,
    })
    .into_response()
}

/// Bookmarks across every shard and tenant, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/admin/api/bookmarks",
    tag = TAG,
    params(browse::BrowseParams),
    responses((status = 200, description = "A page, with `next_cursor`/`prev_cursor` and which shards answered.", body = browse::BrowsePage))
)]
pub async fn api_bookmarks(
    cross: CrossShard,
    ApiQuery(params): ApiQuery<browse::BrowseParams>,
) -> Result<Response, ApiError> {
    let request = params.parse()?;
    Ok(Json(browse::page(&cross, &request).await).into_response())
}

/// Where one tenant routes and why, where its rows are, its moves and its keys.
#[utoipa::path(
    get,
    path = "/admin/api/tenants/{key}",
    tag = TAG,
    params(("key" = inline(TenantIdSchema), Path, description = "The tenant id.")),
    responses((status = 200, description = "The tenant's report.", body = lookup::TenantReport))
)]
pub async fn api_tenant(
    State(state): State<AdminState>,
    cross: CrossShard,
    ApiPath(key): ApiPath<String>,
) -> Result<Response, ApiError> {
    let tenant = tenant_param(&key)?;
    Ok(Json(lookup::report(&state, &cross, &tenant).await).into_response())
}

/// The directory's pins.
#[utoipa::path(
    get,
    path = "/admin/api/pins",
    tag = TAG,
    responses((status = 200, description = "Every placed tenant and whether its rule is in effect.", body = PinsView))
)]
pub async fn api_pins(State(state): State<AdminState>) -> Result<Response, ApiError> {
    match overview::pins(&state).await {
        (pins, None) => Ok(Json(PinsView { pins }).into_response()),
        (_, Some(_)) => Err(ApiError::ControlUnavailable),
    }
}

/// Every placed tenant: directory rows and config pins.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct PinsView {
    pins: Vec<crate::sharding::directory::placement::PinEntry>,
}

/// The most recent moves, newest first.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct MovesView {
    moves: Vec<moves::MoveSummary>,
}

/// This replica's busiest tenants and the placement advice drawn from them.
#[utoipa::path(
    get,
    path = "/admin/api/busiest",
    tag = TAG,
    responses((status = 200, description = "The busiest tenants in the last window, per shard, with advice.", body = BusiestView))
)]
pub async fn api_busiest(State(state): State<AdminState>) -> Response {
    let (report, advice) = state.busiest();
    Json(BusiestView {
        instance: state.instance.as_str().to_owned(),
        max_in_flight_per_tenant: state.fairness.limit(),
        window_seconds: report.window_seconds,
        tenants: report.tenants,
        shards: report.shards,
        advice,
    })
    .into_response()
}

/// Recent tenant moves and where each stands.
#[utoipa::path(
    get,
    path = "/admin/api/moves",
    tag = TAG,
    responses((status = 200, description = "The most recent moves and where each stands.", body = MovesView))
)]
pub async fn api_moves(State(state): State<AdminState>) -> Result<Response, ApiError> {
    match moves::recent(&state, None).await {
        Ok(moves) => Ok(Json(MovesView { moves }).into_response()),
        Err(_) => Err(ApiError::ControlUnavailable),
    }
}
