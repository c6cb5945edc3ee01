//! Pools give their connections back: one unused for `[database] pool_idle_timeout_ms` is
//! closed, so a replica holds connections for the shards it serves now, not as many as its
//! busiest moment needed on every shard it ever served.

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
