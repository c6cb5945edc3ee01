//! A tenant's page of bookmarks: newest first below a cursor, by tag, or by a full-text
//! search that checks the newest rows one by one before it turns to the index; each row says
//! whether the search index has caught up with it.

use diesel::dsl::not;
use diesel::prelude::*;
use diesel::result::Error as DbError;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::{CollectionFilter, ListQuery, Listed, Page, StoreError};
use crate::bookmarks::model::Bookmark;
use crate::bookmarks::schema::bookmarks::dsl as b;
use crate::collections::store as collections;
use crate::tenancy::TenantId;
use uuid::Uuid;

/// Newest first by id (UUIDv7 ids sort by creation time), served by the primary key.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    query: &ListQuery,
) -> Result<Page, StoreError> {
    let within = match query.collection {
        None => None,
        Some(filter) => Some(filed_in(conn, tenant, filter).await?),
    };
    let within = within.as_deref();
    let sql = page_query(tenant, query, within).limit(query.limit + 1);
    let mut rows: Vec<(Bookmark, bool)> = match &query.q {
        None => sql.load(conn).await?,
        Some(q) => search_page(conn, tenant, query, within, q).await?,
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

/// The collections a filter covers; refused when the tenant has no such collection.
async fn filed_in(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    filter: CollectionFilter,
) -> Result<Vec<Uuid>, StoreError> {
    let ids = if filter.recursive {
        collections::subtree(conn, tenant, filter.id).await?.0
    } else {
        collections::get(conn, tenant, filter.id)
            .await?
            .map(|c| vec![c.id])
            .unwrap_or_default()
    };
    if ids.is_empty() {
        return Err(StoreError::NoSuchCollection);
    }
    Ok(ids)
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

/// The page's rows before any search: the tenant's, below the cursor, with the tag, in the
/// collections `within`, in the states asked for, newest first.
fn page_query<'a>(
    tenant: &'a TenantId,
    query: &'a ListQuery,
    within: Option<&'a [Uuid]>,
) -> PageQuery<'a> {
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
    if let Some(within) = within {
        sql = sql.filter(b::collection_id.eq_any(within));
    }
    // `unread` or `NOT unread` written out, not `unread = $1`: only a condition the planner
    // can see at prepare time lets a reused statement take the partial index.
    match query.unread {
        Some(true) => sql = sql.filter(b::unread),
        Some(false) => sql = sql.filter(not(b::unread)),
        None => {}
    }
    match query.archived {
        Some(true) => sql = sql.filter(b::archived),
        Some(false) => sql = sql.filter(not(b::archived)),
        None => {}
    }
    match query.favorite {
        Some(true) => sql = sql.filter(b::favorite),
        Some(false) => sql = sql.filter(not(b::favorite)),
        None => {}
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
    within: Option<&[Uuid]>,
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
    let mut recent = page_query(tenant, query, within)
        .filter(search_row(q))
        .limit(want);
    if let Some(edge) = edge {
        recent = recent.filter(b::id.ge(edge));
    }
    let mut rows: Vec<(Bookmark, bool)> = recent.load(conn).await?;
    if let Some(edge) = edge
        && (rows.len() as i64) < want
    {
        let older: Vec<(Bookmark, bool)> = page_query(tenant, query, within)
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
/// (while it waits for the reindexer) the same document computed on the fly. Each check is
/// a primary-key probe: `OFFSET 0` keeps the planner from turning it into one hashed
/// subquery over every document of the tenant that matches (a broad search's are all of
/// them), and under the tenant policies over every document of the tenant.
fn search_row(q: &str) -> SearchFragment {
    SearchFragment {
        sql: &[
            "(CASE WHEN EXISTS (SELECT 1 FROM search_pending p \
             WHERE p.tenant_id = bookmarks.tenant_id AND p.bookmark_id = bookmarks.id OFFSET 0) \
             THEN bookmark_document(bookmarks.title, bookmarks.url, bookmarks.notes, bookmarks.tags) \
             @@ websearch_to_tsquery('english', ",
            ") ELSE EXISTS (SELECT 1 FROM bookmark_search s \
             WHERE s.tenant_id = bookmarks.tenant_id AND s.bookmark_id = bookmarks.id \
             AND s.document @@ websearch_to_tsquery('english', ",
            ") OFFSET 0) END)",
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

/// `id = ANY(the tenant's bookmarks matching the web-search query q)`: indexed documents
/// through the GIN index, plus rows still waiting for the reindexer, whose document is
/// computed on the fly by the same function (a stale document of a waiting row is not
/// trusted). Cost follows the matches and the backlog, not the tenant's size. The index
/// step is `search_matches` (migrations/shard/…_search_index_step_under_its_own_rule): under
/// the tenant policies the planner could not use the index for `@@`. The matches come as
/// an array, which the planner uses under the policies too as the primary key's index
/// condition (`id = ANY ($0)`).
fn search_hits(tenant: &str, q: &str) -> SearchFragment {
    SearchFragment {
        sql: &[
            "bookmarks.id = ANY(ARRAY(\
             SELECT m.bookmark_id FROM search_matches(",
            ", ",
            ") AS m(bookmark_id) WHERE NOT EXISTS (SELECT 1 FROM search_pending p \
             WHERE p.tenant_id = ",
            " AND p.bookmark_id = m.bookmark_id) \
             UNION ALL \
             SELECT p.bookmark_id FROM search_pending p \
             JOIN bookmarks k ON k.tenant_id = p.tenant_id AND k.id = p.bookmark_id \
             WHERE p.tenant_id = ",
            " AND bookmark_document(k.title, k.url, k.notes, k.tags) \
             @@ websearch_to_tsquery('english', ",
            ")))",
        ],
        binds: vec![
            tenant.to_owned(),
            q.to_owned(),
            tenant.to_owned(),
            tenant.to_owned(),
            q.to_owned(),
        ],
    }
}
