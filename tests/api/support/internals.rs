//! Named looks into the framework's own tables (the directory, the tenant guards, the
//! moves, the job queue and the search index), so that a test says what it checks rather
//! than how those tables are laid out. Each answers as [`sql`] does: rows of text columns.

use super::{Layout, port_of, sql};

/// Rows of text columns, as [`sql`] returns them.
pub type Rows = Vec<Vec<Option<String>>>;

pub async fn on_control(layout: &Layout, query: &str) -> Rows {
    sql(layout.control.0, &layout.control.1, query).await
}

async fn on_shard(layout: &Layout, shard: &str, query: &str) -> Rows {
    let (port, db) = port_of(layout, shard);
    sql(port, &db, query).await
}

/// The first column of the first row (empty when there is none).
pub fn first(rows: &Rows) -> String {
    rows.first()
        .and_then(|r| r.first())
        .cloned()
        .flatten()
        .unwrap_or_default()
}

/// `(tenant, state)` of every tenant guard row on a shard, by tenant.
pub async fn tenant_guards(layout: &Layout, shard: &str) -> Rows {
    on_shard(
        layout,
        shard,
        "SELECT tenant_key, state FROM _autumn_tenant_guard ORDER BY tenant_key",
    )
    .await
}

/// How many moves the control database has recorded.
pub async fn recorded_moves(layout: &Layout) -> Rows {
    on_control(layout, "SELECT count(*) FROM tenant_moves").await
}

/// Records an unfinished (copying) move of `tenant` by hand, as a killed `move_slot` would
/// have left it.
pub async fn record_unfinished_move(layout: &Layout, tenant: &str, from: &str, to: &str) {
    on_control(
        layout,
        &format!(
            "INSERT INTO tenant_moves (tenants, from_shard, to_shard, state) \
             VALUES ('{{{tenant}}}', '{from}', '{to}', 'copying')"
        ),
    )
    .await;
}

/// `(state, shard the result names)` of the job with this idempotency key.
pub async fn job_outcome(layout: &Layout, idempotency_key: &str) -> Rows {
    on_control(
        layout,
        &format!(
            "SELECT state, result->>'shard' FROM autumn_jobs \
             WHERE idempotency_key = '{idempotency_key}'"
        ),
    )
    .await
}

/// The shard `tenant`'s directory row names (no row: no rows).
pub async fn directory_row(layout: &Layout, tenant: &str) -> Rows {
    on_control(
        layout,
        &format!("SELECT shard_name FROM _autumn_shard_directory WHERE tenant_key = '{tenant}'"),
    )
    .await
}

/// `(shard, note)` of `tenant`'s directory row.
pub async fn directory_row_with_note(layout: &Layout, tenant: &str) -> Rows {
    on_control(
        layout,
        &format!(
            "SELECT shard_name, note FROM _autumn_shard_directory WHERE tenant_key = '{tenant}'"
        ),
    )
    .await
}

/// When `tenant`'s directory row last changed.
pub async fn directory_row_changed_at(layout: &Layout, tenant: &str) -> Rows {
    on_control(
        layout,
        &format!("SELECT updated_at FROM _autumn_shard_directory WHERE tenant_key = '{tenant}'"),
    )
    .await
}

/// Places `tenant` on `shard` with a raw SQL write, as an operator in psql would.
pub async fn pin_by_sql(layout: &Layout, tenant: &str, shard: &str) {
    on_control(layout, &pin_sql(tenant, shard)).await;
}

/// The raw SQL write of [`pin_by_sql`].
pub fn pin_sql(tenant: &str, shard: &str) -> String {
    format!(
        "INSERT INTO _autumn_shard_directory (tenant_key, shard_name) VALUES ('{tenant}', '{shard}') \
         ON CONFLICT (tenant_key) DO UPDATE SET shard_name = EXCLUDED.shard_name"
    )
}

/// Removes `tenant`'s directory row with a raw SQL write.
pub async fn unpin_by_sql(layout: &Layout, tenant: &str) {
    on_control(
        layout,
        &format!("DELETE FROM _autumn_shard_directory WHERE tenant_key = '{tenant}'"),
    )
    .await;
}

/// Search documents of `tenant` on a shard.
pub async fn search_documents(layout: &Layout, shard: &str, tenant: &str) -> String {
    first(
        &on_shard(
            layout,
            shard,
            &format!("SELECT count(*) FROM bookmark_search WHERE tenant_id = '{tenant}'"),
        )
        .await,
    )
}

/// Rows of `tenant` on a shard still waiting for the reindexer.
pub async fn search_backlog(layout: &Layout, shard: &str, tenant: &str) -> String {
    first(
        &on_shard(
            layout,
            shard,
            &format!("SELECT count(*) FROM search_pending WHERE tenant_id = '{tenant}'"),
        )
        .await,
    )
}

/// Rows of every tenant on a shard still waiting for the reindexer.
pub async fn whole_search_backlog(layout: &Layout, shard: &str) -> String {
    first(&on_shard(layout, shard, "SELECT count(*) FROM search_pending").await)
}

/// The kept count of `tag` among `tenant`'s bookmarks on a shard (`None`: no count kept).
pub async fn tag_count(layout: &Layout, shard: &str, tenant: &str, tag: &str) -> String {
    first(
        &on_shard(
            layout,
            shard,
            &format!(
                "SELECT count FROM tenant_tags WHERE tenant_id = '{tenant}' AND tag = '{tag}'"
            ),
        )
        .await,
    )
}

/// How many tags of `tenant` a shard keeps counts for.
pub async fn tag_counts_kept(layout: &Layout, shard: &str, tenant: &str) -> String {
    first(
        &on_shard(
            layout,
            shard,
            &format!("SELECT count(*) FROM tenant_tags WHERE tenant_id = '{tenant}'"),
        )
        .await,
    )
}

/// How many directory rows `tenant` has (0 or 1).
pub async fn directory_row_count(layout: &Layout, tenant: &str) -> Rows {
    on_control(
        layout,
        &format!("SELECT count(*) FROM _autumn_shard_directory WHERE tenant_key = '{tenant}'"),
    )
    .await
}

/// Ends the control listener's session; returns the server's time just before.
pub async fn cut_control_listener(layout: &Layout) -> String {
    cut_control_listener_then(layout, "").await
}

/// Ends the control listener's session and runs `then` in the same round trip, so that
/// `then` (a change the listener must not hear of) is committed while the listener is away,
/// however slow the machine: its first reconnect waits 250 ms. Returns the server's time
/// before `then`, and waits until the ended session is gone (a new one may already be up).
pub async fn cut_control_listener_then(layout: &Layout, then: &str) -> String {
    let listener = format!(
        "FROM pg_stat_activity WHERE application_name = 'bookmarks-directory-listener' \
         AND datname = '{}'",
        layout.control.1
    );
    let killed = on_control(
        layout,
        &format!("SELECT now()::text, pid::text, pg_terminate_backend(pid) {listener}; {then}"),
    )
    .await;
    assert_eq!(killed.len(), 1, "exactly one listener session");
    let pid = killed[0][1].clone().unwrap();
    let gone = crate::common::eventually(std::time::Duration::from_secs(5), || async {
        first(
            &on_control(
                layout,
                &format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}"),
            )
            .await,
        ) == "0"
    })
    .await;
    assert!(gone, "the listener's session ended");
    killed[0][0].clone().unwrap()
}

/// Whether the control listener has a session that started after `instant` (server time).
/// A listener between sessions (its ping timed out on a loaded machine and it is
/// reconnecting) has none for a moment, so this waits up to 5 s for one to appear.
pub async fn control_listener_started_after(layout: &Layout, instant: &str) -> bool {
    crate::common::eventually(std::time::Duration::from_secs(5), || async {
        let rows = on_control(
            layout,
            &format!(
                "SELECT backend_start > '{instant}'::timestamptz FROM pg_stat_activity \
                 WHERE application_name = 'bookmarks-directory-listener' AND datname = '{}'",
                layout.control.1
            ),
        )
        .await;
        rows == vec![vec![Some("t".to_owned())]]
    })
    .await
}

/// Every stored key hash of `tenant`, hex, and the table's other text columns.
pub async fn stored_key_columns(layout: &Layout, tenant: &str) -> Rows {
    on_control(
        layout,
        &format!(
            "SELECT encode(key_hash, 'hex'), octet_length(key_hash)::text, coalesce(note, '') \
             FROM tenant_api_keys WHERE tenant_key = '{tenant}'"
        ),
    )
    .await
}
