//! Tenants: the `TenantId` type and how a request names its tenant.
//!
//! Resolution order: a [`ShardKeyOverride`] request extension (set by trusted middleware
//! or admin tooling), then the [`CURRENT_TENANT`] task-local (background jobs), then the
//! configured header, then the UI's tenant cookie (browsers cannot set headers). The header
//! wins over the cookie so API clients are never surprised by a stale browser choice.

use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;
use axum_extra::extract::CookieJar;

/// The cookie the HTML UI keeps the chosen tenant in.
pub const TENANT_COOKIE: &str = "tenant";
const MAX_LEN: usize = 64;

tokio::task_local! {
    /// The tenant of the current unit of background work, for code outside a request.
    pub static CURRENT_TENANT: TenantId;
}

/// A tenant id: 1–64 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
///
/// Shared text: a request hands its tenant to the extractors, the bulkhead and the logs,
/// and a clone must not allocate each time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(Arc<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantIdError {
    #[error("the tenant id is empty")]
    Empty,
    #[error("the tenant id is longer than {MAX_LEN} characters")]
    TooLong,
    #[error("the tenant id must start with a letter or digit")]
    BadStart,
    #[error("the tenant id may only contain letters, digits, '.', '_' and '-' (found {0:?})")]
    BadCharacter(char),
}

impl TenantId {
    pub fn parse(raw: &str) -> Result<Self, TenantIdError> {
        let first = raw.chars().next().ok_or(TenantIdError::Empty)?;
        if raw.chars().count() > MAX_LEN {
            return Err(TenantIdError::TooLong);
        }
        if !first.is_ascii_alphanumeric() {
            return Err(TenantIdError::BadStart);
        }
        if let Some(bad) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(TenantIdError::BadCharacter(bad));
        }
        Ok(Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for TenantId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The header that names a request's tenant (`[tenancy] header`), as handlers' state holds it.
#[derive(Clone, Debug)]
pub struct TenantHeader(Arc<str>);

impl TenantHeader {
    pub fn new(name: &str) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Forces the routing key of one request (e.g. an admin tool acting for a tenant).
#[derive(Clone, Debug)]
pub struct ShardKeyOverride(pub TenantId);

/// Why a request has no usable tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    #[error("the {header} header is required")]
    Missing { header: String },
    #[error("the {header} header is not valid: {reason}")]
    Invalid {
        header: String,
        reason: TenantIdError,
    },
}

/// Finds the request's tenant, in the documented order.
pub fn resolve(parts: &Parts, header: &str) -> Result<TenantId, TenantError> {
    if let Some(ShardKeyOverride(tenant)) = parts.extensions.get::<ShardKeyOverride>() {
        return Ok(tenant.clone());
    }
    if let Ok(tenant) = CURRENT_TENANT.try_with(Clone::clone) {
        return Ok(tenant);
    }
    let invalid = |reason| TenantError::Invalid {
        header: header.to_owned(),
        reason,
    };
    if let Some(value) = parts.headers.get(header) {
        let text = value
            .to_str()
            .map_err(|_| invalid(TenantIdError::BadCharacter('\u{fffd}')))?;
        return TenantId::parse(text).map_err(invalid);
    }
    let jar = CookieJar::from_headers(&parts.headers);
    if let Some(tenant) = jar
        .get(TENANT_COOKIE)
        .and_then(|c| TenantId::parse(c.value()).ok())
    {
        return Ok(tenant);
    }
    Err(TenantError::Missing {
        header: header.to_owned(),
    })
}
