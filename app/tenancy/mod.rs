//! Tenants: the `TenantId` type, how a request names its tenant, and what proves it may
//! act as that tenant ([`auth`]: API keys and signed-in browsers).
//!
//! Naming order: a [`ShardKeyOverride`] request extension (set by trusted middleware or
//! admin tooling), then the [`CURRENT_TENANT`] task-local (background jobs), then the
//! configured header. Naming is not proof: with `auth = "api_key"` the key decides, and
//! the header must agree with it.

pub mod api_key;
pub mod auth;
pub mod key_store;
pub mod keys;
pub mod members;
pub mod session;

use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;

/// Longest tenant id, in characters.
pub const MAX_TENANT_ID_CHARS: usize = 64;
const MAX_LEN: usize = MAX_TENANT_ID_CHARS;

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

/// Finds the tenant a request names, in the documented order (this proves nothing: see
/// [`auth`]).
pub fn resolve(parts: &Parts, header: &str) -> Result<TenantId, TenantError> {
    if let Some(ShardKeyOverride(tenant)) = parts.extensions.get::<ShardKeyOverride>() {
        return Ok(tenant.clone());
    }
    if let Ok(tenant) = CURRENT_TENANT.try_with(Clone::clone) {
        return Ok(tenant);
    }
    from_header(parts, header)
}

/// The tenant the header names; missing is an error.
pub fn from_header(parts: &Parts, header: &str) -> Result<TenantId, TenantError> {
    named_in_header(parts, header)?.ok_or_else(|| TenantError::Missing {
        header: header.to_owned(),
    })
}

/// The tenant the header names, if the request sends the header.
pub fn named_in_header(parts: &Parts, header: &str) -> Result<Option<TenantId>, TenantError> {
    let Some(value) = parts.headers.get(header) else {
        return Ok(None);
    };
    let invalid = |reason| TenantError::Invalid {
        header: header.to_owned(),
        reason,
    };
    let text = value
        .to_str()
        .map_err(|_| invalid(TenantIdError::BadCharacter('\u{fffd}')))?;
    TenantId::parse(text).map(Some).map_err(invalid)
}
