//! `ApiError`: the one place where errors become HTTP responses.
//!
//! Clients get `{"error":{"code":…,"message":…}}` with a status that says whose fault it is.
//! Internal causes (database messages, pool errors) are never sent: they ride on the
//! response as a [`Cause`] and the access log writes them on the request's own line.
//!
//! Everything an answer says comes from one [`Reply`], built by one match in
//! [`ApiError::reply`]. The errors this layer knows are the framework's own (tenancy, shards,
//! bodies, timeouts); a feature describes its own errors as a `Reply` and converts them with
//! one `From` impl of its own ([`ApiError::Feature`]), so this file does not change when a
//! feature is added.

use axum::Json;
use axum::extract::rejection::{FormRejection, JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tracing::Level;

use super::BODY_LIMIT_BYTES;
use crate::sharding::RouteError;
use crate::sharding::access::ShardError;
use crate::tenancy::TenantError;
use crate::tenancy::auth::AuthError;
use crate::web::access_log::Cause;
use crate::web::failed_credentials::Refused;

/// What a 503 tells clients to wait: about one connect timeout, after which a shard or the
/// control database that came back is being used again.
const RETRY_AFTER_SECONDS: u32 = 2;

/// Every `code` this layer's answers carry (features list their own), for the API document.
pub const CODES: &[&str] = &[
    "auth_unavailable",
    "control_unavailable",
    "cross_site_request",
    "directory_unavailable",
    "directory_unknown_shard",
    "forbidden_role",
    "internal",
    "invalid_api_key",
    "invalid_authorization",
    "invalid_body",
    "invalid_consistency_token",
    "invalid_form",
    "invalid_query",
    "invalid_session",
    "invalid_tenant",
    "malformed_json",
    "method_not_allowed",
    "missing_credentials",
    "missing_tenant",
    "not_found",
    "payload_too_large",
    "replica_unavailable",
    "request_timeout",
    "server_busy",
    "shard_unavailable",
    "tenant_mismatch",
    "tenant_moved",
    "tenant_moving",
    "too_many_failed_credentials",
    "unknown_shard",
    "unsupported_media_type",
    "write_outcome_unknown",
];

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Tenant(#[from] TenantError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    NotFound(&'static str),
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the request must be sent as {0}")]
    UnsupportedMediaType(&'static str),
    #[error("the form was not submitted from this site")]
    CrossSite,
    #[error("the control database is unreachable; try again later")]
    ControlUnavailable,
    #[error("{path} does not accept {method}")]
    MethodNotAllowed { method: String, path: String },
    #[error("the request took longer than {} ms and was abandoned", .0.as_millis())]
    RequestTimeout(std::time::Duration),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error(
        "this address failed {} credential checks within a minute; none is checked from it \
         until Retry-After seconds have passed", .0.per_minute
    )]
    TooManyFailedCredentials(Refused),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
    /// A feature's own error, as the feature describes it.
    #[error("{}", .0.message)]
    Feature(Box<Reply>),
}

/// Everything an error answer says: status, the body's `code`, `message` and extra fields,
/// `Retry-After`, other headers, and the cause the log gets (never the client).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Map<String, Value>,
    pub retry_after: Option<u32>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub cause: Option<Cause>,
}

impl Reply {
    /// A reply with no details; a 503 tells the client to come back in
    /// `RETRY_AFTER_SECONDS` unless [`Reply::retry_after`] says otherwise.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: Map::new(),
            retry_after: (status == StatusCode::SERVICE_UNAVAILABLE).then_some(RETRY_AFTER_SECONDS),
            headers: Vec::new(),
            cause: None,
        }
    }

    /// An extra field of the error object (`"shard"`, `"fields"`, …).
    pub fn detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// What the log says about it: `what` is a short fixed phrase, `detail` the error.
    pub fn cause(mut self, level: Level, what: &'static str, detail: impl Into<String>) -> Self {
        self.cause = Some(Cause {
            level,
            what,
            detail: detail.into(),
        });
        self
    }

    /// The JSON error object.
    pub fn body(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".to_owned(), json!(self.code));
        error.insert("message".to_owned(), json!(self.message));
        error.extend(self.details.clone());
        json!({ "error": error })
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        if let Some(cause) = self.cause {
            response.extensions_mut().insert(cause);
        }
        response
    }
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        ApiError::TooManyFailedCredentials(refused)
    }
}

impl ApiError {
    /// How this error answers: one match for status, code, message, details, `Retry-After`
    /// and cause together.
    pub fn reply(self) -> Reply {
        use StatusCode as S;
        let message = self.to_string();
        match self {
            ApiError::Feature(reply) => *reply,
            ApiError::Tenant(e) | ApiError::Auth(AuthError::Tenant(e)) => tenant_reply(&e),
            ApiError::Auth(e) => auth_reply(e),
            ApiError::BadRequest { code, message } => Reply::new(S::BAD_REQUEST, code, message),
            ApiError::NotFound(_) => Reply::new(S::NOT_FOUND, "not_found", message),
            ApiError::PayloadTooLarge { .. } => {
                Reply::new(S::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            ApiError::UnsupportedMediaType(_) => {
                Reply::new(S::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
            }
            ApiError::CrossSite => Reply::new(S::FORBIDDEN, "cross_site_request", message),
            ApiError::ControlUnavailable => {
                Reply::new(S::SERVICE_UNAVAILABLE, "control_unavailable", message)
                    .detail("database", "control")
            }
            ApiError::MethodNotAllowed { .. } => {
                Reply::new(S::METHOD_NOT_ALLOWED, "method_not_allowed", message)
            }
            ApiError::RequestTimeout(_) => Reply::new(
                S::SERVICE_UNAVAILABLE,
                "request_timeout",
                message.clone(),
            )
            .cause(Level::WARN, "request timed out", message),
            ApiError::Internal(e) => Reply::new(S::INTERNAL_SERVER_ERROR, "internal", message)
                // The whole chain of causes, on one line.
                .cause(Level::ERROR, "internal error", format!("{e:#}")),
            ApiError::Shard(e) => shard_reply(e),
            ApiError::TooManyFailedCredentials(refused) => {
                Reply::new(S::TOO_MANY_REQUESTS, "too_many_failed_credentials", message)
                    .detail("per_minute", refused.per_minute)
                    .retry_after(refused.retry_after)
                    .cause(
                        Level::WARN,
                        "credentials refused unchecked",
                        format!("client {}", refused.client),
                    )
            }
        }
    }

    pub fn from_json_rejection(r: JsonRejection) -> Self {
        match r {
            JsonRejection::MissingJsonContentType(_) => {
                ApiError::UnsupportedMediaType("application/json")
            }
            JsonRejection::BytesRejection(_) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge {
                    limit: BODY_LIMIT_BYTES,
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

fn tenant_reply(e: &TenantError) -> Reply {
    let code = match e {
        TenantError::Missing { .. } => "missing_tenant",
        TenantError::Invalid { .. } => "invalid_tenant",
    };
    Reply::new(StatusCode::BAD_REQUEST, code, e.to_string())
}

/// How a request that may not act as a tenant is answered: 401 with the `WWW-Authenticate`
/// challenge (RFC 6750) when the proof is missing or wrong, 403 when a valid key names
/// another tenant than the header, 503 when the proof cannot be checked now.
fn auth_reply(e: AuthError) -> Reply {
    let challenge =
        |value: &'static str| (header::WWW_AUTHENTICATE, HeaderValue::from_static(value));
    let (status, code, challenge) = match &e {
        AuthError::MissingCredentials => (
            StatusCode::UNAUTHORIZED,
            "missing_credentials",
            Some(challenge("Bearer")),
        ),
        AuthError::MalformedAuthorization => (
            StatusCode::UNAUTHORIZED,
            "invalid_authorization",
            Some(challenge("Bearer error=\"invalid_request\"")),
        ),
        AuthError::KeyFormat(_) | AuthError::InvalidKey => (
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            Some(challenge("Bearer error=\"invalid_token\"")),
        ),
        AuthError::Session(_) | AuthError::SessionRevoked => (
            StatusCode::UNAUTHORIZED,
            "invalid_session",
            Some(challenge("Bearer")),
        ),
        AuthError::TenantMismatch { .. } => (StatusCode::FORBIDDEN, "tenant_mismatch", None),
        AuthError::ForbiddenRole { role, needs } => {
            let message = e.to_string();
            return Reply::new(StatusCode::FORBIDDEN, "forbidden_role", message)
                .detail("role", role.as_str())
                .detail("needs", needs.as_str());
        }
        AuthError::Unavailable => {
            let message = e.to_string();
            return Reply::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "auth_unavailable",
                message.clone(),
            )
            .detail("database", "control")
            .cause(Level::WARN, "API key cannot be checked", message);
        }
        AuthError::Tenant(e) => return tenant_reply(e),
    };
    let reply = Reply::new(status, code, e.to_string());
    match challenge {
        Some((name, value)) => reply.header(name, value),
        None => reply,
    }
}

/// How a shard's failure answers.
fn shard_reply(e: ShardError) -> Reply {
    use StatusCode as S;
    let unavailable = |code, message: String| Reply::new(S::SERVICE_UNAVAILABLE, code, message);
    let detail = e.to_string();
    let reply = match &e {
        ShardError::ReplicaUnavailable { shard } => unavailable(
            "replica_unavailable",
            format!("the read replica of shard {shard} is not ready; try again later"),
        )
        .detail("shard", shard.as_str()),
        ShardError::UnknownShard(name) => Reply::new(
            S::NOT_FOUND,
            "unknown_shard",
            format!("no shard is named {name:?}"),
        ),
        ShardError::Query { .. } => {
            return Reply::new(S::INTERNAL_SERVER_ERROR, "internal", "internal error").cause(
                Level::ERROR,
                "query failed",
                format!("{e:?}"),
            );
        }
        ShardError::Route(RouteError::DirectoryUnavailable { .. }) => unavailable(
            "directory_unavailable",
            "the tenant directory on the control database is unreachable and this tenant's \
             placement is not cached; try again later"
                .to_owned(),
        )
        .detail("database", "control"),
        ShardError::Route(RouteError::UnknownShard { shard }) => unavailable(
            "directory_unknown_shard",
            format!(
                "the tenant directory places this tenant on shard {shard:?}, which is not \
                 configured; an operator must fix the directory row"
            ),
        )
        .detail("shard", shard.as_str()),
        // A move's fence lasts well under a second; a moved tenant's next request routes to
        // its new shard.
        ShardError::TenantMoving { .. } => {
            return unavailable(
                "tenant_moving",
                "this tenant is being moved to another shard and its writes are paused for a \
                 moment; nothing was written, retry after Retry-After seconds"
                    .to_owned(),
            )
            .retry_after(1)
            .cause(Level::INFO, "write refused by a tenant move", detail);
        }
        ShardError::TenantMoved { to, .. } => {
            return unavailable(
                "tenant_moved",
                format!(
                    "this tenant has just moved to shard {to}; nothing was written, retry after \
                     Retry-After seconds"
                ),
            )
            .detail("shard", to.as_str())
            .retry_after(1)
            .cause(Level::INFO, "write refused by a tenant move", detail);
        }
        ShardError::WriteOutcomeUnknown { shard } => unavailable(
            "write_outcome_unknown",
            format!(
                "shard {shard} stopped answering after the write was sent, so it may or may not \
                 have been applied; retry the same request after Retry-After seconds (a \
                 repeated create answers 409 with the existing id)"
            ),
        )
        .detail("shard", shard.as_str()),
        ShardError::CircuitOpen { shard, role } => unavailable(
            "shard_unavailable",
            format!("shard {shard} is unavailable; try again later"),
        )
        .detail("shard", shard.as_str())
        .detail("circuit", "open")
        .detail("server", *role),
        ShardError::Unavailable { shard, .. } | ShardError::Timeout { shard, .. } => unavailable(
            "shard_unavailable",
            format!("shard {shard} is unavailable; try again later"),
        )
        .detail("shard", shard.as_str()),
    };
    reply.cause(Level::WARN, "shard unavailable", detail)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.reply().into_response()
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
        ApiError::NotFound("nothing is at that path")
    }
}

impl From<FormRejection> for ApiError {
    fn from(r: FormRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::PayloadTooLarge {
                limit: BODY_LIMIT_BYTES,
            };
        }
        ApiError::BadRequest {
            code: "invalid_form",
            message: r.body_text(),
        }
    }
}
