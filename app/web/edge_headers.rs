//! The headers every answer carries to keep a browser from misusing it: no sniffing a
//! type, no framing, no referrer beyond this site, a content security policy, and
//! `Cache-Control: no-store` unless a route says it may be cached, since most answers hold
//! a tenant's data or a secret (a new API key on the admin page).

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::Response;
use tower_http::set_header::SetResponseHeaderLayer;

/// A content security policy whose `script-src` and `style-src` are these; everything
/// else is the same for every page.
macro_rules! policy {
    ($script:literal, $style:literal) => {
        concat!(
            "default-src 'self'; script-src ",
            $script,
            "; style-src ",
            $style,
            "; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'"
        )
    };
}

/// The pages need no script, no inline style and nothing from elsewhere: their
/// stylesheets are the app's own (`/assets/*.css`).
pub const PAGE_POLICY: &str = policy!("'self'", "'self'");

/// Swagger UI's page starts itself with one inline script and sets inline styles; it gets
/// those and no more than the pages otherwise.
pub const DOCS_POLICY: &str = policy!("'self' 'unsafe-inline'", "'self' 'unsafe-inline'");

type Set = SetResponseHeaderLayer<HeaderValue>;

/// Gives `response` the headers every answer carries, keeping a route's own policy and
/// caching (the documentation page sets both). One function on the response rather than a
/// layer per header: five layers cost five nested futures on every request.
pub fn stamp(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.reserve(5);
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers
        .entry(CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(PAGE_POLICY));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// The API's documentation page and its assets: Swagger UI's policy, and cacheable, since
/// they change only with a new build.
pub fn docs(router: Router) -> Router {
    router
        .layer(Set::overriding(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(DOCS_POLICY),
        ))
        .layer(Set::overriding(
            CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=3600"),
        ))
}
