//! The HTTP layer, and only infrastructure: extractors, the error type and its HTTP
//! mapping, the access log, request ids, metrics, health, the JSON fallbacks and the layer
//! stack every request passes. It knows no feature: the features build their routes on
//! it, and `startup` assembles them.

pub mod access_log;
pub mod around;
pub mod assets;
pub mod authenticate;
pub mod client_address;
pub mod consistency;
pub mod csrf;
pub mod drain;
pub mod edge_headers;
pub mod error;
pub mod extract;
pub mod failed_credentials;
pub mod fallbacks;
pub mod health;
pub mod in_flight;
pub mod metrics;
pub mod openapi;
pub mod request_facts;
pub mod request_id;
pub mod stack;
pub mod timestamp;
pub mod tls_only;

use std::sync::Arc;

use axum::http::HeaderName;

pub use stack::{HttpService, serve};

/// Largest accepted request body. A bookmark at every limit is about 13 KiB of JSON.
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

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
