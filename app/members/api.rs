//! `/api/members` and `/api/keys`: a tenant's people and their API keys, managed by the
//! tenant's own admins. Every key acts with its member's role; disabling a member stops its
//! keys on every web replica within a second (the control database's notification).

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRef, FromRequestParts, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::MembersError;
use crate::pg::control::ControlLookups;
use crate::tenancy::auth::Authenticated;
use crate::tenancy::keys::{self, KeyNote, KeyRow};
use crate::tenancy::members::{
    self, Email, Member, MemberError, MemberInputError, MemberName, Role,
};
use crate::web::error::ApiError;
use crate::web::extract::{ApiJson, ApiPath};
use crate::web::openapi::ErrorBody;

/// The API document's tag of these operations.
pub const TAG: &str = "members";

/// The `code`s these operations' answers carry, besides the framework's.
pub const CODES: &[&str] = &[
    "duplicate_email",
    "last_admin",
    "member_disabled",
    "no_admin",
    "validation_failed",
];

/// The routes, for the app to put behind tenant authentication.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    ControlLookups: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, add))
        .routes(routes!(update, disable))
        .routes(routes!(list_keys, create_key))
        .routes(routes!(revoke_key))
}

/// A member id from the path. A malformed one is simply not found.
pub struct MemberId(Uuid);

impl<S: Send + Sync> FromRequestParts<S> for MemberId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Path::<Uuid>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(id)| MemberId(id))
            .map_err(|_: PathRejection| ApiError::NotFound(NO_SUCH_MEMBER))
    }
}

const NO_SUCH_MEMBER: &str = "no member of this tenant has that id";

/// A tenant's members.
#[derive(Serialize, utoipa::ToSchema)]
pub struct MemberList {
    members: Vec<Member>,
}

/// A new member.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    /// Shown in listings: at most 100 characters, not only white space, no control
    /// characters; trimmed.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    name: String,
    /// One `@` between two parts without white space or control characters; unique
    /// (ignoring case) among the tenant's members; checked for shape only.
    #[schema(
        max_length = 254,
        pattern = "^\\s*[^\\s@\\u0000-\\u001F\\u007F-\\u009F]+@[^\\s@\\u0000-\\u001F\\u007F-\\u009F]+\\s*$"
    )]
    email: String,
    #[schema(value_type = Role)]
    role: String,
}

/// A change to a member: either field, or both.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberChange {
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    name: Option<String>,
    #[schema(value_type = Option<Role>)]
    role: Option<String>,
}

/// A new key for a member.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// What the key is for, shown in listings: at most 200 characters, no control
    /// characters.
    #[schema(max_length = 200)]
    note: Option<String>,
}

/// A new key's row and the key itself, shown this once.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    row: KeyRow,
    /// `bks_…`: stored only as its hash, never shown again.
    key: String,
}

/// A member's keys.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyList {
    keys: Vec<KeyRow>,
}

/// Every problem of a set of parsed fields, or their values.
fn fields<T>(problems: Vec<MemberInputError>, value: impl FnOnce() -> T) -> Result<T, ApiError> {
    if problems.is_empty() {
        Ok(value())
    } else {
        Err(MembersError::Invalid(problems).into())
    }
}

/// `Ok(None)` for an absent field, the parsed value, or the field's problem (collected).
fn optional<T>(
    raw: Option<&str>,
    parse: impl FnOnce(&str) -> Result<T, MemberInputError>,
    problems: &mut Vec<MemberInputError>,
) -> Option<T> {
    raw.and_then(|raw| parse(raw).map_err(|e| problems.push(e)).ok())
}

/// The tenant's members, disabled ones included. Any member may read it.
#[utoipa::path(
    get,
    path = "/api/members",
    tag = TAG,
    responses((status = 200, description = "The tenant's members, oldest first, disabled ones included.", body = MemberList))
)]
async fn list(
    who: Authenticated,
    State(control): State<ControlLookups>,
) -> Result<Response, ApiError> {
    let tenant = who.tenant.clone();
    let members = control
        .run(async |c| members::list(c, &tenant).await)
        .await
        .map_err(MembersError::from)?;
    Ok(Json(MemberList { members }).into_response())
}

/// Adds a member (admins only).
#[utoipa::path(
    post,
    path = "/api/members",
    tag = TAG,
    request_body = NewMember,
    responses(
        (status = 201, description = "The new member. It can act once an admin creates a key for it.", body = Member),
        (status = 409, description = "Another member of the tenant has that email (`duplicate_email`).", body = ErrorBody),
        (status = 422, description = "A field is not acceptable (`validation_failed`, each field's problem in `fields`).", body = ErrorBody),
    )
)]
async fn add(
    who: Authenticated,
    State(control): State<ControlLookups>,
    ApiJson(body): ApiJson<NewMember>,
) -> Result<Response, ApiError> {
    who.require(Role::Admin)?;
    let mut problems = Vec::new();
    let name = optional(Some(&body.name), MemberName::parse, &mut problems);
    let email = optional(Some(&body.email), Email::parse, &mut problems);
    let role = optional(Some(&body.role), Role::parse, &mut problems);
    let (name, email, role) = fields(problems, || {
        (
            name.expect("parsed"),
            email.expect("parsed"),
            role.expect("parsed"),
        )
    })?;
    let tenant = who.tenant.clone();
    let added = control
        .run(async |c| MemberError::split(members::add(c, &tenant, &name, &email, role).await))
        .await
        .map_err(MembersError::from)?
        .map_err(MembersError::from)?;
    Ok((StatusCode::CREATED, Json(added)).into_response())
}

/// Renames a member or changes its role (admins only). The tenant's last active admin
/// cannot be demoted.
#[utoipa::path(
    patch,
    path = "/api/members/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The member's id.")),
    request_body = MemberChange,
    responses(
        (status = 200, description = "The member as changed. A new role applies to its keys on every web replica within a second.", body = Member),
        (status = 404, description = "The tenant has no member with that id (`not_found`).", body = ErrorBody),
        (status = 409, description = "The member is the tenant's last active admin (`last_admin`).", body = ErrorBody),
        (status = 422, description = "A field is not acceptable (`validation_failed`).", body = ErrorBody),
    )
)]
async fn update(
    who: Authenticated,
    State(control): State<ControlLookups>,
    MemberId(id): MemberId,
    ApiJson(body): ApiJson<MemberChange>,
) -> Result<Response, ApiError> {
    who.require(Role::Admin)?;
    let mut problems = Vec::new();
    let name = optional(body.name.as_deref(), MemberName::parse, &mut problems);
    let role = optional(body.role.as_deref(), Role::parse, &mut problems);
    let (name, role) = fields(problems, || (name, role))?;
    let tenant = who.tenant.clone();
    let changed = control
        .run(async |c| {
            MemberError::split(members::update(c, &tenant, id, name.as_ref(), role).await)
        })
        .await
        .map_err(MembersError::from)?
        .map_err(MembersError::from)?;
    Ok(Json(changed).into_response())
}

/// Disables a member (admins only): its keys stop working on every web replica within a
/// second. The member stays listed. The tenant's last active admin cannot be disabled.
#[utoipa::path(
    delete,
    path = "/api/members/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The member's id.")),
    responses(
        (status = 200, description = "The member, disabled (again, if it already was).", body = Member),
        (status = 404, description = "The tenant has no member with that id (`not_found`).", body = ErrorBody),
        (status = 409, description = "The member is the tenant's last active admin (`last_admin`).", body = ErrorBody),
    )
)]
async fn disable(
    who: Authenticated,
    State(control): State<ControlLookups>,
    MemberId(id): MemberId,
) -> Result<Response, ApiError> {
    who.require(Role::Admin)?;
    let tenant = who.tenant.clone();
    let disabled = control
        .run(async |c| MemberError::split(members::disable(c, &tenant, id).await))
        .await
        .map_err(MembersError::from)?
        .map_err(MembersError::from)?;
    Ok(Json(disabled).into_response())
}

/// A member's API keys, revoked ones included; never the keys themselves (admins only).
#[utoipa::path(
    get,
    path = "/api/members/{id}/keys",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The member's id.")),
    responses(
        (status = 200, description = "The member's keys, oldest first.", body = KeyList),
        (status = 404, description = "The tenant has no member with that id (`not_found`).", body = ErrorBody),
    )
)]
async fn list_keys(
    who: Authenticated,
    State(control): State<ControlLookups>,
    MemberId(id): MemberId,
) -> Result<Response, ApiError> {
    who.require(Role::Admin)?;
    let tenant = who.tenant.clone();
    let found = control
        .run(async |c| {
            Ok(match members::get(c, &tenant, id).await? {
                Some(_) => Some(keys::of_member(c, &tenant, id).await?),
                None => None,
            })
        })
        .await
        .map_err(MembersError::from)?;
    match found {
        Some(keys) => Ok(Json(KeyList { keys }).into_response()),
        None => Err(ApiError::NotFound(NO_SUCH_MEMBER)),
    }
}

/// Creates an API key for a member (admins only); it acts with the member's role. The key
/// is shown this once.
#[utoipa::path(
    post,
    path = "/api/members/{id}/keys",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The member's id.")),
    request_body = NewKey,
    responses(
        (status = 201, description = "The new key's row, with `key` itself: shown this once, stored only as its hash.", body = CreatedKey),
        (status = 404, description = "The tenant has no member with that id (`not_found`).", body = ErrorBody),
        (status = 409, description = "The member is disabled (`member_disabled`).", body = ErrorBody),
    )
)]
async fn create_key(
    who: Authenticated,
    State(control): State<ControlLookups>,
    MemberId(id): MemberId,
    ApiJson(body): ApiJson<NewKey>,
) -> Result<Response, ApiError> {
    who.require(Role::Admin)?;
    let note =
        KeyNote::parse(body.note.as_deref().unwrap_or("")).map_err(|e| ApiError::BadRequest {
            code: "invalid_body",
            message: format!("note: {e}"),
        })?;
    let tenant = who.tenant.clone();
    let (row, key) = control
        .run(async |c| MemberError::split(keys::create_for(c, &tenant, id, note.as_ref()).await))
        .await
        .map_err(MembersError::from)?
        .map_err(MembersError::from)?;
    let key = key.expose().to_owned();
    Ok((StatusCode::CREATED, Json(CreatedKey { row, key })).into_response())
}

/// Revokes one of the tenant's keys (admins only): it stays listed, as revoked.
#[utoipa::path(
    delete,
    path = "/api/keys/{id}",
    tag = TAG,
    params(("id" = i64, Path, description = "The key's id, as listed.")),
    responses(
        (status = 200, description = "The revoked key's row. Every web replica refuses the key within a second.", body = KeyRow),
        (status = 404, description = "The tenant has no key with that id (`not_found`).", body = ErrorBody),
    )
)]
async fn revoke_key(
    who: Authenticated,
    State(control): State<ControlLookups>,
    ApiPath(id): ApiPath<i64>,
) -> Result<Response, ApiError> {
    who.require(Role::Admin)?;
    let tenant = who.tenant.clone();
    match control
        .run(async |c| keys::revoke_of(c, &tenant, id).await)
        .await
        .map_err(MembersError::from)?
    {
        Some(row) => Ok(Json(row).into_response()),
        None => Err(ApiError::NotFound("the tenant has no API key with that id")),
    }
}
