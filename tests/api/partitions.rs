//! Partitions, not stops: a server that is still there but stops answering (a frozen VM, a
//! network split). Each test puts a [`Relay`] between the app and one real Postgres server
//! and freezes it: connections stay open and no byte is forwarded either way, which is what
//! a silent server looks like from the app. Also the query deadline against a statement
//! blocked on a real lock.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

/// A short query deadline keeps these tests quick; the layout's connect timeout is 1.5 s.
const QUERY_TIMEOUT_MS: u64 = 1000;
/// The request bound in the test of a slow statement.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(3000);

fn deadline_config(extra: &str) -> String {
    format!("query_timeout_ms = {QUERY_TIMEOUT_MS}\n{extra}")
}

/// (status, elapsed, JSON body) of one GET as `tenant`.
async fn timed(app: &TestApp, path: &str, tenant: &str) -> (u16, Duration, Value) {
    // The key is looked up (or created) before the clock starts.
    let headers = app.tenant(tenant).await;
    let started = Instant::now();
    let res = app.get(path).headers(headers).send().await.unwrap();
    let took = started.elapsed();
    let status = res.status().as_u16();
    (status, took, res.json().await.unwrap_or_default())
}

/// The circuit state of a shard's server as `/actuator/metrics` reports it.
async fn circuit(app: &TestApp, shard: &str, role: &str) -> Value {
    let metrics = app.json("/actuator/metrics").await;
    metrics["database_shards"][shard]["circuit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["role"] == role)
        .cloned()
        .unwrap_or_else(|| panic!("no {role} circuit for {shard}: {metrics}"))
}

#[tokio::test]
async fn a_frozen_shard_costs_one_deadline_then_its_tenants_fail_fast_until_it_thaws() {
    // Its timings assert fail-fast answers: no other test loads the machine meanwhile.
    let _alone = alone().await;
    let mut layout = layout(&deadline_config("")).await;
    let relay = Relay::start(layout.shards[1].1).await;
    layout.shards[1].1 = relay.port;
    let app = TestApp::spawn(layout.settings(), "frozen-shard").await;
    app.create("acme-corp", json!({"url": "https://a.example"}))
        .await; // shard1
    app.create("hooli", json!({"url": "https://h.example"}))
        .await; // shard0
    assert_eq!(circuit(&app, "shard1", "primary").await["open"], false);

    relay.freeze();
    let (status, took, body) = timed(&app, "/api/bookmarks", "acme-corp").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["shard"], "shard1", "{body}");
    assert!(
        took < Duration::from_millis(QUERY_TIMEOUT_MS + 500),
        "the first request took {took:?}"
    );
    for _ in 0..10 {
        let started = Instant::now();
        let res = app.get_as("/api/bookmarks", "acme-corp").await;
        let took = started.elapsed();
        assert_eq!(res.status(), 503);
        assert_eq!(res.headers()["retry-after"], "2");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "shard_unavailable", "{body}");
        assert_eq!(body["error"]["circuit"], "open", "{body}");
        assert!(
            took < Duration::from_millis(100),
            "a later 503 took {took:?}"
        );
    }
    let (status, took, _) = timed(&app, "/api/bookmarks", "hooli").await;
    assert_eq!(status, 200, "shard0 tenants are unaffected");
    assert!(took < Duration::from_millis(100), "{took:?}");
    let open = circuit(&app, "shard1", "primary").await;
    assert_eq!(open["open"], true, "{open}");
    assert_eq!(
        open["trips"], 1,
        "one transition, however many requests failed"
    );
    let started = Instant::now();
    let ready = app.json("/ready").await;
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "/ready stays fast"
    );
    let details = &ready["components"]["db:shard:shard1"]["details"];
    assert_eq!(details["circuit"]["primary"], "open", "{ready}");
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains(r#"db_circuit_open{shard="shard1",role="primary"} 1"#),
        "{metrics}"
    );

    relay.thaw();
    let thawed = Instant::now();
    let served = eventually(Duration::from_secs(5), || async {
        timed(&app, "/api/bookmarks", "acme-corp").await.0 == 200
    })
    .await;
    assert!(
        served,
        "served again within 5 s of the thaw, without a restart"
    );
    eprintln!("served again {:?} after the thaw", thawed.elapsed());
    let list = app.get_json("/api/bookmarks", "acme-corp").await;
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        1,
        "no data was lost"
    );

    // With no request in flight, the liveness monitor alone notices the next freeze.
    relay.freeze();
    // Two timed-out checks (1 s apart, 1.5 s each) with nothing else answering.
    let noticed = eventually(Duration::from_secs(8), || async {
        circuit(&app, "shard1", "primary").await["open"] == true
    })
    .await;
    assert!(noticed, "the liveness monitor opened the circuit by itself");
    let (status, took, _) = timed(&app, "/api/bookmarks", "acme-corp").await;
    assert_eq!(status, 503);
    assert!(took < Duration::from_millis(100), "{took:?}");
    relay.thaw();
    app.stop().await;
}

#[tokio::test]
async fn a_statement_slow_on_a_live_server_waits_past_its_deadline_and_one_cut_off_is_never_reused()
{
    // Its timings assert fail-fast answers: no other test loads the machine meanwhile.
    let _alone = alone().await;
    let layout = layout(&deadline_config("")).await;
    let mut options = test_options("deadline");
    options.request_timeout = REQUEST_TIMEOUT;
    let app = TestApp::spawn_with(layout.settings(), options).await;
    app.create("acme-corp", json!({"url": "https://a.example/kept"}))
        .await;
    let (port, db) = port_of(&layout, "shard1");

    // Another session holds a lock the app's statements must wait for.
    let locker = session(port, &db).await;
    locker
        .batch_execute("BEGIN; LOCK TABLE bookmarks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    // The server keeps answering (its liveness checks), so a read waiting on the lock is
    // slow, not silent: it is not cut off at its deadline, and no circuit opens.
    let acme = app.tenant("acme-corp").await;
    let sent = Instant::now();
    let waiting = tokio::spawn({
        let (client, base, acme) = (app.client.clone(), app.base.clone(), acme.clone());
        async move {
            let res = client
                .get(format!("{base}/api/bookmarks"))
                .headers(acme)
                .send()
                .await
                .unwrap();
            res.status().as_u16()
        }
    });
    // Sessions of requests waiting behind the lock (the reindexer's session may wait too;
    // it is not a request's).
    let blocked = || async {
        sql(
            port,
            &db,
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock' \
             AND application_name NOT LIKE 'bookmarks-reindexer/%'",
        )
        .await[0][0]
            .clone()
            .unwrap_or_default()
    };
    // The read is seen waiting on the lock (not still on its way), and looked at again twice
    // its deadline after it was sent (before the request timeout would cut it off).
    let past_deadline = Duration::from_millis(2 * QUERY_TIMEOUT_MS + 200);
    let arrived = eventually(past_deadline, || async { blocked().await != "0" }).await;
    assert!(arrived, "the read reached its shard and waits on the lock");
    tokio::time::sleep(past_deadline.saturating_sub(sent.elapsed())).await;
    assert!(
        !waiting.is_finished(),
        "a read on a live server goes on waiting past its deadline"
    );
    let primary = circuit(&app, "shard1", "primary").await;
    assert_eq!(primary["open"], false, "{primary}");
    assert_eq!(primary["trips"], 0, "{primary}");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        waiting.await.unwrap(),
        200,
        "it is served once the lock is gone"
    );

    // The request timeout still bounds a wait; the statement it cuts off is not pooled.
    locker
        .batch_execute("BEGIN; LOCK TABLE bookmarks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let url = "https://a.example/maybe";
    let create = || async {
        app.post("/api/bookmarks")
            .headers(acme.clone())
            .json(&json!({ "url": url }))
            .send()
            .await
            .unwrap()
    };
    let started = Instant::now();
    let res = create().await;
    let took = started.elapsed();
    assert!(
        took >= REQUEST_TIMEOUT && took < REQUEST_TIMEOUT + Duration::from_millis(500),
        "{took:?}"
    );
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");

    // The app let the statement go and asked the server to cancel it: within a second no
    // request's backend still waits behind the lock, although the lock is still held (the
    // reindexer's session waits too; it is not a request's and keeps its connection).
    let cancelled = eventually(Duration::from_secs(1), || async { blocked().await == "0" }).await;
    assert!(cancelled, "the cut-off statement is still running");
    locker.batch_execute("ROLLBACK").await.unwrap();
    let served = eventually(Duration::from_secs(5), || async {
        timed(&app, "/api/bookmarks", "acme-corp").await.0 == 200
    })
    .await;
    assert!(served, "the shard serves again once the lock is gone");

    // The abandoned write may or may not have landed; retrying it never makes two.
    let retry = create().await;
    let status = retry.status().as_u16();
    let body: Value = retry.json().await.unwrap();
    let rows = sql(
        port,
        &db,
        &format!("SELECT id::text FROM bookmarks WHERE tenant_id = 'acme-corp' AND url = '{url}'"),
    )
    .await;
    assert_eq!(rows.len(), 1, "exactly one row for the URL");
    let id = rows[0][0].clone().unwrap();
    match status {
        201 => assert_eq!(body["id"], id),
        409 => assert_eq!(body["error"]["id"], id, "{body}"),
        other => panic!("the retry answered {other}: {body}"),
    }
    app.stop().await;
}

#[tokio::test]
async fn a_frozen_replica_costs_one_deadline_then_reads_go_to_the_primary_until_it_thaws() {
    // Its timings assert fail-fast answers: no other test loads the machine meanwhile.
    let _alone = alone().await;
    let mut layout = layout(&deadline_config("reads_without_token = \"replica\"")).await;
    let relay = Relay::start(layout.shards[0].3.unwrap()).await;
    layout.shards[0].3 = Some(relay.port);
    let app = TestApp::spawn(layout.settings(), "frozen-replica").await;
    app.create("hooli", json!({"url": "https://h.example", "tags": ["x"]}))
        .await; // shard0
    let on_replica = || async {
        let (status, _, body) = timed(&app, "/api/tags", "hooli").await;
        status == 200 && body["served_by"] == "replica"
    };
    assert!(eventually(Duration::from_secs(10), on_replica).await);

    relay.freeze();
    let (status, took, body) = timed(&app, "/api/tags", "hooli").await;
    assert_eq!(
        status, 200,
        "the cut-off read is retried on the primary: {body}"
    );
    assert_eq!(body["served_by"], "primary", "{body}");
    assert!(
        took < Duration::from_millis(QUERY_TIMEOUT_MS + 500),
        "first read took {took:?}"
    );
    for _ in 0..10 {
        let (status, took, body) = timed(&app, "/api/tags", "hooli").await;
        assert_eq!(status, 200);
        assert_eq!(body["served_by"], "primary", "{body}");
        assert!(
            took < Duration::from_millis(100),
            "a later read took {took:?}"
        );
    }
    assert_eq!(circuit(&app, "shard0", "replica").await["open"], true);
    assert_eq!(circuit(&app, "shard0", "primary").await["open"], false);

    relay.thaw();
    assert!(
        eventually(Duration::from_secs(10), on_replica).await,
        "reads return to the replica after the thaw"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_frozen_control_database_serves_cached_placements_and_fails_uncached_tenants_fast() {
    // Its timings assert fail-fast answers: no other test loads the machine meanwhile.
    let _alone = alone().await;
    let mut layout = layout(&deadline_config("[sharding]\ndirectory_router = true\n")).await;
    let relay = Relay::start(layout.control.0).await;
    layout.control.0 = relay.port;
    let app = TestApp::spawn(layout.settings(), "frozen-control").await;
    app.create("hooli", json!({"url": "https://h.example"}))
        .await;
    assert_eq!(timed(&app, "/api/bookmarks", "hooli").await.0, 200);
    // Newcomers whose keys this process has checked, but whose placement it never looked up.
    for i in 0..=5 {
        app.check_key(&format!("newcomer-{i}")).await;
    }

    relay.freeze();
    let (status, took, _) = timed(&app, "/api/bookmarks", "hooli").await;
    assert_eq!(status, 200, "a cached placement keeps serving");
    assert!(took < Duration::from_millis(100), "{took:?}");
    let (status, took, body) = timed(&app, "/api/bookmarks", "newcomer-0").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "directory_unavailable", "{body}");
    assert!(
        took < Duration::from_millis(2500),
        "first lookup took {took:?}"
    );
    for i in 1..=5 {
        let (status, took, body) = timed(&app, "/api/bookmarks", &format!("newcomer-{i}")).await;
        assert_eq!(status, 503, "{body}");
        assert!(
            took < Duration::from_millis(100),
            "a later lookup took {took:?}"
        );
    }
    let metrics = app.json("/actuator/metrics").await;
    assert_eq!(metrics["control_circuit"]["open"], true, "{metrics}");

    relay.thaw();
    let served = eventually(Duration::from_secs(5), || async {
        timed(&app, "/api/bookmarks", "newcomer-0").await.0 == 200
    })
    .await;
    assert!(served, "uncached tenants are served within 5 s of the thaw");
    app.stop().await;
}
