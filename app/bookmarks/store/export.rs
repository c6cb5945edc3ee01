//! The pages an export reads: a tenant's bookmarks in id order (oldest first), all of them
//! or those of one collection, a keyset page at a time.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use crate::bookmarks::model::Bookmark;
use crate::bookmarks::schema::bookmarks::dsl as b;
use crate::tenancy::TenantId;

/// Which of the tenant's bookmarks a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filed {
    All,
    /// Filed in this collection (not its subtree).
    In(Uuid),
    /// In no collection.
    Loose,
}

/// Up to `limit` of the tenant's bookmarks after `after`, by id.
pub async fn page(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    filed: Filed,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Bookmark>, diesel::result::Error> {
    let mut query = b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .select(Bookmark::as_select())
        .order(b::id.asc())
        .limit(limit)
        .into_boxed();
    if let Some(after) = after {
        query = query.filter(b::id.gt(after));
    }
    query = match filed {
        Filed::All => query,
        Filed::In(collection) => query.filter(b::collection_id.eq(collection)),
        Filed::Loose => query.filter(b::collection_id.is_null()),
    };
    query.load(conn).await
}
