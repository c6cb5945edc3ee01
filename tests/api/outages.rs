//! Failure behaviour with real servers stopped and started: a down shard degrades stats to
//! a partial answer and 503s only its own tenants; an unready replica follows its
//! `replica_fallback`. Each test owns its servers, because it stops them.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_stopped_shard_degrades_to_partial_answers_and_recovers_without_a_restart() {
    let (_main, doomed, layout) = split_servers("bookmarks-outage-net").await;
    let app = TestApp::spawn(layout.settings(), "outage").await;
    app.create("hooli", json!({"url": "https://h.example"}))
        .await; // shard0
    app.create("acme-corp", json!({"url": "https://a.example"}))
        .await; // shard1

    doomed.container.stop_with_timeout(Some(5)).await.unwrap();

    let started = Instant::now();
    let res = app.get("/api/stats").send().await.unwrap();
    let took = started.elapsed();
    assert_eq!(res.status(), 200);
    let stats: Value = res.json().await.unwrap();
    assert!(took < Duration::from_secs(3), "stats took {took:?}");
    assert_eq!(stats["shards"][0]["status"], "up");
    assert_eq!(stats["shards"][0]["bookmarks"], 1);
    assert_eq!(stats["shards"][1]["status"], "down");
    assert_eq!(stats["shards"][1]["name"], "shard1");
    assert!(stats["shards"][1]["error"].is_string());

    let started = Instant::now();
    let res = app.get_as("/api/bookmarks", "acme-corp").await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "503 took {:?}",
        started.elapsed()
    );
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "shard_unavailable");
    assert_eq!(body["error"]["shard"], "shard1");
    assert!(
        !body.to_string().contains("Connection refused"),
        "no driver text reaches clients: {body}"
    );

    let healthy = app.get_as("/api/bookmarks", "hooli").await;
    assert_eq!(healthy.status(), 200);
    app.create("hooli", json!({"url": "https://h2.example"}))
        .await;
    let ready = app.get("/ready").send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["components"]["db:shard:shard1"]["status"], "DOWN");
    assert_eq!(
        ready["components"]["db:shard:shard1"]["details"]["primary"], "unreachable",
        "no driver text: {ready}"
    );
    assert_eq!(ready["components"]["db:shard:shard0"]["status"], "UP");

    doomed.container.start().await.unwrap();
    let recovered = eventually(Duration::from_secs(30), || async {
        let res = app.get_as("/api/bookmarks", "acme-corp").await;
        res.status() == 200
    })
    .await;
    assert!(
        recovered,
        "shard1 tenants are served again without restarting the app"
    );
    assert_eq!(app.get("/ready").send().await.unwrap().status(), 200);
    let list: Value = app.get_json("/api/bookmarks", "acme-corp").await;
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        1,
        "no data was lost"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_unready_replica_degrades_reads_to_the_primary_or_fails_readiness_as_configured() {
    let network = unique("bookmarks-replica-net");
    let primary = start_server(&network).await;
    for db in ["control", "control2", "shard0", "shard1"] {
        create_database(primary.port, db).await;
    }
    let replica = start_replica(&primary, &network).await;
    let layout_for = |control: &str, fallback: &str| Layout {
        control: (primary.port, control.to_owned()),
        shards: vec![
            (
                "shard0".to_owned(),
                primary.port,
                "shard0".to_owned(),
                Some(replica.port),
            ),
            ("shard1".to_owned(), primary.port, "shard1".to_owned(), None),
        ],
        extra: format!("replica_fallback = \"{fallback}\""),
        slots: Vec::new(),
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
    };
    let lenient = TestApp::spawn(layout_for("control", "primary").settings(), "lenient").await;
    let strict = TestApp::spawn(
        layout_for("control2", "fail_readiness").settings(),
        "strict",
    )
    .await;
    lenient
        .create("hooli", json!({"url": "https://h.example", "tags": ["t"]}))
        .await;

    for app in [&lenient, &strict] {
        let on_replica = eventually(Duration::from_secs(10), || async {
            let tags: Value = app.get_json("/api/tags", "hooli").await;
            tags["served_by"] == "replica" && tags["tags"][0]["count"] == 1
        })
        .await;
        assert!(on_replica, "reads use the replica while it is ready");
        assert_eq!(app.get("/ready").send().await.unwrap().status(), 200);
    }

    replica.container.stop_with_timeout(Some(5)).await.unwrap();

    // replica_fallback = "primary": still ready, reads served by the primary.
    let res = lenient.get("/ready").send().await.unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    let shard0 = &body["components"]["db:shard:shard0"];
    assert_eq!(shard0["status"], "UP");
    assert!(
        shard0["details"]["replica"]
            .as_str()
            .unwrap()
            .starts_with("down"),
        "{shard0}"
    );
    assert_eq!(
        shard0["details"]["reads"],
        "primary (replica_fallback = primary)"
    );
    let tags: Value = lenient.get_json("/api/tags", "hooli").await;
    assert_eq!(tags["served_by"], "primary");
    assert_eq!(tags["tags"][0]["count"], 1);

    // replica_fallback = "fail_readiness": not ready, replica reads refused with a 503.
    let res = strict.get("/ready").send().await.unwrap();
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["components"]["db:shard:shard0"]["status"], "DOWN");
    let res = strict.get_as("/api/tags", "hooli").await;
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "replica_unavailable");
    assert_eq!(body["error"]["shard"], "shard0");
    // Primary reads of the tenant's own data are unaffected.
    let own = strict.get_as("/api/bookmarks", "hooli").await;
    assert_eq!(own.status(), 200);

    replica.container.start().await.unwrap();
    let back = eventually(Duration::from_secs(30), || async {
        strict.get("/ready").send().await.unwrap().status() == 200
    })
    .await;
    assert!(back, "readiness returns when the replica does");
    lenient.stop().await;
    strict.stop().await;
}
