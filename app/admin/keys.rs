//! Tenants' API keys on the admin page and in its JSON API: listed in the tenant lookup
//! (never the keys themselves), created (the key is shown once, in the answer) and revoked
//! (every web replica refuses it within a second). The page's forms carry the CSRF token as
//! its other forms do; the JSON API takes JSON bodies only, which another site's form cannot
//! send, and revokes with DELETE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum_extra::extract::CookieJar;
use serde::{Deserialize, Serialize};

use super::page;
use super::{AdminState, ControlError, tenant_param};
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::TenantId;
use crate::tenancy::api_key::ApiKey;
use crate::tenancy::keys::{self, KeyNote, KeyRow};
use crate::web::csrf;
use crate::web::error::ApiError;
use crate::web::extract::{ApiJson, ApiPath, UiForm};
use crate::web::openapi::{ErrorBody, TenantIdSchema};

/// `tenant`'s keys, oldest first.
pub async fn of_tenant(state: &AdminState, tenant: &TenantId) -> Result<Vec<KeyRow>, ControlError> {
    let tenant = tenant.clone();
    state
        .control
        .run("list API keys", move |conn| {
            Box::pin(async move { keys::list(conn, Some(&tenant)).await })
        })
        .await
}

async fn create(
    state: &AdminState,
    tenant: &TenantId,
    note: Option<KeyNote>,
) -> Result<(KeyRow, ApiKey), ControlError> {
    let tenant = tenant.clone();
    state
        .control
        .run("create an API key", move |conn| {
            Box::pin(async move { keys::create(conn, &tenant, note.as_ref()).await })
        })
        .await
}

async fn revoke(state: &AdminState, id: i64) -> Result<Option<KeyRow>, ControlError> {
    state
        .control
        .run("revoke an API key", move |conn| {
            Box::pin(async move { keys::revoke(conn, id).await })
        })
        .await
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// What the key is for, shown in listings: at most 200 characters, no control
    /// characters.
    #[schema(max_length = 200)]
    note: Option<String>,
}

/// Creates an API key for the tenant (body `{}` or `{"note": …}`); the key is shown this
/// once.
#[utoipa::path(
    post,
    path = "/admin/api/tenants/{key}/keys",
    tag = super::TAG,
    params(("key" = inline(TenantIdSchema), Path, description = "The tenant id.")),
    request_body = NewKey,
    responses((status = 201, description = "The new key's row, with `key` itself: shown this once, stored only as its hash.", body = CreatedKey))
)]
pub async fn api_create(
    State(state): State<AdminState>,
    ApiPath(tenant): ApiPath<String>,
    ApiJson(body): ApiJson<NewKey>,
) -> Result<Response, ApiError> {
    let tenant = tenant_param(&tenant)?;
    let note = KeyNote::parse(body.note.as_deref().unwrap_or("")).map_err(|message| {
        ApiError::BadRequest {
            code: "invalid_body",
            message,
        }
    })?;
    let (row, key) = create(&state, &tenant, note)
        .await
        .map_err(|_| ApiError::ControlUnavailable)?;
    let key = key.expose().to_owned();
    Ok((StatusCode::CREATED, Json(CreatedKey { row, key })).into_response())
}

/// A new key's row and the key itself, shown this once.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    row: KeyRow,
    /// `bks_…`: stored only as its hash, never shown again.
    key: String,
}

/// A tenant's keys.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyList {
    keys: Vec<KeyRow>,
}

/// The tenant's API keys, revoked ones included; never the keys themselves.
#[utoipa::path(
    get,
    path = "/admin/api/tenants/{key}/keys",
    tag = super::TAG,
    params(("key" = inline(TenantIdSchema), Path, description = "The tenant id.")),
    responses((status = 200, description = "The tenant's keys, revoked ones included, never the keys themselves.", body = KeyList))
)]
pub async fn api_list(
    State(state): State<AdminState>,
    ApiPath(tenant): ApiPath<String>,
) -> Result<Response, ApiError> {
    let tenant = tenant_param(&tenant)?;
    let keys = of_tenant(&state, &tenant)
        .await
        .map_err(|_| ApiError::ControlUnavailable)?;
    Ok(Json(KeyList { keys }).into_response())
}

/// Revokes a key: it stays listed, as revoked.
#[utoipa::path(
    delete,
    path = "/admin/api/keys/{id}",
    tag = super::TAG,
    params(("id" = i64, Path, description = "The key's id, as listed.")),
    responses(
        (status = 200, description = "The revoked key's row. Every web replica refuses the key within a second.", body = KeyRow),
        (status = 404, description = "No key has that id (`not_found`).", body = ErrorBody),
    )
)]
pub async fn api_revoke(
    State(state): State<AdminState>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Response, ApiError> {
    match revoke(&state, id).await {
        Ok(Some(row)) => Ok(Json(row).into_response()),
        Ok(None) => Err(ApiError::NotFound("no API key has that id")),
        Err(_) => Err(ApiError::ControlUnavailable),
    }
}

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
        (_, Err(e)) => (StatusCode::BAD_REQUEST, e),
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
