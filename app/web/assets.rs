//! The pages' stylesheets, served by the app itself so that the content security policy
//! can forbid inline styles (`style-src 'self'`). They change only with a build, so a
//! browser may keep them for an hour.

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::routing::get;

const SITE: &str = include_str!("../templates/site.css");
const ADMIN: &str = include_str!("../templates/admin.css");

/// `/assets/site.css` (the tenant pages) and `/assets/admin.css` (the admin page); public,
/// like any stylesheet.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/assets/site.css", get(|| async { stylesheet(SITE) }))
        .route("/assets/admin.css", get(|| async { stylesheet(ADMIN) }))
}

fn stylesheet(css: &'static str) -> impl axum::response::IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "public, max-age=3600"),
        ],
        css,
    )
}
