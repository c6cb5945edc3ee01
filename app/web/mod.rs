//! The HTTP layer: state, extractors, the error mapping, health, metrics and the router
//! with its middleware stack.

pub mod access_log;
pub mod csrf;
pub mod error;
pub mod extract;
pub mod health;
pub mod metrics;
pub mod state;

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::bookmarks;
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
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::fairness::guard,
        ));
    let routes = app
        .merge(tenant_routes)
        .route("/api/stats", get(bookmarks::stats::stats))
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/actuator/health", get(health::ready))
        .route("/metrics", get(metrics::prometheus))
        .route("/actuator/metrics", get(metrics::actuator))
        .fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(axum::middleware::from_fn(metrics::track))
        .with_state(state);
    let stack = ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(axum::middleware::from_fn(access_log::access_log))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("x-served-by"),
            served_by,
        ))
        .layer(axum::middleware::from_fn_with_state(
            request_timeout,
            json_fallbacks,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .service(routes);
    HttpService::new(stack)
}

/// Bounds every request by `request_timeout` and gives the two answers the framework would
/// otherwise send with an empty body, a timeout and a wrong method, the API's JSON error
/// format (keeping the `Allow` header of a 405).
async fn json_fallbacks(
    State(request_timeout): State<Duration>,
    req: axum::extract::Request,
    next: Next,
) -> Response {
    // Cheap clones (a standard method is a constant, a URI shares its buffer): the text is
    // only built for the rare answers below, not on every request.
    let method = req.method().clone();
    let uri = req.uri().clone();
    let response = match tokio::time::timeout(request_timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(%method, path = uri.path(), "request timed out");
            return error::ApiError::RequestTimeout(request_timeout).into_response();
        }
    };
    if response.status() != StatusCode::METHOD_NOT_ALLOWED
        || response.headers().contains_key(header::CONTENT_TYPE)
    {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let mut json = error::ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
    .into_response();
    if let Some(allow) = allow {
        json.headers_mut().insert(header::ALLOW, allow);
    }
    json
}
