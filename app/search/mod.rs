//! Full-text search over bookmarks, maintained asynchronously.
//!
//! A bookmark write leaves a dirty marker in `search_pending` (a trigger, in the write's
//! own transaction); the shard's [`reindexer`] leader turns markers into `tsvector`
//! documents and per-tenant tag counts in batches; `q=` searches the documents and, for
//! rows still waiting, computes the same document on the fly, so nothing written is ever
//! unfindable. The SQL lives in the shard migration `create_search_index`.

pub mod reindexer;

use diesel::QueryableByName;
use diesel::sql_types::{Integer, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

/// Rebuilds `tenant`'s documents and tag counts on the connected shard from its rows;
/// returns how many documents it has now.
pub async fn reindex_tenant(
    conn: &mut AsyncPgConnection,
    tenant: &str,
) -> diesel::QueryResult<i32> {
    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = Integer)]
        n: i32,
    }
    // A whale's rebuild can take longer than a request may: background work is bounded
    // by its batch, not by the pool's statement timeout.
    let n: N = conn
        .transaction(async |c| {
            c.batch_execute("SET LOCAL statement_timeout = 0").await?;
            diesel::sql_query("SELECT search_reindex_tenant($1) AS n")
                .bind::<Text, _>(tenant)
                .get_result(c)
                .await
        })
        .await?;
    Ok(n.n)
}

/// Every tenant with rows or documents on the connected shard.
pub async fn tenants_on_shard(conn: &mut AsyncPgConnection) -> diesel::QueryResult<Vec<String>> {
    #[derive(QueryableByName)]
    struct T {
        #[diesel(sql_type = Text)]
        tenant_id: String,
    }
    let rows: Vec<T> = diesel::sql_query(
        "SELECT tenant_id FROM bookmarks UNION SELECT tenant_id FROM bookmark_search \
         ORDER BY tenant_id",
    )
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|t| t.tenant_id).collect())
}
