//! Reads across every tenant of a shard, for the admin page and the stats: a page of all
//! tenants' bookmarks in one order, and the shard's counts.

use chrono::Utc;
use diesel::prelude::*;
use diesel::result::Error as DbError;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::bookmarks::model::Bookmark;
use crate::bookmarks::schema::bookmarks::dsl as b;
use crate::tenancy::TenantId;
use uuid::Uuid;

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
