//! A replica leaving (SIGTERM to `bookmarks serve`, here its shutdown future), as a proxy in
//! front of it sees it: not ready at once, every connection closed after its response,
//! requests in flight finished, then connections refused (which a proxy can safely send to
//! another replica, whatever the method).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

#[tokio::test]
async fn a_stopping_replica_turns_unready_closes_each_connection_after_its_response_finishes_its_requests_then_refuses_connections()
 {
    let layout = layout("").await;
    let drain = Duration::from_millis(1500);
    let mut options = test_options("leaving");
    options.drain = drain;
    let mut app = TestApp::spawn_with(layout.settings(), options).await;
    let tenant = unique("leaving");
    app.create(&tenant, json!({"url": "https://leaving.example/before"}))
        .await;

    // A create held in flight across the stop: it waits for a lock on its shard's table.
    let (port, db) = port_of(&layout, &hash_shard(&app.settings, &tenant));
    let holder = session(port, &db).await;
    holder
        .batch_execute("BEGIN; LOCK TABLE bookmarks IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let create = app
        .post("/api/bookmarks")
        .headers(app.tenant(&tenant).await)
        .json(&json!({"url": "https://leaving.example/in-flight"}))
        .send();
    let in_flight = tokio::spawn(create);
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' AND wait_event_type = 'Lock'"
    );
    let arrived = eventually(Duration::from_secs(5), || async {
        sql(port, &db, &waiting).await[0][0].as_deref() == Some("1")
    })
    .await;
    assert!(arrived, "the create reached its shard and waits there");

    let stopped_at = Instant::now();
    app.begin_stop();
    let res = app.get("/ready").send().await.unwrap();
    assert_eq!(res.status(), 503, "not ready as soon as it is told to stop");
    assert_eq!(res.headers()["connection"], "close");
    let ready: Value = res.json().await.unwrap();
    assert_eq!(ready["components"]["process"]["status"], "DOWN", "{ready}");
    let res = app.get("/ready?scope=replica").send().await.unwrap();
    assert_eq!(res.status(), 503, "a balancer's probe hears it too");
    let res = app.get("/health").send().await.unwrap();
    assert_eq!(res.status(), 200, "still serving while it drains");
    assert_eq!(
        res.headers()["connection"],
        "close",
        "and no connection is kept for a next request"
    );

    // A connection accepted during the drain whose request has not arrived (or not been
    // read) when the listener closes: it is served, not cut.
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut late = tokio::net::TcpStream::connect(&addr).await.unwrap();

    // The drain runs its course; then the listener closes, which on a loaded machine the
    // server gets to a moment later: new connections are asked for until one is refused.
    tokio::time::sleep(drain.saturating_sub(stopped_at.elapsed())).await;
    let refused = eventually(Duration::from_secs(10), || async {
        matches!(
            tokio::net::TcpStream::connect(&addr).await,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
        )
    })
    .await;
    assert!(
        refused,
        "after the drain, a new connection is refused (not accepted and dropped)"
    );
    late.write_all(b"GET /health HTTP/1.1\r\nhost: leaving\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    late.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("connection: close"),
        "the request that came late on an accepted connection is answered: {answer:?}"
    );
    assert!(
        !app.server.is_finished(),
        "the server waits for the request in flight"
    );

    holder.batch_execute("COMMIT").await.unwrap();
    let res = in_flight.await.unwrap().unwrap();
    assert_eq!(res.status(), 201, "the request in flight completed");
    let rows = sql(
        port,
        &db,
        &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{tenant}'"),
    )
    .await;
    assert_eq!(rows[0][0].as_deref(), Some("2"));
    let finished = tokio::time::timeout(Duration::from_secs(5), &mut app.server).await;
    assert!(
        matches!(finished, Ok(Ok(Ok(())))),
        "the server exits cleanly once its last request is done: {finished:?}"
    );
}
