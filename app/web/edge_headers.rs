//! The headers every answer carries to keep a browser from misusing it: no sniffing a
//! type, no framing, no referrer beyond this site, a content security policy, and
//! `Cache-Control: no-store` unless a route says it may be cached, since most answers hold
//! a tenant's data or a secret (a new API key on the admin page).

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderName, HeaderValue};
use tower_http::set_header::SetResponseHeaderLayer;

/// The pages need no script and nothing from elsewhere. Styles may be inline: the pages
/// keep their small stylesheets in `<style>` and the admin page colours each shard's card.
pub const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Swagger UI's page starts itself with one inline script; it gets that and no more than
/// the pages otherwise.
pub const DOCS_POLICY: &str = "default-src 'self'; script-src 'self' 'unsafe-inline'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

type Set = SetResponseHeaderLayer<HeaderValue>;

/// The headers every answer gets, each with whether a route's own value is kept.
pub fn every_answer() -> [(HeaderName, &'static str, bool); 5] {
    [
        (X_CONTENT_TYPE_OPTIONS, "nosniff", false),
        (X_FRAME_OPTIONS, "DENY", false),
        (REFERRER_POLICY, "same-origin", false),
        (CONTENT_SECURITY_POLICY, PAGE_POLICY, true),
        (CACHE_CONTROL, "no-store", true),
    ]
}

/// One of [`every_answer`] as a layer.
pub fn layer((name, value, keep_own): (HeaderName, &'static str, bool)) -> Set {
    let value = HeaderValue::from_static(value);
    if keep_own {
        Set::if_not_present(name, value)
    } else {
        Set::overriding(name, value)
    }
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
