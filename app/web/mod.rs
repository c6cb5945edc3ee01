//! The HTTP layer: state, extractors, the error mapping, health, metrics and the router
//! with its middleware stack.

pub mod error;
pub mod extract;
pub mod health;
pub mod metrics;
pub mod state;

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode};
use axum::routing::get;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

use crate::bookmarks;
use state::AppState;

/// Largest accepted request body. A bookmark at every limit is about 13 KiB of JSON.
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The whole application router with its middleware.
pub fn router(state: AppState, request_timeout: Duration) -> Router {
    let served_by = HeaderValue::from_str(&state.instance_name)
        .unwrap_or_else(|_| HeaderValue::from_static("invalid-instance-name"));
    Router::new()
        .merge(bookmarks::api::routes())
        .merge(bookmarks::ui::routes())
        .route("/api/stats", get(bookmarks::stats::stats))
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/actuator/health", get(health::ready))
        .route("/metrics", get(metrics::prometheus))
        .route("/actuator/metrics", get(metrics::actuator))
        .fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("x-served-by"),
            served_by,
        ))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http()
                // One INFO line per response, carrying the span's tenant and shard.
                .on_response(DefaultOnResponse::new().level(tracing::Level::INFO))
                .make_span_with(|req: &Request<_>| {
                    let id = req
                        .headers()
                        .get(REQUEST_ID)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-");
                    tracing::info_span!(
                        "request",
                        method = %req.method(),
                        path = %req.uri().path(),
                        request_id = %id,
                        tenant = tracing::field::Empty,
                        shard = tracing::field::Empty,
                    )
                }),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .with_state(state)
}
