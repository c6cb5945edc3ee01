//! Bookmark queries. Every query filters by tenant: several tenants share a shard.

use chrono::Utc;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DbError};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::model::{Bookmark, BookmarkDraft, BookmarkPatch};
use super::schema::bookmarks::dsl as b;
use crate::tenancy::TenantId;

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the tenant already has a bookmark for that URL")]
    Duplicate { existing: Uuid },
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A page request: newest first, starting after `cursor` (an id from the previous page).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub tag: Option<String>,
    pub q: Option<String>,
    pub limit: i64,
    pub cursor: Option<Uuid>,
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

/// Inserts a bookmark, or reports the id of the tenant's existing bookmark for that URL.
pub async fn insert(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    draft: &BookmarkDraft,
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

async fn duplicate_of(conn: &mut AsyncPgConnection, tenant: &TenantId, url: &str) -> StoreError {
    match b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .filter(b::url.eq(url))
        .select(b::id)
        .first::<Uuid>(conn)
        .await
    {
        Ok(existing) => StoreError::Duplicate { existing },
        Err(e) => StoreError::Db(e),
    }
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

/// Newest first by id (UUIDv7 ids sort by creation time), served by the primary key.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    query: &ListQuery,
) -> Result<Page, DbError> {
    let sql = page_query(tenant, query).limit(query.limit + 1);
    let mut rows: Vec<(Bookmark, bool)> = match &query.q {
        None => sql.load(conn).await?,
        Some(q) => search_page(conn, tenant, query, q).await?,
    };
    let next_cursor = if rows.len() as i64 > query.limit {
        rows.truncate(query.limit as usize);
        rows.last().map(|(last, _)| last.id)
    } else {
        None
    };
    let items = rows
        .into_iter()
        .map(|(bookmark, waiting)| Listed {
            bookmark,
            indexed: !waiting,
        })
        .collect();
    Ok(Page { items, next_cursor })
}

type PageQuery<'a> = diesel::helper_types::IntoBoxed<
    'a,
    diesel::helper_types::Order<
        diesel::helper_types::Select<
            diesel::helper_types::Filter<
                b::bookmarks,
                diesel::helper_types::Eq<b::tenant_id, &'a str>,
            >,
            (
                diesel::helper_types::AsSelect<Bookmark, diesel::pg::Pg>,
                WaitsForIndex,
            ),
        >,
        diesel::helper_types::Desc<b::id>,
    >,
    diesel::pg::Pg,
>;

/// The page's rows before any search: the tenant's, below the cursor, with the tag,
/// newest first.
fn page_query<'a>(tenant: &'a TenantId, query: &'a ListQuery) -> PageQuery<'a> {
    let mut sql = b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .select((Bookmark::as_select(), WaitsForIndex))
        .order(b::id.desc())
        .into_boxed();
    if let Some(cursor) = query.cursor {
        sql = sql.filter(b::id.lt(cursor));
    }
    if let Some(tag) = &query.tag {
        sql = sql.filter(b::tags.contains(vec![tag.clone()]));
    }
    sql
}

/// How many of the newest rows of the page's range a search checks one by one before it
/// turns to the index.
const SEARCH_WINDOW: i64 = 256;

/// A search's page, in two steps whose cost is bounded by what they return, not by the
/// tenant's size. First the newest `SEARCH_WINDOW` rows of the range are checked one by one
/// (each a primary-key probe of its document): a broad search, which matches most rows,
/// fills its page here. Only if the page is not full does the index find the matches
/// older than the window: a narrow search, whose matches are few.
async fn search_page(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    query: &ListQuery,
    q: &str,
) -> Result<Vec<(Bookmark, bool)>, DbError> {
    let want = query.limit + 1;
    // The oldest id of the window (none: the range is smaller than the window).
    let mut window = b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .select(b::id)
        .order(b::id.desc())
        .offset(SEARCH_WINDOW - 1)
        .limit(1)
        .into_boxed();
    if let Some(cursor) = query.cursor {
        window = window.filter(b::id.lt(cursor));
    }
    let edge: Option<Uuid> = window.first(conn).await.optional()?;
    let mut recent = page_query(tenant, query).filter(search_row(q)).limit(want);
    if let Some(edge) = edge {
        recent = recent.filter(b::id.ge(edge));
    }
    let mut rows: Vec<(Bookmark, bool)> = recent.load(conn).await?;
    if let Some(edge) = edge
        && (rows.len() as i64) < want
    {
        let older: Vec<(Bookmark, bool)> = page_query(tenant, query)
            .filter(b::id.lt(edge))
            .filter(search_hits(tenant.as_str(), q))
            .limit(want - rows.len() as i64)
            .load(conn)
            .await?;
        rows.extend(older);
    }
    Ok(rows)
}

/// Whether the selected bookmark matches the web-search query q: its indexed document, or
/// (while it waits for the reindexer) the same document computed on the fly.
fn search_row(q: &str) -> SearchFragment {
    SearchFragment {
        sql: &[
            "(CASE WHEN EXISTS (SELECT 1 FROM search_pending p \
             WHERE p.tenant_id = bookmarks.tenant_id AND p.bookmark_id = bookmarks.id) \
             THEN bookmark_document(bookmarks.title, bookmarks.url, bookmarks.notes, bookmarks.tags) \
             @@ websearch_to_tsquery('english', ",
            ") ELSE EXISTS (SELECT 1 FROM bookmark_search s \
             WHERE s.tenant_id = bookmarks.tenant_id AND s.bookmark_id = bookmarks.id \
             AND s.document @@ websearch_to_tsquery('english', ",
            ")) END)",
        ],
        binds: vec![q.to_owned(), q.to_owned()],
    }
}

/// A search condition: fixed SQL text between text binds. Unlike a `sql()` literal, which
/// diesel never caches, the statement holding it is prepared once per connection (its text
/// is the same for every query string).
#[derive(Debug, Clone, diesel::query_builder::QueryId)]
struct SearchFragment {
    /// One more piece than binds: piece, bind, piece, …
    sql: &'static [&'static str],
    binds: Vec<String>,
}

impl diesel::Expression for SearchFragment {
    type SqlType = diesel::sql_types::Bool;
}

impl diesel::AppearsOnTable<b::bookmarks> for SearchFragment {}

impl diesel::SelectableExpression<b::bookmarks> for SearchFragment {}

impl<G> diesel::expression::ValidGrouping<G> for SearchFragment {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for SearchFragment {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        let (first, rest) = self.sql.split_first().expect("a fragment has SQL");
        out.push_sql(first);
        for (bind, sql) in self.binds.iter().zip(rest) {
            out.push_bind_param::<diesel::sql_types::Text, _>(bind)?;
            out.push_sql(sql);
        }
        Ok(())
    }
}

/// Whether the selected bookmark waits for the search index, computed in the list's own
/// round trip. A fixed fragment rather than a `sql()` literal: diesel never caches a
/// statement holding a literal, so the list would be prepared anew (a second round trip
/// to the shard, and a parse) on every request; with this it stays in the connection's
/// prepared statement cache.
#[derive(Debug, Clone, Copy, diesel::query_builder::QueryId)]
struct WaitsForIndex;

impl diesel::Expression for WaitsForIndex {
    type SqlType = diesel::sql_types::Bool;
}

impl diesel::AppearsOnTable<b::bookmarks> for WaitsForIndex {}

impl diesel::SelectableExpression<b::bookmarks> for WaitsForIndex {}

impl<G> diesel::expression::ValidGrouping<G> for WaitsForIndex {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl diesel::query_builder::QueryFragment<diesel::pg::Pg> for WaitsForIndex {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::pg::Pg>,
    ) -> QueryResult<()> {
        out.push_sql(
            "EXISTS (SELECT 1 FROM search_pending p \
             WHERE p.tenant_id = bookmarks.tenant_id AND p.bookmark_id = bookmarks.id)",
        );
        Ok(())
    }
}

/// `id IN (the tenant's bookmarks matching the web-search query q)`: indexed documents
/// through the GIN index, plus rows still waiting for the reindexer, whose document is
/// computed on the fly by the same function (a stale document of a waiting row is not
/// trusted). Cost follows the matches and the backlog, not the tenant's size.
fn search_hits(tenant: &str, q: &str) -> SearchFragment {
    SearchFragment {
        sql: &[
            "bookmarks.id IN (\
             SELECT s.bookmark_id FROM bookmark_search s \
             WHERE s.tenant_id = ",
            " AND s.document @@ websearch_to_tsquery('english', ",
            ") AND NOT EXISTS (SELECT 1 FROM search_pending p \
             WHERE p.tenant_id = s.tenant_id AND p.bookmark_id = s.bookmark_id) \
             UNION ALL \
             SELECT p.bookmark_id FROM search_pending p \
             JOIN bookmarks k ON k.tenant_id = p.tenant_id AND k.id = p.bookmark_id \
             WHERE p.tenant_id = ",
            " AND bookmark_document(k.title, k.url, k.notes, k.tags) \
             @@ websearch_to_tsquery('english', ",
            "))",
        ],
        binds: vec![
            tenant.to_owned(),
            q.to_owned(),
            tenant.to_owned(),
            q.to_owned(),
        ],
    }
}

/// Applies a validated patch; `None` when the tenant has no such bookmark.
pub async fn update(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
    patch: &BookmarkPatch,
) -> Result<Option<Bookmark>, StoreError> {
    if patch.is_empty() {
        return Ok(get(conn, tenant, id).await?);
    }
    let result = PatchStatement {
        tenant: tenant.as_str(),
        id,
        patch,
        now: Utc::now(),
    }
    .get_result(conn)
    .await
    .optional();
    match result {
        Ok(updated) => Ok(updated),
        Err(DbError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            let url = patch.url.as_deref().unwrap_or_default();
            Err(duplicate_of(conn, tenant, url).await)
        }
        Err(e) => Err(StoreError::Db(e)),
    }
}

/// `UPDATE … SET column = COALESCE(new value, column), … RETURNING the row`: one statement
/// text whatever the patch holds, so each connection prepares it once (diesel never caches
/// an `UPDATE` of its own: its SET list changes with the fields given).
struct PatchStatement<'a> {
    tenant: &'a str,
    id: Uuid,
    patch: &'a BookmarkPatch,
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
        use diesel::sql_types::{Array, Nullable, Text, Timestamptz};
        out.push_sql("UPDATE bookmarks SET url = COALESCE(");
        out.push_bind_param::<Nullable<Text>, _>(&self.patch.url)?;
        out.push_sql(", url), title = COALESCE(");
        out.push_bind_param::<Nullable<Text>, _>(&self.patch.title)?;
        out.push_sql(", title), notes = COALESCE(");
        out.push_bind_param::<Nullable<Text>, _>(&self.patch.notes)?;
        out.push_sql(", notes), tags = COALESCE(");
        out.push_bind_param::<Nullable<Array<Text>>, _>(&self.patch.tags)?;
        out.push_sql(", tags), updated_at = ");
        out.push_bind_param::<Timestamptz, _>(&self.now)?;
        out.push_sql(" WHERE tenant_id = ");
        out.push_bind_param::<Text, _>(&self.tenant)?;
        out.push_sql(" AND id = ");
        out.push_bind_param::<diesel::sql_types::Uuid, _>(&self.id)?;
        // The columns in `Bookmark`'s order, which its `Queryable` reads them in.
        out.push_sql(" RETURNING tenant_id, id, url, title, notes, tags, created_at, updated_at");
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

/// A position in the all-tenants order: newest first by creation time, ties by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub created_at: chrono::DateTime<Utc>,
    pub id: Uuid,
}

impl Position {
    pub fn of(b: &Bookmark) -> Self {
        Self {
            created_at: b.created_at,
            id: b.id,
        }
    }
}

/// Which way to read from a position: `Older` is the next page, `Newer` the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Older,
    Newer,
}

/// A page of every tenant's bookmarks on one shard (the admin's cross-shard browse).
#[derive(Debug, Clone, Default)]
pub struct AllTenantsQuery {
    pub tenant: Option<String>,
    pub tag: Option<String>,
    /// Start after this position, going `direction`; from the newest when absent.
    pub from: Option<(Position, Direction)>,
    pub limit: i64,
}

/// Up to `limit` bookmarks of any tenant in `(created_at, id)` order: newest first, or
/// oldest first when reading `Newer` from a position. Served by the
/// `bookmarks_created_at_id` index.
pub async fn all_tenants(
    conn: &mut AsyncPgConnection,
    query: &AllTenantsQuery,
) -> Result<Vec<Bookmark>, DbError> {
    use diesel::dsl::sql;
    use diesel::sql_types::{Bool, Timestamptz, Uuid as SqlUuid};
    let mut sql_query = b::bookmarks
        .select(Bookmark::as_select())
        .limit(query.limit)
        .into_boxed();
    sql_query = match query.from {
        None | Some((_, Direction::Older)) => sql_query.order((b::created_at.desc(), b::id.desc())),
        Some((_, Direction::Newer)) => sql_query.order((b::created_at.asc(), b::id.asc())),
    };
    if let Some((at, direction)) = query.from {
        // A row comparison, so that ties on created_at continue by id without gaps.
        let op = match direction {
            Direction::Older => "<",
            Direction::Newer => ">",
        };
        sql_query = sql_query.filter(
            sql::<Bool>(&format!("(created_at, id) {op} ("))
                .bind::<Timestamptz, _>(at.created_at)
                .sql(", ")
                .bind::<SqlUuid, _>(at.id)
                .sql(")"),
        );
    }
    if let Some(tenant) = &query.tenant {
        sql_query = sql_query.filter(b::tenant_id.eq(tenant.clone()));
    }
    if let Some(tag) = &query.tag {
        sql_query = sql_query.filter(b::tags.contains(vec![tag.clone()]));
    }
    sql_query.load(conn).await
}

/// Whole-shard counts for the cross-shard stats endpoint.
pub async fn shard_counts(conn: &mut AsyncPgConnection) -> Result<(i64, i64), DbError> {
    #[derive(QueryableByName)]
    struct Counts {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        bookmarks: i64,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        tenants: i64,
    }
    let c: Counts = diesel::sql_query(
        "SELECT count(*) AS bookmarks, count(DISTINCT tenant_id) AS tenants FROM bookmarks",
    )
    .get_result(conn)
    .await?;
    Ok((c.bookmarks, c.tenants))
}

/// How many of the tenant's bookmarks carry each tag, most used first: the counts the
/// reindexer maintains (as fresh as the index, see `crate::search`).
pub async fn tag_counts(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
) -> Result<Vec<(String, i64)>, DbError> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Text)]
        tag: String,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        count: i64,
    }
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT tag, count FROM tenant_tags WHERE tenant_id = $1 \
         ORDER BY count DESC, tag LIMIT 100",
    )
    .bind::<diesel::sql_types::Text, _>(tenant.as_str())
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.tag, r.count)).collect())
}
