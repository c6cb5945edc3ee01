//! Who may see the admin page: whoever presents `ADMIN_TOKEN`, as the password of HTTP
//! Basic (browsers: their own prompt, any user name) or as a Bearer token (scripts).
//! Both sides are hashed before comparing, and the digests compared in constant time, so
//! neither the token's bytes nor its length can be learnt from response timing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_extra::headers::authorization::{Basic, Bearer};
use axum_extra::headers::{Authorization, HeaderMapExt};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::web::error::{ApiError, Reply};
use crate::web::failed_credentials::FailedCredentials;

/// Shortest token accepted: anything shorter is guessable over the network.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The admin token, kept only as its digest.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("ADMIN_TOKEN is {0} characters long; use at least {MIN_TOKEN_CHARS}")]
    TooShort(usize),
    #[error("ADMIN_TOKEN must not contain whitespace or control characters")]
    BadCharacters,
}

impl AdminToken {
    /// `None` for an empty value (the admin page stays off); an error for a weak one.
    pub fn from_env_value(raw: &str) -> Result<Option<Self>, TokenError> {
        if raw.is_empty() {
            return Ok(None);
        }
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(TokenError::BadCharacters);
        }
        let chars = raw.chars().count();
        if chars < MIN_TOKEN_CHARS {
            return Err(TokenError::TooShort(chars));
        }
        Ok(Some(Self {
            digest: Sha256::digest(raw.as_bytes()).into(),
        }))
    }

    pub fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        presented.ct_eq(&self.digest).into()
    }

    /// Whether `headers` present this token (Basic password or Bearer).
    pub fn presented_in(&self, headers: &axum::http::HeaderMap) -> bool {
        presented(headers).is_some_and(|p| self.matches(&p))
    }
}

/// The token a request presents: the password of HTTP Basic, or a Bearer token.
fn presented(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .typed_get::<Authorization<Basic>>()
        .map(|a| a.password().to_owned())
        .or_else(|| {
            headers
                .typed_get::<Authorization<Bearer>>()
                .map(|a| a.token().to_owned())
        })
}

/// What the admin routes' door holds: the token, and the limit wrong tokens count against.
#[derive(Clone)]
pub struct Door {
    pub token: AdminToken,
    pub failed_credentials: Arc<FailedCredentials>,
}

/// Middleware: lets a request through only with the token; 401 (with the header that
/// makes browsers prompt) otherwise, and 429 to an address that has failed too many
/// credential checks this minute. Without a configured token the routes are not even
/// mounted.
pub async fn require(State(door): State<Door>, req: Request, next: Next) -> Response {
    let Some(presented) = presented(req.headers()) else {
        return unauthorized();
    };
    let limit = &door.failed_credentials;
    if let Err(refused) = limit.check(req.headers(), req.extensions()) {
        return ApiError::from(refused).into_response();
    }
    if door.token.matches(&presented) {
        return next.run(req).await;
    }
    tracing::warn!(path = %req.uri().path(), "admin: wrong credentials");
    limit.failed(req.headers(), req.extensions());
    unauthorized()
}

/// 401, with the header that makes browsers show their own login prompt (any user name,
/// the token as password).
fn unauthorized() -> Response {
    Reply::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this page needs the admin token",
    )
    .header(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"bookmarks admin\", charset=\"UTF-8\""),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_itself() {
        let t = AdminToken::from_env_value("correct-horse-battery")
            .unwrap()
            .unwrap();
        assert!(t.matches("correct-horse-battery"));
        assert!(!t.matches("correct-horse-batter"));
        assert!(!t.matches(""));
    }

    #[test]
    fn weak_or_blank_tokens_are_refused_or_mean_off() {
        assert!(AdminToken::from_env_value("").unwrap().is_none());
        assert_eq!(
            AdminToken::from_env_value("short").unwrap_err(),
            TokenError::TooShort(5)
        );
        assert_eq!(
            AdminToken::from_env_value("has a space in the middle").unwrap_err(),
            TokenError::BadCharacters
        );
    }
}
