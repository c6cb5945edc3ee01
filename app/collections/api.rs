//! `/api/collections`: a tenant's folders, nested up to 8 deep, on its shard. Editors and
//! admins change them; viewers read them.

use axum::Json;
use axum::extract::FromRef;
use axum::extract::FromRequestParts;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::{NO_SUCH_COLLECTION, bad_name};
use super::model::{Collection, CollectionChange, CollectionName, NewCollection};
use super::store::{self, Removed};
use crate::sharding::access::Shards;
use crate::web::error::ApiError;
use crate::web::extract::{
    ApiJson, ApiQuery, ConnectionMode, ShardedDb, ShardedReadDb, Tenant, TenantSession,
};
use crate::web::openapi::ErrorBody;

/// The API document's tag of these operations.
pub const TAG: &str = "collections";

/// The `code`s these operations' answers carry, besides the framework's.
pub const CODES: &[&str] = &[
    "collection_cycle",
    "collection_limit",
    "collection_not_empty",
    "collection_too_deep",
    "duplicate_collection_name",
    "no_such_parent",
    "validation_failed",
];

/// The routes, for the app to put behind tenant authentication.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, update, remove))
}

/// A collection id from the path. A malformed one is simply not found.
pub struct CollectionId(Uuid);

impl<S: Send + Sync> FromRequestParts<S> for CollectionId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Path::<Uuid>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(id)| CollectionId(id))
            .map_err(|_: PathRejection| ApiError::NotFound(NO_SUCH_COLLECTION))
    }
}

/// A collection as the API shows it, with the shard that holds it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CollectionView<'a> {
    shard: &'a str,
    #[serde(flatten)]
    collection: &'a Collection,
}

/// Every collection of the tenant, flat: `parent_id` gives the tree.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CollectionList<'a> {
    shard: &'a str,
    /// By name; at most 1 000 (a tenant's limit).
    collections: &'a [Collection],
}

/// How a collection with contents is deleted.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// Also delete every collection nested in it and every bookmark filed in any of them.
    /// Without it, a collection that holds anything is refused (409).
    with_contents: Option<bool>,
}

fn view<M: ConnectionMode>(db: &TenantSession<M>, collection: &Collection) -> Response {
    Json(CollectionView {
        shard: db.shard(),
        collection,
    })
    .into_response()
}

/// The tenant's collections.
#[utoipa::path(
    get,
    path = "/api/collections",
    tag = TAG,
    responses((status = 200, description = "Every collection of the tenant.", body = CollectionList))
)]
async fn list(Tenant(tenant): Tenant, mut db: ShardedReadDb) -> Result<Response, ApiError> {
    let all = db.read(async |c| store::list(c, &tenant).await).await?;
    Ok(Json(CollectionList {
        shard: db.shard(),
        collections: &all,
    })
    .into_response())
}

/// Creates a collection, at the top level or inside another.
#[utoipa::path(
    post,
    path = "/api/collections",
    tag = TAG,
    request_body = NewCollection,
    responses(
        (status = 201, description = "Created.", body = CollectionView),
        (status = 404, description = "`parent_id` names no collection of the tenant (`no_such_parent`); nothing is stored.", body = ErrorBody),
        (status = 409, description = "A sibling has that name (`duplicate_collection_name`, its id in `id`), or the tenant has 1 000 collections (`collection_limit`).", body = ErrorBody),
        (status = 422, description = "The name breaks its rule (`validation_failed`), or the collection would be nested deeper than 8 (`collection_too_deep`).", body = ErrorBody),
    )
)]
async fn create(
    Tenant(tenant): Tenant,
    mut db: ShardedDb,
    ApiJson(body): ApiJson<NewCollection>,
) -> Result<Response, ApiError> {
    let name = CollectionName::parse(&body.name).map_err(bad_name)?;
    let parent = body.parent_id;
    let created = db
        .write(async |c| store::create(c, &tenant, &name, parent).await)
        .await?;
    Ok((StatusCode::CREATED, view(&db, &created)).into_response())
}

/// One collection.
#[utoipa::path(
    get,
    path = "/api/collections/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The collection's id.")),
    responses(
        (status = 200, description = "The collection.", body = CollectionView),
        (status = 404, description = "The tenant has no collection with that id (`not_found`); malformed ids included.", body = ErrorBody),
    )
)]
async fn show(
    Tenant(tenant): Tenant,
    CollectionId(id): CollectionId,
    mut db: ShardedReadDb,
) -> Result<Response, ApiError> {
    match db.read(async |c| store::get(c, &tenant, id).await).await? {
        Some(found) => Ok(view(&db, &found)),
        None => Err(ApiError::NotFound(NO_SUCH_COLLECTION)),
    }
}

/// Renames a collection, or moves it with everything in it.
#[utoipa::path(
    patch,
    path = "/api/collections/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The collection's id.")),
    request_body = CollectionChange,
    responses(
        (status = 200, description = "The changed collection.", body = CollectionView),
        (status = 404, description = "The tenant has no collection with that id (`not_found`), or `parent_id` names none (`no_such_parent`).", body = ErrorBody),
        (status = 409, description = "The new parent is the collection itself or inside it (`collection_cycle`), or a sibling there has the name (`duplicate_collection_name`).", body = ErrorBody),
        (status = 422, description = "The name breaks its rule (`validation_failed`), or the subtree would end up deeper than 8 (`collection_too_deep`).", body = ErrorBody),
    )
)]
async fn update(
    Tenant(tenant): Tenant,
    CollectionId(id): CollectionId,
    mut db: ShardedDb,
    ApiJson(body): ApiJson<CollectionChange>,
) -> Result<Response, ApiError> {
    let name = match &body.name {
        Some(raw) => Some(CollectionName::parse(raw).map_err(bad_name)?),
        None => None,
    };
    let parent = body.parent_id;
    let changed = db
        .write(async |c| store::update(c, &tenant, id, name.as_ref(), parent).await)
        .await?;
    Ok(view(&db, &changed))
}

/// Deletes a collection; with `?with_contents=true`, also what it holds.
#[utoipa::path(
    delete,
    path = "/api/collections/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The collection's id."), DeleteParams),
    responses(
        (status = 200, description = "Deleted: how many collections (itself included) and bookmarks went.", body = Removed),
        (status = 404, description = "The tenant has no collection with that id (`not_found`).", body = ErrorBody),
        (status = 409, description = "It holds collections or bookmarks and `with_contents` is not true (`collection_not_empty`, with both counts).", body = ErrorBody),
    )
)]
async fn remove(
    Tenant(tenant): Tenant,
    CollectionId(id): CollectionId,
    ApiQuery(params): ApiQuery<DeleteParams>,
    mut db: ShardedDb,
) -> Result<Response, ApiError> {
    let with_contents = params.with_contents.unwrap_or(false);
    let removed = db
        .write(async |c| store::delete(c, &tenant, id, with_contents).await)
        .await?;
    Ok(Json(removed).into_response())
}
