//! The admin page's key forms: create a key (shown once, in the page that answers) and
//! revoke one. Each answers with the page again, looking the tenant up.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum_extra::extract::CookieJar;
use serde::Deserialize;

use super::keys::{create, revoke};
use super::page;
use super::state::{AdminState, tenant_param};
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::keys::KeyNote;
use crate::web::csrf;
use crate::web::error::ApiError;
use crate::web::extract::UiForm;

#[derive(Debug, Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    csrf: String,
}

/// The page's "create a key" form: the page again, looking the tenant up, with the new key
/// shown once (not a redirect: a key must never travel in a URL).
pub async fn form_create(
    State(state): State<AdminState>,
    cross: CrossShard,
    jar: CookieJar,
    UiForm(form): UiForm<CreateForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let (status, notice) = match (tenant_param(&form.tenant), KeyNote::parse(&form.note)) {
        (Err(e), _) => (StatusCode::BAD_REQUEST, e.to_string()),
        (_, Err(e)) => (StatusCode::BAD_REQUEST, e.to_string()),
        (Ok(tenant), Ok(note)) => match create(&state, &tenant, note).await {
            Ok((row, key)) => (
                StatusCode::CREATED,
                format!(
                    "Key {} for {tenant}: {} (copy it now: it is not shown again)",
                    row.id,
                    key.expose()
                ),
            ),
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the control database is {e}; no key was created"),
            ),
        },
    };
    Ok(page::again(&state, &cross, jar, form.tenant, form.csrf, status, notice).await)
}

/// The page's "revoke" button.
pub async fn form_revoke(
    State(state): State<AdminState>,
    cross: CrossShard,
    jar: CookieJar,
    UiForm(form): UiForm<RevokeForm>,
) -> Result<Response, ApiError> {
    csrf::check(&jar, &form.csrf)?;
    let (status, notice) = match form.id.trim().parse::<i64>() {
        Err(_) => (StatusCode::BAD_REQUEST, "id: not a key id".to_owned()),
        Ok(id) => match revoke(&state, id).await {
            Ok(Some(row)) => (
                StatusCode::OK,
                format!("Revoked key {} of {}.", row.id, row.tenant_key),
            ),
            Ok(None) => (StatusCode::NOT_FOUND, format!("There is no key {id}.")),
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the control database is {e}; nothing was revoked"),
            ),
        },
    };
    Ok(page::again(&state, &cross, jar, form.tenant, form.csrf, status, notice).await)
}
