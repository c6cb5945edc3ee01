//! Connections are budgeted: one unused for `[database] pool_idle_timeout_ms` is closed, so
//! a replica holds connections for the shards it serves now, not as many as its busiest
//! moment needed on every shard it ever served (readiness probes included); and a topology
//! whose processes could open more than a server allows is refused before it serves.

use std::time::Duration;

use crate::support::*;
use serde_json::json;

/// The open connections of a shard's primary pool, as `/metrics` reports them.
async fn pool_size(app: &TestApp, shard: &str) -> usize {
    let text = app.metrics_text().await;
    let series = format!(r#"db_pool_connections{{shard="{shard}",role="primary",state="size"}} "#);
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_shard_pool_left_idle_closes_its_connections() {
    let layout = layout("pool_idle_timeout_ms = 400").await;
    let shard = hash_shard(&layout.settings(), "idle-corp");
    let app = TestApp::spawn(layout.settings(), "idle-pools").await;
    let writes = (0..8).map(|i| {
        app.create(
            "idle-corp",
            json!({ "url": format!("https://idle.example/{i}") }),
        )
    });
    futures::future::join_all(writes).await;
    assert!(
        pool_size(&app, &shard).await >= 1,
        "the writes opened no connection"
    );

    let drained = eventually(Duration::from_secs(15), || async {
        pool_size(&app, &shard).await == 0
    })
    .await;
    assert!(drained, "{shard}'s pool kept connections nobody used");
    // And the next request opens one again.
    let res = app.get_as("/api/bookmarks", "idle-corp").await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn start_up_and_readiness_leave_the_pools_of_idle_shards_empty() {
    // The default idle timeout (60 s): no reaper comes by while this test runs.
    let layout = layout("").await;
    // A test's app answers no call from an earlier report: every call below probes.
    let app = TestApp::spawn(layout.settings(), "ready-idle-pools").await;
    for _ in 0..5 {
        let ready = app.json("/ready").await;
        assert_eq!(ready["status"], "UP", "{ready}");
        let shard1 = &ready["components"]["db:shard:shard1"]["details"]["primary"];
        assert!(
            shard1
                .as_str()
                .is_some_and(|d| d.contains("migration(s) applied")),
            "the first probe's findings stand: {ready}"
        );
    }
    for shard in ["shard0", "shard1"] {
        assert_eq!(
            pool_size(&app, shard).await,
            0,
            "start-up and five probes of a ready app left a connection in {shard}'s pool"
        );
    }
    // The first request opens one.
    app.create("idle-corp", json!({ "url": "https://idle.example/first" }))
        .await;
    let shard = hash_shard(&layout.settings(), "idle-corp");
    assert!(
        pool_size(&app, &shard).await >= 1,
        "the write opened no connection"
    );
}

#[tokio::test]
async fn a_topology_whose_processes_would_exhaust_a_server_is_refused_with_the_numbers() {
    // 100 processes × (8 + sessions) connections on each shard server: far over its 300.
    let layout = layout("processes = 100").await;
    let refused = match bookmarks_sharded::startup::Application::build(
        layout.settings(),
        test_options("over-budget"),
    )
    .await
    {
        Ok(_) => panic!("a server started over its connection budget"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        refused.contains("100 processes ×") && refused.contains("max_connections"),
        "{refused}"
    );

    let out = bookmarks_cli(&layout, &["check-config"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("OVER: the server allows 292"), "{said}");
    let mut three = layout.clone();
    three.extra = "processes = 3".to_owned();
    let fits = bookmarks_cli(&three, &["check-config"]);
    assert!(fits.status.success(), "{fits:?}");
    let said = String::from_utf8_lossy(&fits.stdout);
    assert!(
        said.contains("fits in 292 of max_connections 300"),
        "{said}"
    );
}
