//! The HTTP layer: state, extractors, the error mapping, health, metrics and the router
//! with its middleware stack.

pub mod csrf;
pub mod error;
pub mod extract;
pub mod health;
pub mod metrics;
pub mod state;

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
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
    app.merge(tenant_routes)
        .route("/api/stats", get(bookmarks::stats::stats))
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/actuator/health", get(health::ready))
        .route("/metrics", get(metrics::prometheus))
        .route("/actuator/metrics", get(metrics::actuator))
        .fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(axum::middleware::from_fn(metrics::track))
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            request_timeout,
            json_fallbacks,
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
