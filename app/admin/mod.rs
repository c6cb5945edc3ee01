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

use axum::Router;
use axum::extract::{FromRef, State};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde_json::json;

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

/// The admin page and its JSON API, behind the token, with their own state.
pub fn router<S>(state: AdminState) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let token = state.token.clone();
    Router::new()
        .route("/admin", get(page::show))
        .route("/admin/pin", post(page::pin))
        .route("/admin/unpin", post(page::unpin))
        .route("/admin/keys/create", post(keys::form_create))
        .route("/admin/keys/revoke", post(keys::form_revoke))
        .route("/admin/api/shards", get(api_shards))
        .route("/admin/api/slots", get(api_slots))
        .route("/admin/api/bookmarks", get(api_bookmarks))
        .route("/admin/api/tenants/{key}", get(api_tenant))
        .route(
            "/admin/api/tenants/{key}/keys",
            get(keys::api_list).post(keys::api_create),
        )
        .route(
            "/admin/api/keys/{id}",
            axum::routing::delete(keys::api_revoke),
        )
        .route("/admin/api/pins", get(api_pins))
        .route("/admin/api/moves", get(api_moves))
        .route("/admin/api/busiest", get(api_busiest))
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

async fn api_shards(State(state): State<AdminState>, cross: CrossShard) -> Response {
    let (cards, facts) = overview::shard_cards(&state, &cross).await;
    Json(json!({ "shards": cards, "coverage": facts.coverage() })).into_response()
}

async fn api_slots(State(state): State<AdminState>) -> Response {
    let set = state.shards.set();
    let shards: Vec<_> = set
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "name": s.name(),
                "colour": overview::colour(i),
                "slot_count": s.spec().slot_count(),
                "ranges": s.spec().slots.iter().map(|r| [r.start(), r.end()]).collect::<Vec<_>>(),
            })
        })
        .collect();
    let (pins, control_error) = overview::pins(&state).await;
    Json(json!({
        "slot_count": crate::sharding::SLOT_COUNT,
        "shards": shards,
        "placed": pins,
        "directory_error": control_error,
    }))
    .into_response()
}

async fn api_bookmarks(
    cross: CrossShard,
    ApiQuery(params): ApiQuery<browse::BrowseParams>,
) -> Result<Response, ApiError> {
    let request = params.parse()?;
    Ok(Json(browse::page(&cross, &request).await).into_response())
}

async fn api_tenant(
    State(state): State<AdminState>,
    cross: CrossShard,
    ApiPath(key): ApiPath<String>,
) -> Result<Response, ApiError> {
    let tenant = tenant_param(&key)?;
    Ok(Json(lookup::report(&state, &cross, &tenant).await).into_response())
}

async fn api_pins(State(state): State<AdminState>) -> Result<Response, ApiError> {
    match overview::pins(&state).await {
        (pins, None) => Ok(Json(json!({ "pins": pins })).into_response()),
        (_, Some(_)) => Err(ApiError::ControlUnavailable),
    }
}

/// This replica's busiest tenants and the placement advice drawn from them.
async fn api_busiest(State(state): State<AdminState>) -> Response {
    let (report, advice) = busiest(&state);
    Json(json!({
        "instance": state.instance.as_str(),
        "max_in_flight_per_tenant": state.fairness.limit(),
        "window_seconds": report.window_seconds,
        "tenants": report.tenants,
        "shards": report.shards,
        "advice": advice,
    }))
    .into_response()
}

fn busiest(state: &AdminState) -> (BusiestReport, Vec<Advice>) {
    let set = state.shards.set();
    let names: Vec<&str> = set.iter().map(|s| s.name()).collect();
    state.fairness.report(&names)
}

async fn api_moves(State(state): State<AdminState>) -> Result<Response, ApiError> {
    match moves::recent(&state, None).await {
        Ok(moves) => Ok(Json(json!({ "moves": moves })).into_response()),
        Err(_) => Err(ApiError::ControlUnavailable),
    }
}
