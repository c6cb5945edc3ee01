//! Tenant isolation the shards enforce: a tenant's session runs as the app's role, which is
//! neither a superuser nor exempt from row-level security, and sees and changes only the rows
//! of the tenant it declared, whatever its statements say; the app refuses to start when its
//! shard connections would be exempt. On the control database the same role writes the
//! framework's tables and changes no schema.

use std::sync::Arc;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Text};
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

use crate::support::*;
use bookmarks_sharded::pg::pool::{PgConn, build_pool};
use bookmarks_sharded::sharding::access::Shards;
use bookmarks_sharded::sharding::replicas::ReplicaStates;
use bookmarks_sharded::sharding::row_security::{self, RowScope};
use bookmarks_sharded::sharding::session::{Primary, SessionError};
use bookmarks_sharded::sharding::{PinRouter, ShardSet};
use bookmarks_sharded::startup::Application;

#[derive(QueryableByName)]
struct Tenant {
    #[diesel(sql_type = Text)]
    tenant_id: String,
}

#[derive(QueryableByName)]
struct Role {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Bool)]
    privileged: bool,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The request path's access to the shards, built as the app builds it.
fn shards_of(layout: &Layout) -> Shards {
    let topology = Arc::new(layout.settings().topology.clone());
    let set = Arc::new(ShardSet::new(topology).unwrap());
    let router = Arc::new(PinRouter::from_shard_set(&set));
    let replicas = Arc::new(ReplicaStates::new(&set));
    Shards::new(set, router, replicas)
}

fn insert(tenant: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "INSERT INTO bookmarks (tenant_id, id, url) \
                 VALUES ('{tenant}', gen_random_uuid(), 'https://{tenant}.example/{i}');"
            )
        })
        .collect()
}

#[tokio::test]
async fn an_unfiltered_select_or_update_through_a_tenant_session_touches_only_the_declared_tenants_rows()
 {
    let layout = layout("").await;
    migrated(&layout.settings()).await;
    let shards = shards_of(&layout);
    let shard = shards.route("acme").await.unwrap().shard;
    let name = shards.set().get(shard).name().to_owned();
    let (_, port, db, _) = layout.shards.iter().find(|s| s.0 == name).unwrap().clone();
    // Two tenants on one shard, written behind the app's back by the test's superuser.
    sql(port, &db, &(insert("acme", 3) + &insert("globex", 4))).await;

    let mut session = shards.session::<Primary>("acme", None, None).await.unwrap();
    let seen: Vec<Tenant> = session
        .read(async |c| {
            diesel::sql_query("SELECT tenant_id FROM bookmarks")
                .load(c)
                .await
        })
        .await
        .unwrap();
    assert_eq!(
        seen.len(),
        3,
        "an unfiltered SELECT sees the declared tenant's rows"
    );
    assert!(seen.iter().all(|t| t.tenant_id == "acme"));
    let changed = session
        .write(async |c| {
            diesel::sql_query("UPDATE bookmarks SET title = 'renamed'")
                .execute(c)
                .await
        })
        .await
        .unwrap();
    assert_eq!(
        changed, 3,
        "an unfiltered UPDATE changes the declared tenant's rows"
    );
    let untouched = sql(
        port,
        &db,
        "SELECT count(*) FROM bookmarks WHERE tenant_id = 'globex' AND title = ''",
    )
    .await;
    assert_eq!(
        first(&untouched),
        "4",
        "the other tenant's rows are unchanged"
    );

    // Writing another tenant's row is refused by the shard, not by the app.
    let refused = session
        .write(async |c| {
            diesel::sql_query(insert("globex", 1).trim_end_matches(';'))
                .execute(c)
                .await
        })
        .await;
    match refused {
        Err(SessionError::Shard(e)) => {
            assert!(format!("{e:?}").contains("row-level security"), "{e:?}")
        }
        other => panic!("another tenant's row was written: {other:?}"),
    }

    // The session's connection acts as the app's role, not the login in the URL.
    let role: Role = session
        .read(async |c| {
            diesel::sql_query(
                "SELECT current_user::text AS name, rolsuper OR rolbypassrls AS privileged \
                 FROM pg_roles WHERE rolname = current_user",
            )
            .get_result(c)
            .await
        })
        .await
        .unwrap();
    assert_eq!(role.name, row_security::APP_ROLE);
    assert!(
        !role.privileged,
        "the app's role is a superuser or bypasses RLS"
    );

    // A connection that declared no tenant sees nothing.
    let shard = shards.set().get(shard);
    let mut conn = shard.primary_pool().get().await.unwrap();
    row_security::declare(&mut conn, RowScope::NoTenant)
        .await
        .unwrap();
    let none: Count = diesel::sql_query("SELECT count(*) AS n FROM bookmarks")
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(none.n, 0, "a connection with no tenant declared saw rows");
    row_security::declare(&mut conn, RowScope::ReadEveryTenant)
        .await
        .unwrap();
    let all: Count = diesel::sql_query("SELECT count(*) AS n FROM bookmarks")
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(all.n, 7, "a cross-tenant reader sees every tenant");
    let read_only = diesel::sql_query("DELETE FROM bookmarks")
        .execute(&mut conn)
        .await;
    let refused = format!(
        "{:?}",
        read_only.expect_err("a cross-tenant reader deleted rows")
    );
    assert!(refused.contains("permission denied"), "{refused}");
}

#[tokio::test]
async fn a_pooled_connection_declared_for_one_tenant_then_another_sees_only_the_one_declared_last()
{
    let layout = layout("").await;
    let settings = layout.settings();
    migrated(&settings).await;
    let (_, port, db, _) = layout.shards[0].clone();
    sql(port, &db, &(insert("acme", 3) + &insert("globex", 4))).await;
    let spec = &settings.topology.shards[0];
    // One connection, so every checkout gets the one the previous checkout declared on.
    let pool = build_pool(
        &spec.primary_url,
        1,
        settings.topology.pool_bounds(),
        "shard0",
        Some(&row_security::run_as_app_role()),
    )
    .unwrap();
    let count = async |conn: &mut PgConn| -> i64 {
        let c: Count = diesel::sql_query("SELECT count(*) AS n FROM bookmarks")
            .get_result(conn)
            .await
            .unwrap();
        c.n
    };
    for (tenant, rows) in [("acme", 3), ("acme", 3), ("globex", 4), ("acme", 3)] {
        let mut conn = pool.get().await.unwrap();
        row_security::declare(&mut conn, RowScope::Tenant(tenant))
            .await
            .unwrap();
        assert_eq!(count(&mut conn).await, rows, "declared {tenant}");
    }

    // The declaration the connection already holds is not sent again: a setting changed
    // behind the pool's back stays (which is why every change goes through `settle`) …
    let mut conn = pool.get().await.unwrap();
    conn.batch_execute("SELECT set_config('app.tenant_id', 'globex', false)")
        .await
        .unwrap();
    row_security::declare(&mut conn, RowScope::Tenant("acme"))
        .await
        .unwrap();
    assert_eq!(
        count(&mut conn).await,
        4,
        "the same declaration was sent twice"
    );
    // … until the connection is told to forget it.
    conn.unsettle();
    row_security::declare(&mut conn, RowScope::Tenant("acme"))
        .await
        .unwrap();
    assert_eq!(count(&mut conn).await, 3);
}

#[tokio::test]
async fn every_shard_table_with_a_tenant_column_has_forced_row_level_security() {
    let layout = layout("").await;
    migrated(&layout.settings()).await;
    let (_, port, db, _) = layout.shards[0].clone();
    let unguarded = sql(
        port,
        &db,
        "SELECT c.relname FROM pg_class c \
         JOIN information_schema.columns i ON i.table_name = c.relname AND i.column_name = 'tenant_id' \
         WHERE c.relkind = 'r' AND i.table_schema = 'public' \
         AND NOT (c.relrowsecurity AND c.relforcerowsecurity)",
    )
    .await;
    assert!(
        unguarded.is_empty(),
        "tenant tables without RLS: {unguarded:?}"
    );
    let guarded = sql(
        port,
        &db,
        "SELECT count(*) FROM pg_class WHERE relforcerowsecurity AND relkind = 'r'",
    )
    .await;
    assert_eq!(first(&guarded), "7");
}

#[tokio::test]
async fn control_connections_act_as_the_app_role_which_writes_rows_but_changes_no_schema_and_no_secret()
 {
    let l = layout("").await;
    migrated(&l.settings()).await;
    let topology = l.settings().topology.clone();
    let control = row_security::control_pool(&topology, 1).unwrap();
    let mut conn = control.get().await.unwrap();
    let role: Role = diesel::sql_query(
        "SELECT current_user::text AS name, rolsuper OR rolbypassrls AS privileged \
         FROM pg_roles WHERE rolname = current_user",
    )
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(role.name, row_security::APP_ROLE);
    assert!(!role.privileged, "control connections act as a superuser");

    // What the app does there: rows in the framework's tables.
    conn.batch_execute(
        "INSERT INTO _autumn_shard_directory (tenant_key, shard_name) VALUES ('acme', 'shard0'); \
         DELETE FROM _autumn_shard_directory WHERE tenant_key = 'acme'",
    )
    .await
    .unwrap();
    // What it must not: the schema, the migrations' record, the generated secrets.
    for refused in [
        "CREATE TABLE stolen (x int)",
        "DROP TABLE autumn_jobs",
        "UPDATE _autumn_secrets SET value = 'chosen'",
        "DELETE FROM __diesel_schema_migrations",
    ] {
        let outcome = conn.batch_execute(refused).await;
        let why = format!("{:?}", outcome.expect_err(refused));
        assert!(
            why.contains("permission denied") || why.contains("must be owner"),
            "{refused}: {why}"
        );
    }

    // A control database not migrated yet is worked as the login, even where another
    // database on the same server has created the role already: acting as it there would be
    // refused every table.
    let (port, db) = &l.control;
    let bare = format!("{db}_bare");
    create_database(*port, &bare).await;
    let mut unmigrated = l.settings().topology.clone();
    unmigrated.control_url = bookmarks_sharded::pg::db_url::DbUrl::parse(
        &unmigrated
            .control_url
            .expose()
            .replace(&format!("/{db}"), &format!("/{bare}")),
    )
    .unwrap();
    let pool = row_security::control_pool(&unmigrated, 1).unwrap();
    let role: Role = diesel::sql_query(
        "SELECT current_user::text AS name, rolsuper OR rolbypassrls AS privileged \
         FROM pg_roles WHERE rolname = current_user",
    )
    .get_result(&mut pool.get().await.unwrap())
    .await
    .unwrap();
    assert_ne!(role.name, row_security::APP_ROLE);

    // And the running app says so.
    let app = TestApp::spawn(l.settings(), "control-role").await;
    let ready = app.json("/ready").await;
    assert!(
        ready["components"]["db:control"]["details"]["primary"]
            .as_str()
            .is_some_and(|d| d.ends_with("acting as bookmarks_app")),
        "{ready}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_app_refuses_to_start_when_its_shard_role_bypasses_row_level_security() {
    // Servers of its own: roles belong to a server, and every other test's app uses them.
    let (_main, own, layout) = split_servers("bookmarks-rls-net").await;
    migrated(&layout.settings()).await;
    sql(own.port, "shard1", "ALTER ROLE bookmarks_app BYPASSRLS").await;

    let refused = Application::build(layout.settings(), test_options("bypass")).await;
    let why = format!("{:#}", refused.err().expect("the app started"));
    assert!(why.contains("shard shard1"), "{why}");
    assert!(why.contains("bypasses row-level security"), "{why}");

    let mut allowed = test_options("allowed");
    allowed.allow_superuser = true;
    assert!(Application::build(layout.settings(), allowed).await.is_ok());
}

#[tokio::test]
async fn the_search_index_step_exempt_from_the_policies_answers_only_for_the_declared_tenant() {
    let layout = layout("").await;
    let settings = layout.settings();
    migrated(&settings).await;
    let (_, port, db, _) = layout.shards[0].clone();
    sql(
        port,
        &db,
        "INSERT INTO bookmark_search (tenant_id, bookmark_id, document) VALUES \
         ('acme', gen_random_uuid(), to_tsvector('english', 'rocket')), \
         ('globex', gen_random_uuid(), to_tsvector('english', 'rocket'))",
    )
    .await;
    let pool = build_pool(
        &settings.topology.shards[0].primary_url,
        1,
        settings.topology.pool_bounds(),
        "shard0",
        Some(&row_security::run_as_app_role()),
    )
    .unwrap();
    let mut conn = pool.get().await.unwrap();
    let mut matches = async |scope: RowScope<'_>, asked: &str| -> i64 {
        row_security::declare(&mut conn, scope).await.unwrap();
        let c: Count = diesel::sql_query(format!(
            "SELECT count(*) AS n FROM search_matches('{asked}', 'rocket')"
        ))
        .get_result(&mut *conn)
        .await
        .unwrap();
        c.n
    };
    assert_eq!(matches(RowScope::Tenant("acme"), "acme").await, 1);
    // It bypasses the policies, so it applies their rule itself.
    assert_eq!(
        matches(RowScope::Tenant("acme"), "globex").await,
        0,
        "another tenant than the declared one"
    );
    assert_eq!(
        matches(RowScope::NoTenant, "acme").await,
        0,
        "no tenant declared"
    );
    // Nobody else may call it: a reader (every tenant's rows, read only) is refused.
    row_security::declare(&mut conn, RowScope::ReadEveryTenant)
        .await
        .unwrap();
    let refused = diesel::sql_query("SELECT count(*) AS n FROM search_matches('acme', 'rocket')")
        .get_result::<Count>(&mut *conn)
        .await;
    assert!(refused.is_err(), "a reader may not call it");
}
