//! Double-submit CSRF protection for the HTML forms (tenant UI and admin page): every form
//! carries a token that must match a same-site cookie, so another site cannot post forms
//! on a user's behalf (the browser would send its cookies and Basic credentials along).

use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use rand::RngCore;

use super::error::ApiError;

const CSRF_COOKIE: &str = "csrf";

/// The CSRF token from the cookie, minted (and set) when the browser has none yet.
pub fn token(jar: CookieJar) -> (CookieJar, String) {
    if let Some(c) = jar.get(CSRF_COOKIE) {
        let token = c.value().to_owned();
        return (jar, token);
    }
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let cookie = Cookie::build((CSRF_COOKIE, token.clone()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .build();
    (jar.add(cookie), token)
}

/// Refuses a form whose token does not match the cookie's.
pub fn check(jar: &CookieJar, submitted: &str) -> Result<(), ApiError> {
    match jar.get(CSRF_COOKIE) {
        Some(c) if !submitted.is_empty() && c.value() == submitted => Ok(()),
        _ => Err(ApiError::CrossSite),
    }
}
