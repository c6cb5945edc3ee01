//! Who may act as a tenant: the proof a request carries, checked before anything reaches a
//! shard.
//!
//! With `[tenancy] auth = "api_key"` (the default) a request acts for a tenant only with one
//! of its keys, `Authorization: Bearer bks_…`, or from a browser signed in with one (the
//! session cookie). The tenant header, when sent, must then name the key's own tenant: it
//! stays the routing key that nginx logs, but it proves nothing. With `trusted_header` the
//! header alone decides, which is right only behind a gateway that authenticates every
//! request, removes any tenant header a client sent and sets its own.

use std::sync::Arc;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use uuid::Uuid;

use super::api_key::{ApiKey, KeyDigest, KeyFormatError};
use super::key_store::{KeyCheck, KeyStore};
use super::members::Role;
use super::session::{SessionError, Sessions};
use super::{CURRENT_TENANT, ShardKeyOverride, TenantError, TenantHeader, TenantId};
use crate::configuration::AuthMode;

/// Why a request may not act as a tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("this request needs a tenant API key: send `Authorization: Bearer <key>`")]
    MissingCredentials,
    #[error("the Authorization header must be `Bearer <key>`")]
    MalformedAuthorization,
    #[error("that is not an API key: {0}")]
    KeyFormat(KeyFormatError),
    #[error("the API key is unknown or revoked")]
    InvalidKey,
    #[error("{0}")]
    Session(SessionError),
    #[error("the session has ended (signed out, or its key revoked); sign in again")]
    SessionRevoked,
    #[error("the {header} header names another tenant than the API key's")]
    TenantMismatch { header: String },
    #[error(
        "the control database is unreachable and this key is not known here yet; try again later"
    )]
    Unavailable,
    #[error("a {role} may not do this: the key's member needs the {needs} role")]
    ForbiddenRole { role: Role, needs: Role },
    #[error(transparent)]
    Tenant(#[from] TenantError),
}

impl AuthError {
    /// The proof is missing or does not hold (rather than: cannot be checked now, or the
    /// tenant header is malformed): a browser should sign in again.
    pub fn is_missing_or_wrong(&self) -> bool {
        !matches!(
            self,
            AuthError::Unavailable | AuthError::Tenant(_) | AuthError::ForbiddenRole { .. }
        )
    }

    /// The request presented credentials that do not hold: what a guesser gets, and what
    /// the failed credential limit counts. An expired or revoked session is not a guess (a
    /// session cannot be made without the server's secret), nor is a missing one.
    pub fn is_failed_check(&self) -> bool {
        matches!(
            self,
            AuthError::KeyFormat(_)
                | AuthError::InvalidKey
                | AuthError::Session(SessionError::Forged)
        )
    }
}

/// What a request proved: the tenant, the key that proved it and the member it acts for
/// (none in `trusted_header` mode, for background work and for trusted overrides, which act
/// with every right), and the role it acts with.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub tenant: TenantId,
    pub key: Option<KeyDigest>,
    pub member: Option<ActingMember>,
    pub role: Role,
}

/// The member a key acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActingMember {
    pub id: Uuid,
    pub name: String,
}

impl Authenticated {
    /// Refuses unless the request acts with at least `needs`.
    pub fn require(&self, needs: Role) -> Result<(), AuthError> {
        if self.role >= needs {
            Ok(())
        } else {
            Err(AuthError::ForbiddenRole {
                role: self.role,
                needs,
            })
        }
    }
}

/// Checks a request's credentials; one per process, shared by the request path.
pub struct Authenticator {
    mode: AuthMode,
    header: TenantHeader,
    keys: Arc<KeyStore>,
    sessions: Sessions,
}

impl Authenticator {
    pub fn new(
        mode: AuthMode,
        header: TenantHeader,
        keys: Arc<KeyStore>,
        sessions: Sessions,
    ) -> Self {
        Self {
            mode,
            header,
            keys,
            sessions,
        }
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    pub fn keys(&self) -> &Arc<KeyStore> {
        &self.keys
    }

    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Whether the request presents a credential to check (a key or a session cookie), as
    /// opposed to none at all.
    pub fn presents_credentials(&self, parts: &Parts) -> bool {
        parts.headers.contains_key(AUTHORIZATION) || self.sessions.presented(&parts.headers)
    }

    /// Which tenant the request may act as, and by what proof. Costs no shard round trip:
    /// at most a control database lookup for a key this process has not seen.
    pub async fn authenticate(&self, parts: &Parts) -> Result<Authenticated, AuthError> {
        // Set by the server's own code, never by a client.
        if let Some(ShardKeyOverride(tenant)) = parts.extensions.get::<ShardKeyOverride>() {
            return Ok(trusted(tenant.clone()));
        }
        if let Ok(tenant) = CURRENT_TENANT.try_with(Clone::clone) {
            return Ok(trusted(tenant));
        }
        match self.mode {
            AuthMode::TrustedHeader => super::from_header(parts, self.header.as_str())
                .map(trusted)
                .map_err(Into::into),
            AuthMode::ApiKey => self.by_credentials(parts).await,
        }
    }

    async fn by_credentials(&self, parts: &Parts) -> Result<Authenticated, AuthError> {
        let (digest, session) = match parts.headers.get(AUTHORIZATION).map(bearer) {
            Some(Ok(key)) => {
                let key = ApiKey::parse(key).map_err(AuthError::KeyFormat)?;
                (key.digest(), None)
            }
            // A browser that signed in to the admin page sends its Basic credentials to
            // the whole origin: a session cookie, when there is one, is the tenant's proof.
            Some(Err(not_bearer)) => match self.sessions.read(&parts.headers) {
                Ok(Some(claim)) => (claim.digest, Some(claim)),
                _ => return Err(not_bearer),
            },
            None => match self.sessions.read(&parts.headers) {
                Ok(Some(claim)) => (claim.digest, Some(claim)),
                Ok(None) => return Err(AuthError::MissingCredentials),
                Err(e) => return Err(AuthError::Session(e)),
            },
        };
        let credential = match self.keys.check_digest(&digest).await {
            KeyCheck::Valid(known) => known.credential.clone(),
            KeyCheck::Revoked | KeyCheck::Unknown if session.is_some() => {
                return Err(AuthError::SessionRevoked);
            }
            KeyCheck::Revoked | KeyCheck::Unknown => return Err(AuthError::InvalidKey),
            KeyCheck::Unavailable => return Err(AuthError::Unavailable),
        };
        let tenant = credential.tenant;
        // A session for a key that has since been given to another tenant, or one signed
        // out since (its key's generation moved on).
        if session
            .is_some_and(|s| s.tenant != tenant || s.generation < credential.session_generation)
        {
            return Err(AuthError::SessionRevoked);
        }
        if let Some(named) = super::named_in_header(parts, self.header.as_str())?
            && named != tenant
        {
            return Err(AuthError::TenantMismatch {
                header: self.header.as_str().to_owned(),
            });
        }
        Ok(Authenticated {
            tenant,
            key: Some(digest),
            member: Some(ActingMember {
                id: credential.member,
                name: credential.member_name,
            }),
            role: credential.role,
        })
    }
}

fn trusted(tenant: TenantId) -> Authenticated {
    Authenticated {
        tenant,
        key: None,
        member: None,
        role: Role::Admin,
    }
}

/// The key in `Authorization: Bearer <key>`.
fn bearer(value: &axum::http::HeaderValue) -> Result<&str, AuthError> {
    let text = value
        .to_str()
        .map_err(|_| AuthError::MalformedAuthorization)?;
    let (scheme, key) = text
        .split_once(' ')
        .ok_or(AuthError::MalformedAuthorization)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::MalformedAuthorization);
    }
    let key = key.trim();
    if key.is_empty() {
        return Err(AuthError::MalformedAuthorization);
    }
    Ok(key)
}
