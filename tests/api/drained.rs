//! A drained shard (`slots = []`, no tenants): the first step of the resharding runbook
//! leaves one in the topology, and every part of the app must work with it there.

use std::time::Duration;

use serde_json::{Value, json};

use crate::moves::{Tool, count, step};
use crate::support::*;

const ADMIN: &str = "drained-admin-token-0123456789";

/// shard0 and shard1 split the slots; shard2 (a database of its own beside shard1's) has none.
async fn with_a_drained_shard() -> Layout {
    let mut layout = layout("[sharding]\ndirectory_router = true\ndirectory_cache_ttl_ms = 1000\n")
        .await
        .with_patient_connects();
    let (port, db) = port_of(&layout, "shard1");
    let db = format!("{db}_2");
    create_database(port, &db).await;
    layout.shards.push(("shard2".to_owned(), port, db, None));
    layout.slots = ["[\"0-8191\"]", "[\"8192-16383\"]", "[]"]
        .map(str::to_owned)
        .to_vec();
    layout
}

async fn admin_get(app: &TestApp, path: &str) -> reqwest::Response {
    let res = app.get(path).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    res
}

#[tokio::test]
async fn a_drained_shard_answers_every_endpoint_and_takes_a_tenant_and_gives_it_back() {
    let layout = with_a_drained_shard().await;
    let mut options = test_options("drained");
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(ADMIN).unwrap();
    let app = TestApp::spawn_with(layout.settings(), options).await;

    let up = eventually(Duration::from_secs(10), || async {
        matches!(app.get("/ready").send().await, Ok(r) if r.status() == 200)
    })
    .await;
    let ready = app.json("/ready").await;
    let shard2 = &ready["components"]["db:shard:shard2"];
    assert!(up, "ready with a drained shard: {ready}");
    assert_eq!(shard2["status"], "UP", "{ready}");
    assert_eq!(shard2["details"]["slots"], 0, "{ready}");

    let stats = app.json("/api/stats").await;
    let listed = stats["shards"].as_array().unwrap();
    let shard2 = listed.iter().find(|s| s["name"] == "shard2");
    assert!(
        shard2.is_some_and(|s| s["bookmarks"] == 0 && s["status"] == "up"),
        "{stats}"
    );

    let page = admin_get(&app, "/admin").await.text().await.unwrap();
    assert!(
        page.contains("data-shard=\"shard2\"") && page.contains("shard2 (0 slots)"),
        "the admin page has shard2's card and its place in the slot map's legend: {page}"
    );
    for path in ["/admin/api/shards", "/admin/api/slots"] {
        let body: Value = admin_get(&app, path).await.json().await.unwrap();
        assert!(body.to_string().contains("shard2"), "{path}: {body}");
    }
    admin_get(&app, "/admin/api/moves").await;

    let out = bookmarks_cli(&layout, &["migrate", "--shard", "shard2"]);
    assert!(
        out.status.success(),
        "migrate --shard shard2 (nothing left to apply): {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A tenant moved onto the drained shard, served, written, indexed there, then back.
    let tenant = unique("to-shard2");
    let home = hash_shard(&app.settings, &tenant);
    for i in 0..3 {
        app.create(
            &tenant,
            json!({"url": format!("https://drained.example/{i}")}),
        )
        .await;
    }
    let tool = Tool::new(&layout);
    let done = tool.ok(&step(
        "run",
        &home,
        "shard2",
        &tenant,
        &["--confirm", "--grace", "0s"],
    ));
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(count(&layout, "shard2", &tenant).await, 3);
    assert_eq!(count(&layout, &home, &tenant).await, 0);
    let on_shard2 = eventually(Duration::from_secs(5), || async {
        served_shard(&app, &tenant).await.as_deref() == Ok("shard2")
    })
    .await;
    assert!(on_shard2, "the app serves the tenant from shard2");
    let created = app
        .create(
            &tenant,
            json!({"url": "https://drained.example/new", "notes": "written on the third shard"}),
        )
        .await;
    assert_eq!(created["shard"], "shard2", "{created}");
    let indexed = eventually(Duration::from_secs(5), || async {
        let found = app.get_json("/api/bookmarks?q=third", &tenant).await;
        found["items"][0]["id"] == created["id"] && found["items"][0]["indexed"] == true
    })
    .await;
    assert!(indexed, "shard2's reindexer indexed the new bookmark");
    let key = unique("reindex-shard2");
    let out = bookmarks_cli(
        &layout,
        &["jobs", "enqueue", "reindex_shard", "shard2", "--key", &key],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran = eventually(Duration::from_secs(10), || async {
        job_outcome(&layout, &key)
            .await
            .first()
            .map(|r| r[0].as_deref())
            == Some(Some("done"))
    })
    .await;
    assert!(
        ran,
        "a job on shard2 ran: {:?}",
        job_outcome(&layout, &key).await
    );

    let done = tool.ok(&step(
        "run",
        "shard2",
        &home,
        &tenant,
        &["--confirm", "--grace", "0s"],
    ));
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(count(&layout, &home, &tenant).await, 4);
    assert_eq!(count(&layout, "shard2", &tenant).await, 0);
    let back = eventually(Duration::from_secs(5), || async {
        served_shard(&app, &tenant).await.as_deref() == Ok(home.as_str())
    })
    .await;
    assert!(back, "and serves it from {home} again");
    let stats = app.json("/api/stats").await;
    assert!(
        stats["shards"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "shard2" && s["bookmarks"] == 0),
        "shard2 is empty again: {stats}"
    );
    app.stop().await;
}
