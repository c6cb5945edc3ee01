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

use crate::configuration::secret::Secret;
use crate::web::error::{ApiError, Reply};
use crate::web::failed_credentials::FailedCredentials;

/// How hard a token must be to guess: at least this many bits, by [`estimated_bits`].
pub const MIN_TOKEN_BITS: f64 = 128.0;
/// Fewest different characters a token may have: a long run of a few characters is a
/// pattern, not a random token, whatever its length.
const MIN_DISTINCT_CHARS: usize = 10;
/// Values that have been published (the repository's old development `.env`, placeholder
/// words): anyone can read them.
const PUBLISHED: [&str; 3] = ["dev-admin-token-change-me", "change-me", "changeme"];

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
    #[error(
        "ADMIN_TOKEN is too easy to guess (about {0} bits; at least 128): use a random one, \
         e.g. ADMIN_TOKEN=$(openssl rand -hex 32), or ADMIN_TOKEN=generated for the one the \
         control database holds"
    )]
    Weak(u32),
    #[error(
        "ADMIN_TOKEN repeats a few characters ({0} different ones; a random token has at \
         least 10): use a random one, e.g. ADMIN_TOKEN=$(openssl rand -hex 32)"
    )]
    Repetitive(usize),
    #[error("ADMIN_TOKEN is a published value that anyone can read: use a random one")]
    Published,
    #[error("ADMIN_TOKEN must not contain whitespace or control characters")]
    BadCharacters,
}

/// An upper bound on how many bits of randomness `raw` holds: its length times the bits of
/// an alphabet made of every character class it uses. A word or a pattern holds far less,
/// so a token under the bound is weak for certain; one over it still needs to be random,
/// which is why it is also refused when it repeats a few characters or was published.
pub fn estimated_bits(raw: &str) -> f64 {
    let has = |f: fn(&char) -> bool| raw.chars().any(|c| f(&c));
    let alphabet: u32 = [
        (has(char::is_ascii_lowercase), 26),
        (has(char::is_ascii_uppercase), 26),
        (has(char::is_ascii_digit), 10),
        (has(char::is_ascii_punctuation), 32),
        (has(|c| !c.is_ascii()), 100),
    ]
    .iter()
    .filter(|(present, _)| *present)
    .map(|(_, size)| size)
    .sum();
    raw.chars().count() as f64 * f64::from(alphabet.max(1)).log2()
}

impl AdminToken {
    /// A token for the admin page, refused when it is guessable.
    pub fn parse(raw: &str) -> Result<Self, TokenError> {
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(TokenError::BadCharacters);
        }
        let lower = raw.to_ascii_lowercase();
        if PUBLISHED.iter().any(|p| lower.contains(p)) {
            return Err(TokenError::Published);
        }
        let bits = estimated_bits(raw);
        if bits < MIN_TOKEN_BITS {
            return Err(TokenError::Weak(bits as u32));
        }
        let distinct = raw.chars().collect::<std::collections::BTreeSet<_>>().len();
        if distinct < MIN_DISTINCT_CHARS {
            return Err(TokenError::Repetitive(distinct));
        }
        Ok(Self {
            digest: Sha256::digest(raw.as_bytes()).into(),
        })
    }

    /// `ADMIN_TOKEN` as set: empty leaves the admin page off, `generated` asks for the
    /// control database's, anything else must be a strong token.
    pub fn from_env_value(raw: &str) -> Result<Secret<Self>, TokenError> {
        Secret::from_env_value(raw, Self::parse)
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

    const STRONG: &str = "9f2c4e7a1b3d5f60c8e2a4b6d8f01357";

    #[test]
    fn a_token_matches_only_itself() {
        let t = AdminToken::parse(STRONG).unwrap();
        assert!(t.matches(STRONG));
        assert!(!t.matches(&STRONG[1..]));
        assert!(!t.matches(""));
    }

    #[test]
    fn random_tokens_of_128_bits_or_more_are_accepted() {
        // `openssl rand -hex 16`, `-hex 32`, `-base64 24`, and what the control migration
        // generates (64 hex digits).
        for t in [
            STRONG,
            "0d9e55c1a7f04b2e8c63f91a2b7d4e6f0d9e55c1a7f04b2e8c63f91a2b7d4e6f",
            "q8Zr+1vQ/mX3eT0kLw9uB2nY5sHdJ7cA",
        ] {
            assert!(AdminToken::parse(t).is_ok(), "{t}");
        }
    }

    #[test]
    fn guessable_tokens_are_refused_in_every_mode() {
        assert_eq!(
            AdminToken::parse("short").unwrap_err(),
            TokenError::Weak(23)
        );
        // 16 characters used to pass: about 75 bits.
        assert!(matches!(
            AdminToken::parse("aaaaaaaaaaaaaaaa").unwrap_err(),
            TokenError::Weak(_)
        ));
        assert_eq!(
            AdminToken::parse(&"ab".repeat(40)).unwrap_err(),
            TokenError::Repetitive(2)
        );
        assert_eq!(
            AdminToken::parse("dev-admin-token-change-me").unwrap_err(),
            TokenError::Published
        );
        assert_eq!(
            AdminToken::parse("has a space in the middle").unwrap_err(),
            TokenError::BadCharacters
        );
    }

    #[test]
    fn an_empty_token_means_off_and_generated_means_the_control_databases() {
        assert!(matches!(
            AdminToken::from_env_value("").unwrap(),
            Secret::Unset
        ));
        assert!(matches!(
            AdminToken::from_env_value("generated").unwrap(),
            Secret::Generated
        ));
        assert!(matches!(
            AdminToken::from_env_value(STRONG).unwrap(),
            Secret::Given(_)
        ));
    }
}
