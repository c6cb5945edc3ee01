//! Signed-in browsers: the HTML UI's session cookie.
//!
//! Signing in with a tenant and one of its API keys sets a cookie holding the tenant, the
//! key's digest, an expiry and the key's session generation, signed (HMAC-SHA256) with the
//! session secret, so a browser can neither forge nor change one. HttpOnly (no script reads
//! it), SameSite=Strict (no other site's page sends it), `Secure` when the site is served
//! over TLS. Every request checks the key again through the key store, so revoking the key,
//! disabling its member or signing out (which moves the key's generation on) ends its
//! sessions on every replica as soon as the key table's notification reaches it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use axum_extra::extract::cookie::{Cookie, CookieJar, Key, SameSite, SignedCookieJar};

use super::TenantId;
use super::api_key::KeyDigest;

const COOKIE: &str = "session";
/// The shortest session secret accepted: HMAC keys shorter than its output are weaker.
pub const MIN_SECRET_BYTES: usize = 32;

/// How sessions are signed and how long they last.
#[derive(Clone)]
pub struct Sessions {
    key: Key,
    ttl: Duration,
    secure: bool,
}

/// What a valid session cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionClaim {
    pub tenant: TenantId,
    pub digest: KeyDigest,
    /// The key's session generation at sign-in.
    pub generation: i32,
}

/// Why a session cookie does not sign anyone in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the session cookie is not one this service signed")]
    Forged,
    #[error("the session has expired; sign in again")]
    Expired,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the session secret is {0} bytes long; use at least {MIN_SECRET_BYTES}")]
pub struct SecretTooShort(pub usize);

impl Sessions {
    /// Sessions signed with a key derived from `secret`.
    pub fn new(secret: &[u8], ttl: Duration, secure: bool) -> Result<Self, SecretTooShort> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SecretTooShort(secret.len()));
        }
        Ok(Self {
            key: Key::derive_from(secret),
            ttl,
            secure,
        })
    }

    /// Sessions signed with a random key of this process's own: they work only on this
    /// process and end with it.
    pub fn ephemeral(ttl: Duration, secure: bool) -> Self {
        Self {
            key: Key::generate(),
            ttl,
            secure,
        }
    }

    /// Signs `tenant` in with the key whose digest this is, at the key's current session
    /// generation (signing out moves it on): the cookie to set.
    pub fn start(&self, tenant: &TenantId, digest: &KeyDigest, generation: i32) -> SignedCookieJar {
        let expires = unix_now() + self.ttl.as_secs();
        let value = format!("{tenant}:{}:{expires}:{generation}", digest.to_hex());
        let cookie = Cookie::build((COOKIE, value))
            .path("/")
            .http_only(true)
            .secure(self.secure)
            .same_site(SameSite::Strict)
            .max_age(cookie_duration(self.ttl))
            .build();
        SignedCookieJar::new(self.key.clone()).add(cookie)
    }

    /// Signs the browser out.
    pub fn end(&self, jar: CookieJar) -> CookieJar {
        jar.remove(Cookie::build(COOKIE).path("/"))
    }

    /// Whether the request carries a session cookie at all, valid or not.
    pub fn presented(&self, headers: &HeaderMap) -> bool {
        CookieJar::from_headers(headers).get(COOKIE).is_some()
    }

    /// The session the browser presents: `None` when it presents none.
    pub fn read(&self, headers: &HeaderMap) -> Result<Option<SessionClaim>, SessionError> {
        let Some(cookie) = CookieJar::from_headers(headers).get(COOKIE).cloned() else {
            return Ok(None);
        };
        let cookie = SignedCookieJar::new(self.key.clone())
            .verify(cookie)
            .ok_or(SessionError::Forged)?;
        let mut parts = cookie.value().splitn(4, ':');
        let (Some(tenant), Some(digest), Some(expires)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(SessionError::Forged);
        };
        // Signed before sessions had generations: valid, but of no generation that can be
        // checked, so the browser signs in again.
        let Some(generation) = parts.next() else {
            return Err(SessionError::Expired);
        };
        let generation: i32 = generation.parse().map_err(|_| SessionError::Forged)?;
        let tenant = TenantId::parse(tenant).map_err(|_| SessionError::Forged)?;
        let digest = KeyDigest::from_hex(digest).ok_or(SessionError::Forged)?;
        let expires: u64 = expires.parse().map_err(|_| SessionError::Forged)?;
        if expires <= unix_now() {
            return Err(SessionError::Expired);
        }
        Ok(Some(SessionClaim {
            tenant,
            digest,
            generation,
        }))
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn cookie_duration(d: Duration) -> cookie::time::Duration {
    cookie::time::Duration::seconds(d.as_secs().min(i64::MAX as u64) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenancy::api_key::ApiKey;

    fn sessions(ttl: Duration) -> Sessions {
        Sessions::new(&[7u8; 32], ttl, false).unwrap()
    }

    /// The request headers a browser sends back after `set` (each cookie's name=value).
    fn sent_back(set: impl axum::response::IntoResponse) -> HeaderMap {
        let response = set.into_response();
        let mut headers = HeaderMap::new();
        let pairs: Vec<String> = response
            .headers()
            .get_all(axum::http::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_owned))
            .filter(|pair| !pair.ends_with('='))
            .collect();
        if !pairs.is_empty() {
            headers.insert(
                axum::http::header::COOKIE,
                pairs.join("; ").parse().unwrap(),
            );
        }
        headers
    }

    fn raw(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::header::COOKIE,
            format!("{COOKIE}={value}").parse().unwrap(),
        );
        headers
    }

    #[test]
    fn a_session_reads_back_as_the_tenant_and_key_it_was_started_for() {
        let s = sessions(Duration::from_secs(60));
        let tenant = TenantId::parse("acme-corp").unwrap();
        let digest = ApiKey::generate().digest();
        let headers = sent_back(s.start(&tenant, &digest, 7));
        let claim = SessionClaim {
            tenant,
            digest,
            generation: 7,
        };
        assert_eq!(s.read(&headers), Ok(Some(claim)));
        assert_eq!(s.read(&HeaderMap::new()), Ok(None));
        let ended = sent_back(s.end(CookieJar::from_headers(&headers)));
        assert_eq!(s.read(&ended), Ok(None));
    }

    #[test]
    fn a_cookie_changed_or_signed_by_another_secret_is_forged() {
        let s = sessions(Duration::from_secs(60));
        let tenant = TenantId::parse("acme-corp").unwrap();
        let headers = sent_back(s.start(&tenant, &ApiKey::generate().digest(), 0));
        let other = Sessions::new(&[8u8; 32], Duration::from_secs(60), false).unwrap();
        assert_eq!(other.read(&headers), Err(SessionError::Forged));
        let value = CookieJar::from_headers(&headers)
            .get(COOKIE)
            .unwrap()
            .value()
            .to_owned();
        assert!(value.contains("acme-corp"));
        assert_eq!(
            s.read(&raw(&value.replace("acme-corp", "hooli"))),
            Err(SessionError::Forged)
        );
        assert_eq!(
            s.read(&raw("acme-corp:00:99999999999")),
            Err(SessionError::Forged)
        );
        let unsigned = format!("{value}0");
        assert_eq!(s.read(&raw(&unsigned)), Err(SessionError::Forged));
    }

    #[test]
    fn an_expired_session_signs_nobody_in() {
        let s = sessions(Duration::ZERO);
        let tenant = TenantId::parse("acme-corp").unwrap();
        let headers = sent_back(s.start(&tenant, &ApiKey::generate().digest(), 0));
        assert_eq!(s.read(&headers), Err(SessionError::Expired));
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(
            Sessions::new(b"short", Duration::from_secs(1), false).err(),
            Some(SecretTooShort(5))
        );
    }
}
