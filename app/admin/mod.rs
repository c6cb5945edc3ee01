//! The operator's admin page (`/admin`) and its JSON twins (`/admin/api/*`): every shard at
//! a glance, the slot map, a browse across shards, tenant lookup and placement.
//!
//! Mounted only when `ADMIN_TOKEN` is set, behind [`auth::require`]. Reads go through
//! [`CrossShard`] (read-only, bounded, and honest about which shards answered); the only
//! write is placement, through the same `Placer` rules as `bookmarks pin`. It draws on
//! what the other features keep in this process (search lag, job counts, the busiest
//! tenants), all handed to it in an [`AdminState`].

pub mod auth;
mod browse;
mod control;
mod keys;
mod lookup;
mod moves;
mod overview;
mod page;

pub use auth::AdminToken;
pub use control::{ControlDb, ControlError};

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::fairness::Fairness;
use crate::fairness::advice::Advice;
use crate::fairness::busiest::BusiestReport;
use crate::jobs::worker::JobCounts;
use crate::search::reindexer::IndexStates;
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::TenantId;
use crate::web::InstanceName;
use crate::web::error::ApiError;
use crate::web::extract::{ApiPath, ApiQuery};
use crate::web::openapi::TenantIdSchema;

/// What the admin page reads: every shard and the control database, and the figures the
/// other features keep in this process. Cheap to clone.
#[derive(Clone)]
pub struct AdminState(Arc<Sources>);

/// The parts of an [`AdminState`], as the app's assembly hands them over.
pub struct Sources {
    pub token: AdminToken,
    pub shards: Shards,
    pub cross: CrossShard,
    pub control: ControlDb,
    /// Bound on one shard's probe.
    pub shard_timeout: std::time::Duration,
    pub expected_shard_migrations: Arc<BTreeSet<String>>,
    pub index: Arc<IndexStates>,
    pub jobs: Arc<JobCounts>,
    pub fairness: Fairness,
    pub instance: InstanceName,
}

impl AdminState {
    pub fn new(sources: Sources) -> Self {
        Self(Arc::new(sources))
    }
}

impl std::ops::Deref for AdminState {
    type Target = Sources;
    fn deref(&self) -> &Sources {
        &self.0
    }
}

impl FromRef<AdminState> for CrossShard {
    fn from_ref(state: &AdminState) -> CrossShard {
        state.cross.clone()
    }
}

/// The tag of the admin JSON API in the API document.
pub const TAG: &str = "admin";

/// The `code`s the admin's own answers carry, besides the framework's.
pub const CODES: &[&str] = &["invalid_cursor", "invalid_limit", "unauthorized"];

/// The admin page (its forms are pages, not API) and the JSON API, each API route mounted
/// with its description; not yet behind the token (see [`router`]).
pub fn routes() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .route("/admin", get(page::show))
        .route("/admin/pin", post(page::pin))
        .route("/admin/unpin", post(page::unpin))
        .route("/admin/keys/create", post(keys::form_create))
        .route("/admin/keys/revoke", post(keys::form_revoke))
        .routes(routes!(api_shards))
        .routes(routes!(api_slots))
        .routes(routes!(api_bookmarks))
        .routes(routes!(api_tenant))
        .routes(routes!(keys::api_list, keys::api_create))
        .routes(routes!(keys::api_revoke))
        .routes(routes!(api_pins))
        .routes(routes!(api_moves))
        .routes(routes!(api_busiest))
}

/// The admin page and its JSON API, behind the token, with their own state.
pub fn router<S>(state: AdminState) -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    let token = state.token.clone();
    routes()
        .route_layer(axum::middleware::from_fn_with_state(token, auth::require))
        .with_state(state)
}

/// A tenant id typed by an operator; the error names the field.
fn tenant_param(raw: &str) -> Result<TenantId, ApiError> {
    TenantId::parse(raw.trim()).map_err(|e| ApiError::BadRequest {
        code: "invalid_tenant",
        message: format!("tenant: {e}"),
    })
}

/// Every shard's servers, pools, replica lag and search backlog.
#[utoipa::path(
    get,
    path = "/admin/api/shards",
    tag = TAG,
    responses((status = 200, description = "Every shard's card; a shard that did not answer in time is reported, not left out.", body = ShardsView))
)]
async fn api_shards(State(state): State<AdminState>, cross: CrossShard) -> Response {
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
async fn api_slots(State(state): State<AdminState>) -> Response {
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
async fn api_bookmarks(
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
async fn api_tenant(
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
async fn api_pins(State(state): State<AdminState>) -> Result<Response, ApiError> {
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
async fn api_busiest(State(state): State<AdminState>) -> Response {
    let (report, advice) = busiest(&state);
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

fn busiest(state: &AdminState) -> (BusiestReport, Vec<Advice>) {
    let set = state.shards.set();
    let names: Vec<&str> = set.iter().map(|s| s.name()).collect();
    state.fairness.report(&names)
}

/// Recent tenant moves and where each stands.
#[utoipa::path(
    get,
    path = "/admin/api/moves",
    tag = TAG,
    responses((status = 200, description = "The most recent moves and where each stands.", body = MovesView))
)]
async fn api_moves(State(state): State<AdminState>) -> Result<Response, ApiError> {
    match moves::recent(&state, None).await {
        Ok(moves) => Ok(Json(MovesView { moves }).into_response()),
        Err(_) => Err(ApiError::ControlUnavailable),
    }
}
