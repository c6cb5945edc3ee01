//! The HTTP layer: state, extractors, the error mapping, health, metrics and the router
//! with its middleware stack.

pub mod access_log;
pub mod around;
pub mod csrf;
pub mod error;
pub mod extract;
pub mod fallbacks;
pub mod health;
pub mod metrics;
pub mod request_id;
pub mod state;

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Request};
use axum::response::Response;
use axum::routing::get;
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::bookmarks;
use around::AroundLayer;
use state::AppState;

/// Largest accepted request body. A bookmark at every limit is about 13 KiB of JSON.
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What the server serves: the router behind the middleware every request passes.
pub type HttpService = BoxCloneSyncService<Request<Body>, Response, Infallible>;

/// The whole application: the router with its middleware.
///
/// Only what needs the matched route (the metrics' route label, the tenant's bulkhead) is
/// layered onto the router, which wraps each route separately; the rest wraps the router
/// once. Per-route layering clones every layer's service for every request, and the full
/// stack applied per route cost about 10 % of a request's CPU in clones and allocations.
/// Our layers on the request path are [`around::Around`]s, not `middleware::from_fn`.
pub fn router(state: AppState, request_timeout: Duration) -> HttpService {
    let served_by = HeaderValue::from_str(&state.instance_name)
        .unwrap_or_else(|_| HeaderValue::from_static("invalid-instance-name"));
    let mut app = Router::new();
    if let Some(token) = state.admin_token.clone() {
        app = app.merge(crate::admin::routes(token));
    }
    // The tenant's own routes pass its bulkhead; admin, health and metrics do not.
    let tenant_routes = bookmarks::api::routes()
        .merge(bookmarks::ui::routes())
        .route_layer(AroundLayer(crate::fairness::Guard::new(state.clone())));
    let routes = app
        .merge(tenant_routes)
        .route("/api/stats", get(bookmarks::stats::stats))
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/actuator/health", get(health::ready))
        .route("/metrics", get(metrics::prometheus))
        .route("/actuator/metrics", get(metrics::actuator))
        .fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(AroundLayer(metrics::Track))
        .with_state(state);
    let stack = ServiceBuilder::new()
        .layer(AroundLayer(request_id::RequestIds))
        .layer(AroundLayer(access_log::AccessLog))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("x-served-by"),
            served_by,
        ))
        .layer(AroundLayer(fallbacks::JsonFallbacks { request_timeout }))
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .service(routes);
    HttpService::new(stack)
}
