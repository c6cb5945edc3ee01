//! Failure behaviour with real servers stopped and started: a down shard degrades stats to
//! a partial answer and 503s only its own tenants (and leaves each replica ready for a
//! balancer's `/ready?scope=replica`); an unready replica follows its
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
    // A balancer's probe asks only what differs between replicas: a shard that is down is
    // down for all of them, so it must not take this one out of rotation.
    let replica = app.get("/ready?scope=replica").send().await.unwrap();
    assert_eq!(replica.status(), 200);
    let replica: Value = replica.json().await.unwrap();
    assert_eq!(replica["status"], "UP");
    assert_eq!(
        replica["components"]["db:shard:shard1"]["status"], "DOWN",
        "the shard is still reported: {replica}"
    );
    let res = app.get("/ready?scope=shards").send().await.unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_query");

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
        extra: format!("replica_fallback = \"{fallback}\"\nreads_without_token = \"replica\""),
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
    // Every tenant read is a replica read, so the list is refused too; writes go on.
    let own = strict.get_as("/api/bookmarks", "hooli").await;
    assert_eq!(own.status(), 503);
    let res = strict
        .post("/api/bookmarks")
        .headers(strict.tenant("hooli").await)
        .json(&json!({"url": "https://written-meanwhile.example"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    replica.container.start().await.unwrap();
    let back = eventually(Duration::from_secs(30), || async {
        strict.get("/ready").send().await.unwrap().status() == 200
    })
    .await;
    assert!(back, "readiness returns when the replica does");
    lenient.stop().await;
    strict.stop().await;
}

/// The app's session on `db` that waits for a lock, once there is one (its backend pid).
/// Panics with the answer if `request` was answered without ever waiting: what it said is
/// what tells why.
async fn waiting_backend(
    port: u16,
    db: &str,
    request: &mut tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let rows = sql(
            port,
            db,
            "select pid::text from pg_stat_activity \
             where wait_event_type = 'Lock' and query ilike '%bookmarks%' limit 1",
        )
        .await;
        if let Some(pid) = rows.first().and_then(|r| r[0].clone()) {
            return pid;
        }
        if request.is_finished() {
            let res = request.await.unwrap().unwrap();
            let status = res.status();
            let body = res.text().await.unwrap_or_default();
            panic!("the request never waited on the lock; it was answered {status} {body}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the request did not reach the lock within 20 s");
}

#[tokio::test]
async fn a_statement_cut_by_the_server_going_away_answers_503_never_500_and_a_write_says_its_outcome_is_unknown()
 {
    // One connection per shard: the create below is prepared on it before the lock, so the
    // write that waits has been sent whole (a statement prepared afresh would wait in its
    // parse step, before its values were sent).
    // Patient connects: the cut-off connections are replaced by new ones, which a loaded
    // machine may take longer than the default test timeout to open.
    let mut layout = layout("primary_pool_size = 1")
        .await
        .with_patient_connects();
    let (port, db) = port_of(&layout, "shard1");
    let relay = Relay::start(port).await;
    layout.shards[1].1 = relay.port;
    let app = TestApp::spawn(layout.settings(), "cut-off").await;
    app.create("acme-corp", json!({"url": "https://a.example/kept"}))
        .await; // shard1
    let acme = app.tenant("acme-corp").await;
    let create = |url: &'static str| {
        app.post("/api/bookmarks")
            .headers(acme.clone())
            .json(&json!({ "url": url }))
            .send()
    };
    let locker = session(port, &db).await;
    locker
        .batch_execute("BEGIN; LOCK TABLE bookmarks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    // The link to the shard is lost under a write the server goes on with: it is applied
    // once the lock is gone, so "shard unavailable" (nothing was written) would be a lie.
    let mut write = tokio::spawn(create("https://a.example/cut"));
    waiting_backend(port, &db, &mut write).await;
    relay.cut();
    let res = write.await.unwrap().unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "write_outcome_unknown", "{body}");
    locker.batch_execute("ROLLBACK").await.unwrap();
    let applied = eventually(Duration::from_secs(5), || async {
        sql(
            port,
            &db,
            "select count(*) from bookmarks where url = 'https://a.example/cut'",
        )
        .await[0][0]
            .as_deref()
            == Some("1")
    })
    .await;
    assert!(applied, "the server applied the write it was sent");
    // The cut also ended the app's liveness session, which opens the shard's circuit once
    // its next check fails, until a fresh connection answers. Served again means that trip
    // happened, a read answered and the circuit closed: a read may pass before the
    // liveness check has noticed, or while it still reports the circuit open.
    let serves = || async {
        let read = app
            .get("/api/bookmarks")
            .headers(acme.clone())
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        let metrics = app.metrics_text().await;
        let trips = metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(r#"db_circuit_trips_total{shard="shard1",role="primary"} "#)
            })
            .and_then(|n| n.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        read && trips >= 1.0
            && metrics.contains(r#"db_circuit_open{shard="shard1",role="primary"} 0"#)
    };
    assert!(eventually(Duration::from_secs(10), serves).await);

    // A server shutting down (here: its administrator ends the session) answers the
    // statement it cuts with an error, then closes the connection: a read gets a 503…
    locker
        .batch_execute("BEGIN; LOCK TABLE bookmarks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let mut read = tokio::spawn(app.get("/api/bookmarks").headers(acme.clone()).send());
    let pid = waiting_backend(port, &db, &mut read).await;
    sql(port, &db, &format!("select pg_terminate_backend({pid})")).await;
    let res = read.await.unwrap().unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "shard_unavailable", "{body}");
    assert_eq!(body["error"]["shard"], "shard1", "{body}");

    // … and a write the only honest promise: it may have been applied.
    let mut write = tokio::spawn(create("https://a.example/terminated"));
    let pid = waiting_backend(port, &db, &mut write).await;
    sql(port, &db, &format!("select pg_terminate_backend({pid})")).await;
    let res = write.await.unwrap().unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "write_outcome_unknown", "{body}");
    locker.batch_execute("ROLLBACK").await.unwrap();

    // The shard serves again once it answers.
    assert!(eventually(Duration::from_secs(10), serves).await);
    app.stop().await;
}
