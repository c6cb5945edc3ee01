//! The operator's admin page (`/admin`) and its JSON twins (`/admin/api/*`): every shard at
//! a glance, the slot map, a browse across shards, tenant lookup and placement.
//!
//! Mounted only when `ADMIN_TOKEN` is set, behind [`auth::require`]. Reads go through
//! [`CrossShard`] (read-only, bounded, and honest about which shards answered); the only
//! write is placement, through the same `Placer` rules as `bookmarks pin`.

pub mod auth;
mod browse;
mod lookup;
mod moves;
mod overview;
mod page;

pub use auth::AdminToken;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use diesel::QueryResult;
use diesel_async::AsyncPgConnection;
use futures::future::BoxFuture;
use serde_json::json;

use crate::fairness::advice::Advice;
use crate::fairness::busiest::Report;
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::TenantId;
use crate::web::error::ApiError;
use crate::web::extract::{ApiPath, ApiQuery};
use crate::web::state::AppState;

pub fn routes(token: AdminToken) -> Router<AppState> {
    Router::new()
        .route("/admin", get(page::show))
        .route("/admin/pin", post(page::pin))
        .route("/admin/unpin", post(page::unpin))
        .route("/admin/api/shards", get(api_shards))
        .route("/admin/api/slots", get(api_slots))
        .route("/admin/api/bookmarks", get(api_bookmarks))
        .route("/admin/api/tenants/{key}", get(api_tenant))
        .route("/admin/api/pins", get(api_pins))
        .route("/admin/api/moves", get(api_moves))
        .route("/admin/api/busiest", get(api_busiest))
        .route_layer(axum::middleware::from_fn_with_state(token, auth::require))
}

/// Runs `work` on a control-database connection, bounded by the shard timeout. The error
/// is what the page may show (a kind of failure); the cause is logged with `what`.
async fn on_control<T>(
    state: &AppState,
    what: &str,
    work: impl for<'c> FnOnce(&'c mut AsyncPgConnection) -> BoxFuture<'c, QueryResult<T>>,
) -> Result<T, String> {
    let attempt = async {
        let mut conn = state.control.get().await.map_err(|e| e.to_string())?;
        work(&mut conn).await.map_err(|e| e.to_string())
    };
    match tokio::time::timeout(state.shard_timeout, attempt).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(cause)) => {
            tracing::warn!(error = %cause, "admin: cannot {what}");
            Err("unreachable".to_owned())
        }
        Err(_) => Err(format!(
            "no answer within {} ms",
            state.shard_timeout.as_millis()
        )),
    }
}

/// A tenant id typed by an operator; the error names the field.
fn tenant_param(raw: &str) -> Result<TenantId, ApiError> {
    TenantId::parse(raw.trim()).map_err(|e| ApiError::BadRequest {
        code: "invalid_tenant",
        message: format!("tenant: {e}"),
    })
}

async fn api_shards(State(state): State<AppState>, cross: CrossShard) -> Response {
    let (cards, facts) = overview::shard_cards(&state, &cross).await;
    Json(json!({ "shards": cards, "coverage": facts.coverage() })).into_response()
}

async fn api_slots(State(state): State<AppState>) -> Response {
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
    State(state): State<AppState>,
    cross: CrossShard,
    ApiPath(key): ApiPath<String>,
) -> Result<Response, ApiError> {
    let tenant = tenant_param(&key)?;
    Ok(Json(lookup::report(&state, &cross, &tenant).await).into_response())
}

async fn api_pins(State(state): State<AppState>) -> Result<Response, ApiError> {
    match overview::pins(&state).await {
        (pins, None) => Ok(Json(json!({ "pins": pins })).into_response()),
        (_, Some(_)) => Err(ApiError::ControlUnavailable),
    }
}

/// This replica's busiest tenants and the placement advice drawn from them.
async fn api_busiest(State(state): State<AppState>) -> Response {
    let (report, advice) = busiest(&state);
    Json(json!({
        "instance": state.instance_name,
        "max_in_flight_per_tenant": state.fairness.bulkhead.limit(),
        "window_seconds": report.window_seconds,
        "tenants": report.tenants,
        "shards": report.shards,
        "advice": advice,
    }))
    .into_response()
}

fn busiest(state: &AppState) -> (Report, Vec<Advice>) {
    let set = state.shards.set();
    let names: Vec<&str> = set.iter().map(|s| s.name()).collect();
    state.fairness.report(&names)
}

async fn api_moves(State(state): State<AppState>) -> Result<Response, ApiError> {
    match moves::recent(&state, None).await {
        Ok(moves) => Ok(Json(json!({ "moves": moves })).into_response()),
        Err(_) => Err(ApiError::ControlUnavailable),
    }
}
