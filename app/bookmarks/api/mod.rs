//! The JSON API for the request's tenant. `/api/bookmarks` reads and writes both use the
//! shard primary, so a tenant always sees its own writes at once (read-your-own-writes);
//! `/api/tags` is an aggregate that tolerates lag and reads from the shard's replica.

use axum::Json;
use axum::extract::FromRef;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::error::{BookmarkError, BookmarkPath, NO_SUCH_BOOKMARK};
use super::model::{Bookmark, NewBookmarkInput, PatchInput, TagRenameInput};
use super::store::tags::Renamed;
use super::store::{self, Listed, StoreError};
use crate::sharding::access::Shards;
use crate::tenancy::auth::Authenticated;
use crate::web::error::ApiError;
use crate::web::extract::{
    ApiJson, ApiQuery, ConnectionMode, QueryFailure, ShardedDb, ShardedReadDb, Tenant,
    TenantSession, WorkError,
};
use crate::web::openapi::ErrorBody;

mod list_params;

pub use list_params::{ListParams, MAX_SEARCH_CHARS};

/// The tag of the tenant's operations in the API document.
pub const TAG: &str = "bookmarks";

/// The `code`s this API's own answers carry, besides the framework's.
pub const CODES: &[&str] = &[
    "batch_refused",
    "duplicate_url",
    "invalid_collection",
    "invalid_cursor",
    "invalid_limit",
    "invalid_query",
    "no_such_collection",
    "validation_failed",
];

pub const DEFAULT_PAGE: i64 = 20;
pub const MAX_PAGE: i64 = 100;

/// The tenant's JSON API, each route mounted with its description.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(show, update, remove))
        .routes(routes!(tags))
        .routes(routes!(rename_tag))
}

/// A bookmark as the API shows it, with the shard that holds it.
#[derive(Serialize, ToSchema)]
pub struct BookmarkView<'a> {
    pub shard: &'a str,
    #[serde(flatten)]
    pub bookmark: &'a Bookmark,
}

/// One page of the tenant's bookmarks, newest first.
#[derive(Serialize, ToSchema)]
struct ListView<'a> {
    shard: &'a str,
    tenant: &'a str,
    items: &'a [Listed],
    /// Pass as `cursor` for the next page; absent on the last page.
    next_cursor: Option<Uuid>,
}

/// How many of the tenant's bookmarks carry each tag.
#[derive(Serialize, ToSchema)]
struct TagsView {
    shard: String,
    /// `replica` or `primary`: which server answered.
    served_by: &'static str,
    tags: Vec<TagCount>,
}

#[derive(Serialize, ToSchema)]
struct TagCount {
    tag: String,
    count: i64,
}

/// Store errors on a known shard: the shard classifies database errors, a duplicate stays a 409.
impl QueryFailure for StoreError {
    fn database_error(&self) -> Option<&diesel::result::Error> {
        match self {
            StoreError::Db(e) => Some(e),
            StoreError::Duplicate { .. } | StoreError::NoSuchCollection => None,
        }
    }

    fn into_database_error(self) -> Result<diesel::result::Error, Self> {
        match self {
            StoreError::Db(e) => Ok(e),
            own => Err(own),
        }
    }
}

impl WorkError for StoreError {
    fn into_api(self) -> ApiError {
        match self {
            StoreError::Duplicate { existing } => BookmarkError::DuplicateUrl { existing }.into(),
            StoreError::NoSuchCollection => BookmarkError::NoSuchCollection.into(),
            StoreError::Db(e) => e.into_api(),
        }
    }
}

fn view<M: ConnectionMode>(db: &TenantSession<M>, bookmark: &Bookmark) -> Response {
    Json(BookmarkView {
        shard: db.shard(),
        bookmark,
    })
    .into_response()
}

/// Saves a bookmark for the tenant.
#[utoipa::path(
    post,
    path = "/api/bookmarks",
    tag = TAG,
    request_body = NewBookmarkInput,
    responses(
        (status = 201, description = "Saved.", body = BookmarkView),
        (status = 404, description = "`collection_id` names no collection of the tenant (`no_such_collection`); nothing is stored.", body = ErrorBody),
        (status = 409, description = "The tenant has saved that URL already (`duplicate_url`); `error.id` is the saved bookmark's id, so a repeated create is safe to retry.", body = ErrorBody),
        (status = 422, description = "A field breaks its rule (`validation_failed`); `error.fields` names each.", body = ErrorBody),
    )
)]
async fn create(
    who: Authenticated,
    mut db: ShardedDb,
    ApiJson(input): ApiJson<NewBookmarkInput>,
) -> Result<Response, ApiError> {
    let draft = input.validate().map_err(BookmarkError::Validation)?;
    let author = who.member.as_ref().map(|m| m.id);
    let tenant = &who.tenant;
    let created = db
        .write(async |c| store::insert(c, tenant, &draft, author).await)
        .await?;
    Ok((StatusCode::CREATED, view(&db, &created)).into_response())
}

/// The tenant's bookmarks, newest first, a page at a time; filtered by tag or search.
#[utoipa::path(
    get,
    path = "/api/bookmarks",
    tag = TAG,
    params(ListParams),
    responses(
        (status = 200, description = "A page of bookmarks.", body = ListView),
        (status = 404, description = "`collection` names no collection of the tenant (`no_such_collection`).", body = ErrorBody),
    )
)]
async fn list(
    Tenant(tenant): Tenant,
    ApiQuery(params): ApiQuery<ListParams>,
    mut db: ShardedReadDb,
) -> Result<Response, ApiError> {
    let query = params.parse()?;
    let page = db
        .read(async |c| store::list(c, &tenant, &query).await)
        .await?;
    Ok(Json(ListView {
        shard: db.shard(),
        tenant: tenant.as_str(),
        items: &page.items,
        next_cursor: page.next_cursor,
    })
    .into_response())
}

/// One of the tenant's bookmarks.
#[utoipa::path(
    get,
    path = "/api/bookmarks/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The bookmark's id.")),
    responses(
        (status = 200, description = "The bookmark.", body = BookmarkView),
        (status = 404, description = "The tenant has no bookmark with that id (`not_found`); malformed ids included.", body = ErrorBody),
    )
)]
async fn show(
    Tenant(tenant): Tenant,
    BookmarkPath(id): BookmarkPath<Uuid>,
    mut db: ShardedReadDb,
) -> Result<Response, ApiError> {
    match db.read(async |c| store::get(c, &tenant, id).await).await? {
        Some(b) => Ok(view(&db, &b)),
        None => Err(ApiError::NotFound(NO_SUCH_BOOKMARK)),
    }
}

/// Changes the fields sent; the others stay as they are.
#[utoipa::path(
    patch,
    path = "/api/bookmarks/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The bookmark's id.")),
    request_body = PatchInput,
    responses(
        (status = 200, description = "The changed bookmark.", body = BookmarkView),
        (status = 404, description = "The tenant has no bookmark with that id (`not_found`), or `collection_id` names no collection of the tenant (`no_such_collection`).", body = ErrorBody),
        (status = 409, description = "Another of the tenant's bookmarks has that URL (`duplicate_url`).", body = ErrorBody),
        (status = 422, description = "A field breaks its rule (`validation_failed`).", body = ErrorBody),
    )
)]
async fn update(
    Tenant(tenant): Tenant,
    BookmarkPath(id): BookmarkPath<Uuid>,
    mut db: ShardedDb,
    ApiJson(input): ApiJson<PatchInput>,
) -> Result<Response, ApiError> {
    let patch = input.validate().map_err(BookmarkError::Validation)?;
    match db
        .write(async |c| store::update(c, &tenant, id, &patch).await)
        .await?
    {
        Some(b) => Ok(view(&db, &b)),
        None => Err(ApiError::NotFound(NO_SUCH_BOOKMARK)),
    }
}

/// Deletes one of the tenant's bookmarks.
#[utoipa::path(
    delete,
    path = "/api/bookmarks/{id}",
    tag = TAG,
    params(("id" = Uuid, Path, description = "The bookmark's id.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 404, description = "The tenant has no bookmark with that id (`not_found`).", body = ErrorBody),
    )
)]
async fn remove(
    Tenant(tenant): Tenant,
    BookmarkPath(id): BookmarkPath<Uuid>,
    mut db: ShardedDb,
) -> Result<Response, ApiError> {
    if db
        .write(async |c| store::delete(c, &tenant, id).await)
        .await?
    {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::NotFound(NO_SUCH_BOOKMARK))
    }
}

/// The tenant's tag counts. An aggregate that tolerates replica lag, so it takes the
/// replica-aware read path (and says which server answered).
#[utoipa::path(
    get,
    path = "/api/tags",
    tag = TAG,
    responses((status = 200, description = "Each tag and how many bookmarks carry it; read from the shard's replica when it is ready, so it may lag the tenant's latest writes.", body = TagsView))
)]
async fn tags(Tenant(tenant): Tenant, mut db: ShardedReadDb) -> Result<Response, ApiError> {
    let counts = db
        .read(async |c| store::tag_counts(c, &tenant).await)
        .await?;
    Ok(Json(TagsView {
        shard: db.shard().to_owned(),
        served_by: if db.on_replica() {
            "replica"
        } else {
            "primary"
        },
        tags: counts
            .into_iter()
            .map(|(tag, count)| TagCount { tag, count })
            .collect(),
    })
    .into_response())
}

/// What a tag rename did; `more` says to send it again.
#[derive(Serialize, ToSchema)]
struct RenameView {
    from: String,
    to: String,
    /// Bookmarks changed by this request: at most 1 000.
    renamed: i64,
    /// Whether bookmarks with `from` remain because there were more than one request
    /// changes: send the same request again until this is false.
    more: bool,
}

/// Renames a tag on the tenant's bookmarks, or merges it into another: every `from`
/// becomes `to`, and a bookmark that had both keeps one. A thousand bookmarks at most per
/// request, in one shard transaction, oldest first; `more` says whether to send it again.
#[utoipa::path(
    post,
    path = "/api/tags/rename",
    tag = TAG,
    request_body = TagRenameInput,
    responses(
        (status = 200, description = "Renamed on up to 1 000 bookmarks (none, when no bookmark has `from`).", body = RenameView),
        (status = 422, description = "`from` or `to` is blank, too long, or they name the same tag (`validation_failed`).", body = ErrorBody),
    )
)]
async fn rename_tag(
    Tenant(tenant): Tenant,
    mut db: ShardedDb,
    ApiJson(input): ApiJson<TagRenameInput>,
) -> Result<Response, ApiError> {
    let rename = input.validate().map_err(BookmarkError::Validation)?;
    let now = chrono::Utc::now();
    let Renamed { renamed, more } = db
        .write(async |c| store::tags::rename(c, &tenant, &rename, now).await)
        .await?;
    Ok(Json(RenameView {
        from: rename.from,
        to: rename.to,
        renamed,
        more,
    })
    .into_response())
}
