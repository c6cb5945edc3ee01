//! Renaming a tag across a tenant's bookmarks: a bounded batch per transaction, so that a
//! tag on a whale's every bookmark never holds one transaction open over all of them.

use chrono::{DateTime, Utc};
use diesel::result::Error as DbError;
use diesel::sql_types::{BigInt, Bool, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::bookmarks::model::TagRename;
use crate::tenancy::TenantId;

/// Most bookmarks one rename changes: one shard transaction's worth.
pub const RENAME_BATCH: i64 = 1000;

/// What one rename did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, diesel::QueryableByName)]
pub struct Renamed {
    /// Bookmarks that carried `from` and now carry `to`.
    #[diesel(sql_type = BigInt)]
    pub renamed: i64,
    /// Whether bookmarks with `from` remain (more than one batch had it): send it again.
    #[diesel(sql_type = Bool)]
    pub more: bool,
}

/// Replaces `from` by `to` in at most [`RENAME_BATCH`] of the tenant's bookmarks, oldest
/// first, in one statement (one transaction). Tags keep their order; a bookmark that
/// already had `to` keeps its first occurrence only. The bookmarks' search documents are
/// queued for the reindexer by the table's trigger, as for any write.
pub async fn rename(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    rename: &TagRename,
    now: DateTime<Utc>,
) -> Result<Renamed, DbError> {
    // One more than the batch is locked and counted, to tell whether any remain.
    diesel::sql_query(
        "WITH batch AS ( \
             SELECT id FROM bookmarks \
             WHERE tenant_id = $1 AND tags @> ARRAY[$2::text] \
             ORDER BY id LIMIT $4 + 1 FOR UPDATE \
         ), changed AS ( \
             UPDATE bookmarks k SET \
                 tags = ARRAY( \
                     SELECT t FROM unnest(array_replace(k.tags, $2, $3)) WITH ORDINALITY AS u(t, n) \
                     GROUP BY t ORDER BY min(n)), \
                 updated_at = $5 \
             WHERE k.tenant_id = $1 AND k.id IN (SELECT id FROM batch ORDER BY id LIMIT $4) \
             RETURNING 1 \
         ) \
         SELECT (SELECT count(*) FROM changed) AS renamed, \
                (SELECT count(*) FROM batch) > $4 AS more",
    )
    .bind::<Text, _>(tenant.as_str())
    .bind::<Text, _>(&rename.from)
    .bind::<Text, _>(&rename.to)
    .bind::<BigInt, _>(RENAME_BATCH)
    .bind::<Timestamptz, _>(now)
    .get_result(conn)
    .await
}
