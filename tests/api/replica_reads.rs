//! Tenant reads on the shard's replica, with read-your-own-writes by the consistency token:
//! a write answers with a token; a read bringing it back is never stale (the replica once it
//! has replayed it, else the primary), on a paused replica, and after the tenant moved.

use std::time::Duration;

use crate::moves::{Tool, move_layout, step};
use crate::support::*;
use bookmarks_sharded::sharding::ShardKey;
use serde_json::{Value, json};

/// A tenant read's answer: status, `X-Read-From`, body.
async fn read(
    app: &TestApp,
    path: &str,
    tenant: &str,
    token: Option<&str>,
) -> (u16, String, Value) {
    let mut req = app.get(path).headers(app.tenant(tenant).await);
    if let Some(token) = token {
        req = req.header("X-Consistency-Token", token);
    }
    let res = req.send().await.unwrap();
    let from = res
        .headers()
        .get("x-read-from")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (res.status().as_u16(), from, res.json().await.unwrap())
}

/// Creates a bookmark as `tenant`; returns its id and the write's token.
async fn write(app: &TestApp, tenant: &str, url: &str) -> (String, String) {
    let res = app
        .post("/api/bookmarks")
        .headers(app.tenant(tenant).await)
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let token = res
        .headers()
        .get("x-consistency-token")
        .expect("a write answers with its token")
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    (body["id"].as_str().unwrap().to_owned(), token)
}

/// Runs `move_slot ARGS` to its end on a blocking thread, so that the app (on this test's
/// runtime) goes on serving and hearing notifications meanwhile, as a real server does.
async fn move_slot(layout: &Layout, args: &[&str]) -> Value {
    let tool = Tool::new(layout);
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tool.ok(&args)
    })
    .await
    .unwrap()
}

/// A primary of this test's own (control, shard0, shard1) and a streaming replica of it,
/// which serves shard0 only: a test may pause its replay without touching other tests.
async fn private_pair(extra: &str) -> (Server, Replica, Layout) {
    let network = unique("bookmarks-ryow-net");
    remove_network_at_exit(&network);
    let primary = start_server(&network).await;
    for db in ["control", "shard0", "shard1"] {
        create_database(primary.port, db).await;
    }
    let replica = start_replica(&primary, &network).await;
    let layout = Layout {
        control: (primary.port, "control".to_owned()),
        shards: vec![
            (
                "shard0".to_owned(),
                primary.port,
                "shard0".to_owned(),
                Some(replica.port),
            ),
            ("shard1".to_owned(), primary.port, "shard1".to_owned(), None),
        ],
        // A paused replica falls minutes behind here: reads without a token keep using it.
        extra: format!("reads_without_token = \"replica\"\nmax_replica_lag_ms = 60000\n{extra}"),
        slots: Vec::new(),
        connect_timeout_ms: 5000,
    };
    (primary, replica, layout)
}

/// Pauses the replica's replay and waits until it has.
async fn pause_replay(replica: &Replica) {
    sql(replica.port, "postgres", "SELECT pg_wal_replay_pause()").await;
    let paused = eventually(Duration::from_secs(10), || async {
        replay_state(replica.port).await == "paused"
    })
    .await;
    assert!(paused, "replay pauses");
}

async fn replay_state(port: u16) -> String {
    sql(port, "postgres", "SELECT pg_get_wal_replay_pause_state()").await[0][0]
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_token_read_is_fresh_from_the_primary_while_replay_is_paused_and_from_the_replica_once_it_resumes()
 {
    let (_primary, replica, layout) = private_pair("").await;
    let app = TestApp::spawn(layout.settings(), "ryow").await;
    // "hooli" hashes to shard0 (slot 3974).
    let (first, _) = write(&app, "hooli", "https://first.example").await;
    let on_replica = eventually(Duration::from_secs(20), || async {
        let (status, from, body) = read(&app, "/api/bookmarks", "hooli", None).await;
        status == 200 && from.starts_with("replica; why=lag") && body["items"][0]["id"] == first
    })
    .await;
    assert!(on_replica, "a read without a token reaches the replica");

    pause_replay(&replica).await;
    let (second, token) = write(&app, "hooli", "https://second.example").await;
    assert!(token.starts_with("1:shard0:"), "{token}");

    let path = format!("/api/bookmarks/{second}");
    let (status, from, body) = read(&app, &path, "hooli", Some(&token)).await;
    assert_eq!(
        (status, from.as_str()),
        (200, "primary; why=token"),
        "{body}"
    );
    assert_eq!(body["id"], second);
    // Without the token the replica answers, stale, and says so.
    let (status, from, body) = read(&app, "/api/bookmarks", "hooli", None).await;
    assert_eq!(status, 200);
    assert!(from.starts_with("replica; why=lag; lag_ms="), "{from}");
    assert_eq!(body["items"].as_array().unwrap().len(), 1, "{body}");
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains("token_fallbacks_total{shard=\"shard0\"}"),
        "the fallback is counted"
    );

    sql(replica.port, "postgres", "SELECT pg_wal_replay_resume()").await;
    let caught_up = eventually(Duration::from_secs(20), || async {
        let (status, from, body) = read(&app, &path, "hooli", Some(&token)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["id"], second, "a token read is never stale");
        from == "replica; why=token"
    })
    .await;
    assert!(
        caught_up,
        "the replica serves the token once it has replayed it"
    );
    let (_, from, body) = read(&app, "/api/bookmarks", "hooli", Some(&token)).await;
    assert_eq!(from, "replica; why=token");
    assert_eq!(body["items"].as_array().unwrap().len(), 2, "{body}");
}

#[tokio::test]
async fn a_token_nothing_here_can_vouch_for_reads_the_primary_and_garbage_is_a_400_naming_the_header()
 {
    let layout = layout("reads_without_token = \"replica\"").await;
    let app = TestApp::spawn(layout.settings(), "forged").await;
    let (id, token) = write(&app, "hooli", "https://h.example").await;
    let path = format!("/api/bookmarks/{id}");
    // An epoch no move has reached, a shard not configured: the primary answers, fresh.
    for forged in ["1:shard0:999999:FFFFFFFF", "1:nowhere:0:1"] {
        let (status, from, body) = read(&app, &path, "hooli", Some(forged)).await;
        assert_eq!(
            (status, from.as_str()),
            (200, "primary; why=token"),
            "{forged}"
        );
        assert_eq!(body["id"], id);
    }
    // Another tenant's token is no reason to answer stale either.
    let (_, other) = write(&app, "initech", "https://i.example").await;
    let (status, _, body) = read(&app, &path, "hooli", Some(&other)).await;
    assert_eq!((status, &body["id"]), (200, &json!(id)));
    // Its own token is honoured.
    let (status, from, _) = read(&app, &path, "hooli", Some(&token)).await;
    assert_eq!(status, 200);
    assert!(from.ends_with("why=token"), "{from}");
    for garbage in ["yes", "1:shard0:1:xyz", "1:shard0:1:1A:extra"] {
        let (status, _, body) = read(&app, &path, "hooli", Some(garbage)).await;
        assert_eq!(status, 400, "{garbage}: {body}");
        assert_eq!(body["error"]["code"], "invalid_consistency_token");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("X-Consistency-Token"), "{message}");
    }
}

#[tokio::test]
async fn a_tenant_moved_onto_a_shard_whose_replica_has_not_replayed_the_copy_reads_from_the_primary_until_it_has()
 {
    let (_primary, replica, layout) =
        private_pair("[sharding]\ndirectory_router = true\ndirectory_cache_ttl_ms = 1000\n").await;
    let app = TestApp::spawn(layout.settings(), "ryow-move").await;
    // "initech" hashes to shard1, which has no replica; shard0 has one.
    let (id, token) = write(&app, "initech", "https://before-the-move.example").await;
    assert!(token.starts_with("1:shard1:"), "{token}");
    // The replica will not have the copy: without the arrival it would show initech absent.
    pause_replay(&replica).await;
    let args = step(
        "run",
        "shard1",
        "shard0",
        "initech",
        &["--confirm", "--grace", "2s"],
    );
    let done = move_slot(&layout, &args).await;
    assert_eq!(done["state"], "done", "{done}");
    let arrival = on_control(
        &layout,
        "SELECT epoch FROM _autumn_shard_arrivals WHERE shard_name = 'shard0'",
    )
    .await;
    assert!(
        !arrival.is_empty(),
        "the move recorded its arrival on shard0"
    );

    let path = format!("/api/bookmarks/{id}");
    let (status, from, body) = read(&app, &path, "initech", None).await;
    assert_eq!((status, from.as_str()), (200, "primary; why=lag"), "{body}");
    assert_eq!(body["shard"], "shard0", "{body}");
    let (status, from, body) = read(&app, &path, "initech", Some(&token)).await;
    assert_eq!(
        (status, from.as_str()),
        (200, "primary; why=token"),
        "{body}"
    );

    sql(replica.port, "postgres", "SELECT pg_wal_replay_resume()").await;
    let settled = eventually(Duration::from_secs(20), || async {
        let (status, from, body) = read(&app, &path, "initech", Some(&token)).await;
        assert_eq!(status, 200, "{from}: {body}");
        assert_eq!(body["id"], id, "fresh on the destination");
        from == "replica; why=token"
    })
    .await;
    assert!(
        settled,
        "the destination's replica honours a token minted on the source"
    );
    let (status, from, _) = read(&app, &path, "initech", None).await;
    assert_eq!(status, 200);
    assert!(from.starts_with("replica; why=lag"), "{from}");
}

#[tokio::test]
async fn a_token_minted_before_its_slot_range_moved_reads_fresh_on_the_new_owner() {
    let layout = move_layout()
        .await
        .with_extra("reads_without_token = \"replica\"\n");
    let app = TestApp::spawn(layout.settings(), "ryow-range").await;
    // "initech" hashes to shard1 (no replica); its slot range goes to shard0 (a replica).
    let slot = ShardKey::Str("initech").slot().index();
    let (id, token) = write(&app, "initech", "https://before-the-range-move.example").await;
    assert!(token.starts_with("1:shard1:"), "{token}");
    let range = format!("{slot}-{slot}");
    let done = move_slot(
        &layout,
        &[
            "run",
            "--from",
            "shard1",
            "--to",
            "shard0",
            "--slots",
            &range,
            "--confirm",
            "--grace",
            "2s",
        ],
    )
    .await;
    assert_eq!(done["state"], "done", "{done}");

    let path = format!("/api/bookmarks/{id}");
    let settled = eventually(Duration::from_secs(20), || async {
        let (status, from, body) = read(&app, &path, "initech", Some(&token)).await;
        assert_eq!(status, 200, "{from}: {body}");
        assert_eq!(body["shard"], "shard0", "{body}");
        assert_eq!(body["id"], id, "fresh on the new owner");
        from == "replica; why=token"
    })
    .await;
    assert!(
        settled,
        "the new owner's replica honours a token minted on the old one"
    );
}

#[tokio::test]
async fn the_html_ui_keeps_the_latest_token_in_a_cookie_so_the_page_after_a_form_shows_its_write() {
    use crate::service::{cookie_value, post_form};
    let layout = layout("reads_without_token = \"replica\"").await;
    let app = TestApp::spawn(layout.settings(), "ryow-ui").await;
    // The replica serves reads once a probe found it up (it may still be replaying the
    // test's migrations when the app starts); until then every read goes to the primary.
    let replica_up = eventually(Duration::from_secs(20), || async {
        let ready = app.json("/ready").await;
        ready["components"]["db:shard:shard0"]["details"]["replica"]
            .as_str()
            .is_some_and(|r| r.starts_with("up"))
    })
    .await;
    assert!(replica_up, "shard0's replica is up");
    let home = app.get("/").send().await.unwrap();
    let csrf = cookie_value(&home, "csrf").expect("a csrf cookie is set");
    let key = app.key("hooli").await;
    let signed_in = post_form(
        &app,
        "/signin",
        &format!("csrf={csrf}"),
        &[("tenant", "hooli"), ("key", &key), ("csrf", &csrf)],
    )
    .await;
    assert_eq!(signed_in.status(), 303);
    let session = cookie_value(&signed_in, "session").unwrap();
    let jar = format!("csrf={csrf}; session={session}");

    let created = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[("url", "https://saved-by-a-form.example/"), ("csrf", &csrf)],
    )
    .await;
    assert_eq!(created.status(), 303);
    let token = cookie_value(&created, "consistency").expect("the form's write sets the cookie");
    assert!(token.starts_with("1:shard0:"), "{token}");

    let page = app
        .get("/")
        .header("cookie", format!("{jar}; consistency={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let from = page.headers()["x-read-from"].to_str().unwrap().to_owned();
    assert!(from.ends_with("why=token"), "{from}");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("saved-by-a-form.example"),
        "the page shows the write"
    );
    // A cookie that is not a token is the browser's problem, not the reader's: ignored.
    let page = app
        .get("/")
        .header("cookie", format!("{jar}; consistency=garbage"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
}
