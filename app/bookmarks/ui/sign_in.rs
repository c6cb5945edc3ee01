//! Signing a browser in with a tenant and one of its API keys, and out again everywhere: the
//! signed session cookie this sets is what the authentication layer reads
//! (`tenancy::session`).

use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::header::RETRY_AFTER;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use serde::Deserialize;

use super::forms::CsrfForm;
use crate::tenancy::TenantId;
use crate::tenancy::api_key::ApiKey;
use crate::tenancy::auth::Authenticator;
use crate::tenancy::key_store::KeyCheck;
use crate::web::csrf;
use crate::web::error::ApiError;
use crate::web::extract::UiForm;
use crate::web::failed_credentials::FailedCredentials;

#[derive(Template, WebTemplate)]
#[template(path = "signin.html")]
struct SignInPage {
    csrf: String,
    tenant: String,
    error: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    csrf: String,
}

pub(super) fn sign_in_page(
    jar: CookieJar,
    tenant: String,
    error: Option<String>,
    status: StatusCode,
) -> Response {
    let (jar, csrf) = csrf::token(jar);
    (
        status,
        jar,
        SignInPage {
            csrf,
            tenant,
            error,
        },
    )
        .into_response()
}

pub(super) async fn form(jar: CookieJar) -> Response {
    sign_in_page(jar, String::new(), None, StatusCode::OK)
}

/// Checks the tenant and key, and on success signs the browser in. A refused sign-in is a
/// 422 with the form again, not a 401: this is no HTTP authentication scheme, and a browser
/// that gets a 401 forgets the Basic credentials it holds for the origin (the admin page's).
/// A refused key counts against the client's address (429 with the form once it has
/// failed too often this minute).
pub(super) async fn sign_in(
    State(auth): State<Arc<Authenticator>>,
    State(limit): State<Arc<FailedCredentials>>,
    headers: HeaderMap,
    extensions: Extensions,
    jar: CookieJar,
    UiForm(form): UiForm<SignInForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    if let Err(refused) = limit.check(&headers, &extensions) {
        let why = ApiError::from(refused).to_string();
        let mut page = sign_in_page(
            jar,
            form.tenant.clone(),
            Some(why),
            StatusCode::TOO_MANY_REQUESTS,
        );
        page.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(refused.retry_after));
        return Ok(page);
    }
    let refused = |jar, why: &str, status| {
        Ok(sign_in_page(
            jar,
            form.tenant.clone(),
            Some(why.to_owned()),
            status,
        ))
    };
    let tenant = match TenantId::parse(form.tenant.trim()) {
        Ok(tenant) => tenant,
        Err(e) => return refused(jar, &format!("tenant: {e}"), StatusCode::BAD_REQUEST),
    };
    let key = match ApiKey::parse(form.key.trim()) {
        Ok(key) => key,
        Err(e) => {
            limit.failed(&headers, &extensions);
            return refused(jar, &format!("key: {e}"), StatusCode::UNPROCESSABLE_ENTITY);
        }
    };
    match auth.keys().check(&key).await {
        KeyCheck::Valid(known) if known.credential.tenant == tenant => {
            let generation = known.credential.session_generation;
            let session = auth.sessions().start(&tenant, &key.digest(), generation);
            Ok((session, Redirect::to("/")).into_response())
        }
        KeyCheck::Unavailable => refused(
            jar,
            "the control database is unreachable, so the key cannot be checked; try again later",
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        // One answer for every mismatch, so the form does not tell which part was wrong.
        _ => {
            limit.failed(&headers, &extensions);
            refused(
                jar,
                "that key does not sign in as that tenant (or it has been revoked)",
                StatusCode::UNPROCESSABLE_ENTITY,
            )
        }
    }
}

pub(super) async fn sign_out(
    State(auth): State<Arc<Authenticator>>,
    headers: HeaderMap,
    jar: CookieJar,
    UiForm(form): UiForm<CsrfForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    // Ends the session everywhere, not only in this browser: a copy of the cookie is
    // refused on every replica from the key table's notification on. Signing out ends
    // every session of the key (one generation per key).
    if let Ok(Some(claim)) = auth.sessions().read(&headers) {
        auth.keys().end_sessions(&claim.digest).await.map_err(|e| {
            tracing::warn!(error = %e, "sign-out: cannot end the session on the control database");
            ApiError::ControlUnavailable
        })?;
    }
    Ok((auth.sessions().end(jar), Redirect::to("/signin")).into_response())
}
