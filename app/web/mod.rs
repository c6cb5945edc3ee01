//! The HTTP layer, and only infrastructure: extractors, the error type and its HTTP
//! mapping, the access log, request ids, metrics, health, the JSON fallbacks and the layer
//! stack every request passes. It knows no feature: the features build their routes on
//! it, and `startup` assembles them.

pub mod access_log;
pub mod around;
pub mod authenticate;
pub mod csrf;
pub mod drain;
pub mod error;
pub mod extract;
pub mod fallbacks;
pub mod health;
pub mod in_flight;
pub mod metrics;
pub mod openapi;
pub mod request_id;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Request};
use axum::response::Response;
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;
use tower_http::set_header::SetResponseHeaderLayer;

use around::AroundLayer;
use drain::Draining;

/// Largest accepted request body. A bookmark at every limit is about 13 KiB of JSON.
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What the server serves: the router behind the middleware every request passes.
pub type HttpService = BoxCloneSyncService<Request<Body>, Response, Infallible>;

/// This process's name: `X-Served-By`, health and metrics say which replica answered.
#[derive(Clone, Debug)]
pub struct InstanceName(Arc<str>);

impl InstanceName {
    pub fn new(name: &str) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Wraps the application's routes in the layers every request passes.
///
/// Only what needs the matched route (the metrics' route label) is layered onto the
/// router, which wraps each route separately; the rest wraps the router once. Per-route
/// layering clones every layer's service for every request, and the full stack applied per
/// route cost about 10 % of a request's CPU in clones and allocations. Our layers on the
/// request path are [`around::Around`]s, not `middleware::from_fn`.
pub fn serve(
    routes: Router,
    instance: &InstanceName,
    request_timeout: Duration,
    max_in_flight: usize,
    draining: &Draining,
) -> HttpService {
    let draining = draining.clone();
    let served_by = HeaderValue::from_str(instance.as_str())
        .unwrap_or_else(|_| HeaderValue::from_static("invalid-instance-name"));
    let routes = routes
        .fallback(|| async { error::ApiError::NotFound("no such route") })
        .layer(AroundLayer(metrics::Track));
    let stack = ServiceBuilder::new()
        .layer(AroundLayer(request_id::RequestIds))
        .layer(AroundLayer(access_log::AccessLog))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("x-served-by"),
            served_by,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            axum::http::header::CONNECTION,
            move |_: &Response| draining.connection_header(),
        ))
        .layer(AroundLayer(in_flight::InFlightLimit::new(max_in_flight)))
        .layer(AroundLayer(fallbacks::JsonFallbacks { request_timeout }))
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .service(routes);
    HttpService::new(stack)
}
