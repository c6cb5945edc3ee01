//! Tenants' API keys for the admin page and its JSON API: listed in the tenant lookup
//! (never the keys themselves), created (the key is shown once, in the answer) and revoked
//! (every web replica refuses it within a second). The page's forms carry the CSRF token as
//! its other forms do; the JSON API takes JSON bodies only, which another site's form cannot
//! send, and revokes with DELETE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::ControlError;
use super::state::{AdminState, tenant_param};
use crate::tenancy::TenantId;
use crate::tenancy::api_key::ApiKey;
use crate::tenancy::keys::{self, KeyNote, KeyRow};
use crate::tenancy::members::{self, Member};
use crate::web::error::ApiError;
use crate::web::extract::{ApiJson, ApiPath};
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

/// `tenant`'s members, oldest first.
pub async fn members_of(
    state: &AdminState,
    tenant: &TenantId,
) -> Result<Vec<Member>, ControlError> {
    let tenant = tenant.clone();
    state
        .control
        .run("list members", move |conn| {
            Box::pin(async move { members::list(conn, &tenant).await })
        })
        .await
}

/// A key for `tenant`'s owner (its oldest active admin, made for a tenant with no member
/// yet).
pub async fn create(
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

pub async fn revoke(state: &AdminState, id: i64) -> Result<Option<KeyRow>, ControlError> {
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
    tag = super::state::TAG,
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
    let note =
        KeyNote::parse(body.note.as_deref().unwrap_or("")).map_err(|e| ApiError::BadRequest {
            code: "invalid_body",
            message: e.to_string(),
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
    tag = super::state::TAG,
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
    tag = super::state::TAG,
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
