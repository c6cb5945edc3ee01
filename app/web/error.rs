//! `ApiError`: the one place where every layer's errors become HTTP responses.
//!
//! Clients get `{"error":{"code":…,"message":…}}` with a status that says whose fault it is.
//! Internal causes (database messages, pool errors) are never sent: they ride on the
//! response as a [`Cause`] and the access log writes them on the request's own line.

use axum::Json;
use axum::extract::rejection::{FormRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::bookmarks::model::FieldError;
use crate::sharding::RouteError;
use crate::sharding::access::ShardError;
use crate::tenancy::TenantError;
use crate::web::access_log::Cause;

/// What a 503 tells clients to wait: about one connect timeout, after which a shard or the
/// control database that came back is being used again.
const RETRY_AFTER_SECONDS: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Tenant(#[from] TenantError),
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    NotFound(&'static str),
    #[error("this tenant already has a bookmark for that URL")]
    DuplicateUrl { existing: Uuid },
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the request must be sent as {0}")]
    UnsupportedMediaType(&'static str),
    #[error("the form was not submitted from this site")]
    CrossSite,
    #[error("this page needs the admin token")]
    Unauthorized,
    #[error("the control database is unreachable; try again later")]
    ControlUnavailable,
    #[error("{path} does not accept {method}")]
    MethodNotAllowed { method: String, path: String },
    #[error("this tenant already has {limit} requests in progress on this server")]
    TenantBusy { limit: u32 },
    #[error("the request took longer than {} ms and was abandoned", .0.as_millis())]
    RequestTimeout(std::time::Duration),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Tenant(_) | ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::DuplicateUrl { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::CrossSite => StatusCode::FORBIDDEN,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::ControlUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RequestTimeout(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TenantBusy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Shard(e) => match e {
                ShardError::Unavailable { .. }
                | ShardError::ReplicaUnavailable { .. }
                | ShardError::Timeout { .. }
                | ShardError::CircuitOpen { .. }
                | ShardError::WriteOutcomeUnknown { .. }
                | ShardError::Route(_)
                | ShardError::TenantMoving { .. }
                | ShardError::TenantMoved { .. } => StatusCode::SERVICE_UNAVAILABLE,
                ShardError::UnknownShard(_) => StatusCode::NOT_FOUND,
                ShardError::Query { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            },
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON error object (also used by the HTML pages to show a message).
    pub fn body(&self) -> Value {
        let (code, message, extra) = match self {
            ApiError::Tenant(TenantError::Missing { .. }) => {
                ("missing_tenant", self.to_string(), json!({}))
            }
            ApiError::Tenant(TenantError::Invalid { .. }) => {
                ("invalid_tenant", self.to_string(), json!({}))
            }
            ApiError::Validation(fields) => (
                "validation_failed",
                fields
                    .iter()
                    .map(|f| f.message.clone())
                    .collect::<Vec<_>>()
                    .join("; "),
                json!({ "fields": fields }),
            ),
            ApiError::BadRequest { code, message } => (*code, message.clone(), json!({})),
            ApiError::NotFound(_) => ("not_found", self.to_string(), json!({})),
            ApiError::DuplicateUrl { existing } => {
                ("duplicate_url", self.to_string(), json!({ "id": existing }))
            }
            ApiError::PayloadTooLarge { .. } => ("payload_too_large", self.to_string(), json!({})),
            ApiError::UnsupportedMediaType(_) => {
                ("unsupported_media_type", self.to_string(), json!({}))
            }
            ApiError::CrossSite => ("cross_site_request", self.to_string(), json!({})),
            ApiError::Unauthorized => ("unauthorized", self.to_string(), json!({})),
            ApiError::ControlUnavailable => (
                "control_unavailable",
                self.to_string(),
                json!({ "database": "control" }),
            ),
            ApiError::MethodNotAllowed { .. } => {
                ("method_not_allowed", self.to_string(), json!({}))
            }
            ApiError::RequestTimeout(_) => ("request_timeout", self.to_string(), json!({})),
            ApiError::TenantBusy { limit } => (
                "tenant_busy",
                format!(
                    "{self}; nothing was done, retry after Retry-After seconds (at most {limit} \
                     requests of one tenant run at once, so that its shard's other tenants \
                     are served too)"
                ),
                json!({ "limit": limit }),
            ),
            ApiError::Shard(e) => match e {
                ShardError::ReplicaUnavailable { shard } => (
                    "replica_unavailable",
                    format!("the read replica of shard {shard} is not ready; try again later"),
                    json!({ "shard": shard }),
                ),
                ShardError::UnknownShard(name) => (
                    "unknown_shard",
                    format!("no shard is named {name:?}"),
                    json!({}),
                ),
                ShardError::Query { .. } => ("internal", "internal error".to_owned(), json!({})),
                ShardError::Route(RouteError::DirectoryUnavailable { .. }) => (
                    "directory_unavailable",
                    "the tenant directory on the control database is unreachable and this \
                     tenant's placement is not cached; try again later"
                        .to_owned(),
                    json!({ "database": "control" }),
                ),
                ShardError::Route(RouteError::UnknownShard { shard }) => (
                    "directory_unknown_shard",
                    format!(
                        "the tenant directory places this tenant on shard {shard:?}, which is \
                         not configured; an operator must fix the directory row"
                    ),
                    json!({ "shard": shard }),
                ),
                ShardError::TenantMoving { .. } => (
                    "tenant_moving",
                    "this tenant is being moved to another shard and its writes are paused \
                     for a moment; nothing was written, retry after Retry-After seconds"
                        .to_owned(),
                    json!({}),
                ),
                ShardError::TenantMoved { to, .. } => (
                    "tenant_moved",
                    format!(
                        "this tenant has just moved to shard {to}; nothing was written, retry \
                         after Retry-After seconds"
                    ),
                    json!({ "shard": to }),
                ),
                ShardError::WriteOutcomeUnknown { shard } => (
                    "write_outcome_unknown",
                    format!(
                        "shard {shard} stopped answering after the write was sent, so it may or \
                         may not have been applied; retry the same request after Retry-After \
                         seconds (a repeated create answers 409 with the existing id)"
                    ),
                    json!({ "shard": shard }),
                ),
                ShardError::CircuitOpen { shard, role } => (
                    "shard_unavailable",
                    format!("shard {shard} is unavailable; try again later"),
                    json!({ "shard": shard, "circuit": "open", "server": role }),
                ),
                ShardError::Unavailable { shard, .. } | ShardError::Timeout { shard, .. } => (
                    "shard_unavailable",
                    format!("shard {shard} is unavailable; try again later"),
                    json!({ "shard": shard }),
                ),
            },
            ApiError::Internal(_) => ("internal", "internal error".to_owned(), json!({})),
        };
        let mut error = json!({ "code": code, "message": message });
        if let (Some(obj), Value::Object(more)) = (error.as_object_mut(), extra) {
            obj.extend(more);
        }
        json!({ "error": error })
    }

    /// Seconds a client should wait before retrying, for answers that say "not now".
    pub fn retry_after(&self) -> Option<u32> {
        match self {
            // A move's fence lasts well under a second; a moved tenant's next request
            // routes to its new shard.
            ApiError::Shard(ShardError::TenantMoving { .. } | ShardError::TenantMoved { .. }) => {
                Some(1)
            }
            // A tenant's requests in progress usually finish within milliseconds.
            ApiError::TenantBusy { .. } => Some(1),
            _ => (self.status() == StatusCode::SERVICE_UNAVAILABLE).then_some(RETRY_AFTER_SECONDS),
        }
    }

    /// What the client will not see, for the log.
    pub fn cause(&self) -> Option<Cause> {
        use tracing::Level;
        let (level, what, detail) = match self {
            // The whole chain of causes, on one line.
            ApiError::Internal(e) => (Level::ERROR, "internal error", format!("{e:#}")),
            ApiError::Shard(e @ ShardError::Query { .. }) => {
                (Level::ERROR, "query failed", format!("{e:?}"))
            }
            ApiError::Shard(
                e @ (ShardError::TenantMoving { .. } | ShardError::TenantMoved { .. }),
            ) => (Level::INFO, "write refused by a tenant move", e.to_string()),
            ApiError::Shard(e) => (Level::WARN, "shard unavailable", e.to_string()),
            ApiError::RequestTimeout(_) => (Level::WARN, "request timed out", self.to_string()),
            _ => return None,
        };
        Some(Cause {
            level,
            what,
            detail,
        })
    }

    pub fn from_json_rejection(r: JsonRejection) -> Self {
        match r {
            JsonRejection::MissingJsonContentType(_) => {
                ApiError::UnsupportedMediaType("application/json")
            }
            JsonRejection::BytesRejection(_) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge {
                    limit: super::BODY_LIMIT_BYTES,
                }
            }
            JsonRejection::JsonSyntaxError(_) => ApiError::BadRequest {
                code: "malformed_json",
                message: r.body_text(),
            },
            _ => ApiError::BadRequest {
                code: "invalid_body",
                message: r.body_text(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        if let Some(cause) = self.cause() {
            response.extensions_mut().insert(cause);
        }
        if let Some(seconds) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let ApiError::Unauthorized = self {
            // Makes browsers show their own login prompt: any user name, the token as password.
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"bookmarks admin\", charset=\"UTF-8\""),
            );
        }
        response
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        ApiError::from_json_rejection(r)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::BadRequest {
            code: "invalid_query",
            message: r.body_text(),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(_: PathRejection) -> Self {
        ApiError::NotFound("no bookmark has that id")
    }
}

impl From<FormRejection> for ApiError {
    fn from(r: FormRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::PayloadTooLarge {
                limit: super::BODY_LIMIT_BYTES,
            };
        }
        ApiError::BadRequest {
            code: "invalid_form",
            message: r.body_text(),
        }
    }
}
