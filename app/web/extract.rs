//! Request extractors: `Tenant`, `ShardedDb`, `ShardedReadDb`, `Shards` and `CrossShard`, and
//! the body/query/path extractors whose rejections are API errors.
//!
//! Handlers name what they need and never compute a slot: the extractor takes the tenant
//! the authentication layer proved and opens its [`TenantSession`] (routing, checkout,
//! moves and failures are the sharding layer's), which tells the request's
//! [`RequestFacts`] the serving shard for the `X-Shard` header, the metrics and the
//! access log.

use axum::extract::{Form, FromRef, FromRequest, FromRequestParts, Json, Path, Query};
use axum::http::request::Parts;
use uuid::Uuid;

use super::authenticate::AuthFailure;
use super::consistency::Brought;
use super::error::ApiError;
use super::request_facts::RequestFacts;
pub use super::request_facts::Tenant;
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
pub use crate::sharding::session::{
    ConnectionMode, Primary, QueryFailure, ReplicaAware, SessionError, TenantSession,
};
use crate::tenancy::auth::{AuthError, Authenticated};

/// Only a tenant the authentication layer proved: a route without that layer has none.
impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        if let Some(t) = parts.extensions.get::<Tenant>() {
            return Ok(t.clone());
        }
        match parts.extensions.get::<AuthFailure>() {
            Some(AuthFailure(e)) => Err(ApiError::Auth(e.clone())),
            None => Err(ApiError::Auth(AuthError::MissingCredentials)),
        }
    }
}

/// What the request proved (its tenant, member and role), for handlers that decide by
/// role; refused like [`Tenant`].
impl<S: Send + Sync> FromRequestParts<S> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Tenant::from_request_parts(parts, state).await?;
        parts
            .extensions
            .get::<Authenticated>()
            .cloned()
            .ok_or(ApiError::Auth(AuthError::MissingCredentials))
    }
}

/// The request tenant's session with its shard, on the primary: every write, and reads
/// that must show the tenant's own latest writes. The extractor routes it; a connection is
/// checked out when the first statement runs (so a request refused for its body or its
/// parameters never holds one); see [`TenantSession`] for what a statement's failure
/// turns into.
pub type ShardedDb = TenantSession<Primary>;
/// The shard's replica when it is ready, else per `replica_fallback`. Replicas lag: use
/// [`ShardedDb`] for anything that must show the tenant's own latest writes.
pub type ShardedReadDb = TenantSession<ReplicaAware>;

/// A session's own work error as the API answers it. Database errors never arrive here:
/// the session has classified them into [`ShardError`]s.
pub trait WorkError {
    fn into_api(self) -> ApiError;
}

impl WorkError for diesel::result::Error {
    fn into_api(self) -> ApiError {
        ApiError::Internal(self.into())
    }
}

impl<E: WorkError> From<SessionError<E>> for ApiError {
    fn from(e: SessionError<E>) -> Self {
        match e {
            SessionError::Shard(e) => ApiError::Shard(e),
            SessionError::Work(e) => e.into_api(),
        }
    }
}

impl<M, S> FromRequestParts<S> for TenantSession<M>
where
    M: ConnectionMode,
    S: Send + Sync,
    Shards: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Tenant(tenant) = Tenant::from_request_parts(parts, state).await?;
        let after = parts.extensions.get::<Brought>().and_then(|b| b.0.clone());
        let observer = parts
            .extensions
            .get::<RequestFacts>()
            .map(RequestFacts::observer);
        Ok(Shards::from_ref(state)
            .session(tenant.as_str(), observer, after)
            .await?)
    }
}

impl<S> FromRequestParts<S> for Shards
where
    S: Send + Sync,
    Shards: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Shards::from_ref(state))
    }
}

/// Tenant-free, read-only access to every shard, each part bounded by the shard timeout.
impl<S> FromRequestParts<S> for CrossShard
where
    S: Send + Sync,
    CrossShard: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(CrossShard::from_ref(state))
    }
}

/// `Json` whose rejections are API errors (JSON bodies, never plain text).
#[derive(FromRequest)]
#[from_request(via(Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// What a client is told of text holding a NUL character, which Postgres text cannot store.
pub const NUL_MESSAGE: &str = "must not contain a NUL character";

/// Refuses a query parameter's text that holds a NUL, by name, before it reaches a database.
pub fn refuse_nul(name: &str, value: Option<&str>) -> Result<(), ApiError> {
    match value {
        Some(v) if v.contains('\0') => Err(ApiError::BadRequest {
            code: "invalid_query",
            message: format!("{name} {NUL_MESSAGE}"),
        }),
        _ => Ok(()),
    }
}

/// A query flag: `true` or `false`, and blank as not given (an HTML form's empty choice).
/// Exactly these three, as [`QueryFlag`] documents them.
pub fn blank_or_bool<'de, D>(deserializer: D) -> Result<Option<bool>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    match Option::<String>::deserialize(deserializer)?.as_deref() {
        None | Some("") => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected true or false, not {other:?}"
        ))),
    }
}

/// A query flag's schema in the API document (`#[param(value_type = Option<QueryFlag>,
/// inline)]`): `true`, `false`, or blank for not given.
pub struct QueryFlag;

impl utoipa::PartialSchema for QueryFlag {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["true", "false", ""]))
            .into()
    }
}

impl utoipa::ToSchema for QueryFlag {}

/// A query parameter that should have held a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAUuid;

/// A UUID query parameter as the API document states it: the hyphenated form, or blank for
/// not given (an HTML form's empty field). `None` when blank.
pub fn blank_or_uuid(raw: Option<&str>) -> Result<Option<Uuid>, NotAUuid> {
    match raw {
        None | Some("") => Ok(None),
        // 36 characters: only the hyphenated form, not the braced, URN or bare-hex ones.
        Some(text) if text.len() == 36 => Uuid::try_parse(text).map(Some).map_err(|_| NotAUuid),
        Some(_) => Err(NotAUuid),
    }
}

/// The pattern of a UUID query parameter that may be blank (see [`blank_or_uuid`]).
pub const BLANK_OR_UUID: &str =
    "^([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})?$";

/// `Query` whose rejections are API errors.
#[derive(FromRequestParts)]
#[from_request(via(Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `Path` whose rejections are API errors (a malformed path is simply not found).
#[derive(FromRequestParts)]
#[from_request(via(Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `Form` whose rejections are API errors.
#[derive(FromRequest)]
#[from_request(via(Form), rejection(ApiError))]
pub struct UiForm<T>(pub T);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_parameter_takes_the_hyphenated_form_or_blank_and_nothing_else() {
        let id = "0190a000-0000-7000-8000-00000000000a";
        assert_eq!(blank_or_uuid(None), Ok(None));
        assert_eq!(blank_or_uuid(Some("")), Ok(None));
        assert_eq!(
            blank_or_uuid(Some(id)),
            Ok(Some(Uuid::parse_str(id).unwrap()))
        );
        assert_eq!(
            blank_or_uuid(Some(&id.to_uppercase())),
            Ok(Some(Uuid::parse_str(id).unwrap()))
        );
        for refused in [
            " ",
            "0190a00000007000800000000000000a",
            "{0190a000-0000-7000-8000-00000000000a}",
            "urn:uuid:0190a000-0000-7000-8000-00000000000a",
            " 0190a000-0000-7000-8000-00000000000a",
            "0190a000-0000-7000-8000-00000000000g",
        ] {
            assert_eq!(blank_or_uuid(Some(refused)), Err(NotAUuid), "{refused:?}");
        }
    }
}
