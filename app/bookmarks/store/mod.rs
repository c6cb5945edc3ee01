//! Bookmark queries. Every query filters by tenant: several tenants share a shard.

use chrono::Utc;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DbError};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::model::{Bookmark, BookmarkDraft, BookmarkPatch};
use super::schema::bookmarks::dsl as b;
use crate::tenancy::TenantId;

mod across;
pub mod batch;
pub mod export;
mod list;
pub mod tags;

pub use across::{AllTenantsQuery, Direction, Position, all_tenants, shard_counts, tag_counts};
pub use list::list;

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the tenant already has a bookmark for that URL")]
    Duplicate { existing: Uuid },
    /// The composite foreign key refused it: the tenant has no such collection (another
    /// tenant's collection counts as none).
    #[error("collection_id names no collection of this tenant")]
    NoSuchCollection,
    #[error(transparent)]
    Db(DbError),
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> Self {
        match &e {
            DbError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, info)
                if info.constraint_name() == Some("bookmarks_collection") =>
            {
                StoreError::NoSuchCollection
            }
            _ => StoreError::Db(e),
        }
    }
}

/// A page request: newest first, starting after `cursor` (an id from the previous page).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub tag: Option<String>,
    /// Only bookmarks filed in this collection (or, recursively, in its subtree).
    pub collection: Option<CollectionFilter>,
    /// Only bookmarks whose state is as given.
    pub unread: Option<bool>,
    pub archived: Option<bool>,
    pub favorite: Option<bool>,
    pub q: Option<String>,
    pub limit: i64,
    pub cursor: Option<Uuid>,
}

/// A list's collection filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectionFilter {
    pub id: Uuid,
    /// Also the collections nested in it, at any depth.
    pub recursive: bool,
}

/// One page and the cursor for the next, if there is one.
pub struct Page {
    pub items: Vec<Listed>,
    pub next_cursor: Option<Uuid>,
}

/// A listed bookmark, saying whether search has caught up with its latest write.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Listed {
    #[serde(flatten)]
    pub bookmark: Bookmark,
    pub indexed: bool,
}

/// Inserts a bookmark saved by `author` (a member of the tenant, if the request acts for
/// one), or reports the id of the tenant's existing bookmark for that URL.
pub async fn insert(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    draft: &BookmarkDraft,
    author: Option<Uuid>,
) -> Result<Bookmark, StoreError> {
    let now = Utc::now();
    // Column by column, not a `#[derive(Insertable)]` struct: diesel's derive wraps every
    // field as "value or DEFAULT", which makes it prepare the statement afresh on every
    // call (parse, plan and an extra round trip per create). These expressions render the
    // same SQL every time, so each connection prepares it once and reuses it.
    let row = (
        b::tenant_id.eq(tenant.as_str()),
        b::id.eq(Uuid::now_v7()),
        b::url.eq(&draft.url),
        b::title.eq(&draft.title),
        b::notes.eq(&draft.notes),
        b::tags.eq(&draft.tags),
        b::created_at.eq(now),
        b::updated_at.eq(now),
        b::collection_id.eq(draft.collection_id),
        b::unread.eq(draft.states.unread),
        b::archived.eq(draft.states.archived),
        b::favorite.eq(draft.states.favorite),
        b::created_by.eq(author),
    );
    let inserted: Option<Bookmark> = diesel::insert_into(b::bookmarks)
        .values(row)
        .on_conflict_do_nothing()
        .returning(Bookmark::as_returning())
        .get_result(conn)
        .await
        .optional()?;
    match inserted {
        Some(bookmark) => Ok(bookmark),
        None => Err(duplicate_of(conn, tenant, &draft.url).await),
    }
}

/// The tenant's bookmark for `url`: what a write that collided with it is told.
async fn duplicate_of(conn: &mut AsyncPgConnection, tenant: &TenantId, url: &str) -> StoreError {
    match saved_with_url(conn, tenant, url).await {
        Ok(existing) => StoreError::Duplicate { existing },
        Err(e) => StoreError::Db(e),
    }
}

async fn saved_with_url(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    url: &str,
) -> Result<Uuid, DbError> {
    b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .filter(b::url.eq(url))
        .select(b::id)
        .first::<Uuid>(conn)
        .await
}

pub async fn get(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<Option<Bookmark>, DbError> {
    b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .filter(b::id.eq(id))
        .select(Bookmark::as_select())
        .first(conn)
        .await
        .optional()
}

/// Applies a validated patch; `None` when the tenant has no such bookmark.
pub async fn update(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
    patch: &BookmarkPatch,
) -> Result<Option<Bookmark>, StoreError> {
    match update_row(conn, tenant, id, patch).await {
        Ok(updated) => Ok(updated),
        Err(DbError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            let url = patch.url.as_deref().unwrap_or_default();
            Err(duplicate_of(conn, tenant, url).await)
        }
        Err(e) => Err(e.into()),
    }
}

/// The patch as one statement. A URL the tenant has saved already, or a collection it does
/// not have, is the database's error: after one, the transaction (or savepoint) it ran in
/// must be rolled back before anything else is asked.
async fn update_row(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
    patch: &BookmarkPatch,
) -> Result<Option<Bookmark>, DbError> {
    if patch.is_empty() {
        return get(conn, tenant, id).await;
    }
    PatchStatement {
        tenant: tenant.as_str(),
        id,
        patch,
        set_collection: patch.collection_id.is_some(),
        collection: patch.collection_id.flatten(),
        now: Utc::now(),
    }
    .get_result(conn)
    .await
    .optional()
}

/// `UPDATE … SET column = COALESCE(new value, column), … RETURNING the row`: one statement
/// text whatever the patch holds, so each connection prepares it once (diesel never caches
/// an `UPDATE` of its own: its SET list changes with the fields given).
struct PatchStatement<'a> {
    tenant: &'a str,
    id: Uuid,
    patch: &'a BookmarkPatch,
    /// Whether the patch files the bookmark (`collection`, possibly none) or leaves it.
    set_collection: bool,
    collection: Option<Uuid>,
    now: chrono::DateTime<Utc>,
}

impl diesel::query_builder::QueryId for PatchStatement<'_> {
    type QueryId = PatchStatement<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl diesel::query_builder::Query for PatchStatement<'_> {
    type SqlType = diesel::dsl::SqlTypeOf<diesel::dsl::AsSelect<Bookmark, diesel::pg::Pg>>;
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for PatchStatement<'_> {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        use diesel::sql_types::{Array, Bool, Nullable, Text, Timestamptz};
        out.push_sql("UPDATE bookmarks SET url = COALESCE(");
        out.push_bind_param::<Nullable<Text>, _>(&self.patch.url)?;
        out.push_sql(", url), title = COALESCE(");
        out.push_bind_param::<Nullable<Text>, _>(&self.patch.title)?;
        out.push_sql(", title), notes = COALESCE(");
        out.push_bind_param::<Nullable<Text>, _>(&self.patch.notes)?;
        out.push_sql(", notes), tags = COALESCE(");
        out.push_bind_param::<Nullable<Array<Text>>, _>(&self.patch.tags)?;
        out.push_sql(", tags), collection_id = CASE WHEN ");
        out.push_bind_param::<Bool, _>(&self.set_collection)?;
        out.push_sql(" THEN ");
        out.push_bind_param::<Nullable<diesel::sql_types::Uuid>, _>(&self.collection)?;
        out.push_sql(" ELSE collection_id END, unread = COALESCE(");
        out.push_bind_param::<Nullable<Bool>, _>(&self.patch.unread)?;
        out.push_sql(", unread), archived = COALESCE(");
        out.push_bind_param::<Nullable<Bool>, _>(&self.patch.archived)?;
        out.push_sql(", archived), favorite = COALESCE(");
        out.push_bind_param::<Nullable<Bool>, _>(&self.patch.favorite)?;
        out.push_sql(", favorite), updated_at = ");
        out.push_bind_param::<Timestamptz, _>(&self.now)?;
        out.push_sql(" WHERE tenant_id = ");
        out.push_bind_param::<Text, _>(&self.tenant)?;
        out.push_sql(" AND id = ");
        out.push_bind_param::<diesel::sql_types::Uuid, _>(&self.id)?;
        // The columns in `Bookmark`'s order, which its `Queryable` reads them in.
        out.push_sql(
            " RETURNING tenant_id, id, url, title, notes, tags, created_at, updated_at, \
             collection_id, unread, archived, favorite, created_by",
        );
        Ok(())
    }
}

/// Deletes one bookmark; false when the tenant has no such bookmark.
pub async fn delete(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<bool, DbError> {
    let n = diesel::delete(
        b::bookmarks
            .filter(b::tenant_id.eq(tenant.as_str()))
            .filter(b::id.eq(id)),
    )
    .execute(conn)
    .await?;
    Ok(n > 0)
}
