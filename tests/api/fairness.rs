//! Fairness between tenants with a real server and real shards: the per-tenant bulkhead
//! refuses one tenant's excess (429) while another tenant is served, and the busiest
//! tenants, with placement advice, show in `/metrics` and on the admin page.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

const TOKEN: &str = "test-admin-token-0123456789";

/// Creates a bookmark for `tenant`; returns its id and the shard that stored it.
async fn create_on(app: &TestApp, tenant: &str, url: &str) -> (String, String) {
    let res = app
        .post("/api/bookmarks")
        .headers(app.tenant(tenant).await)
        .json(&json!({ "url": url, "title": "held" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let shard = res.headers()["x-shard"].to_str().unwrap().to_owned();
    let body: Value = res.json().await.unwrap();
    (body["id"].as_str().unwrap().to_owned(), shard)
}

#[tokio::test]
async fn the_bulkhead_answers_429_to_one_tenants_excess_while_another_tenant_is_served() {
    let layout = layout("[tenancy]\nmax_in_flight_per_tenant = 2").await;
    let mut options = test_options("fair-1");
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    let app = TestApp::spawn_with(layout.settings(), options).await;
    let (id, shard) = create_on(&app, "whale", "https://example.com/held").await;
    let (port, db) = port_of(&layout, &shard);

    // Another session holds the whale's row, so its two updates stay in progress.
    let locker = session(port, &db).await;
    locker
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM bookmarks WHERE tenant_id = 'whale' AND id = '{id}' FOR UPDATE"
        ))
        .await
        .unwrap();
    let whale = app.tenant("whale").await;
    let held: Vec<_> = (0..2)
        .map(|i| {
            app.patch(&format!("/api/bookmarks/{id}"))
                .headers(whale.clone())
                .json(&json!({ "title": format!("update {i}") }))
                .send()
        })
        .map(tokio::spawn)
        .collect();

    // Once both updates wait on the lock, the whale's next request is refused at the door.
    let deadline = Instant::now() + Duration::from_secs(10);
    // (Asked on a session of its own: inside the locker's transaction the view would
    // show the snapshot it took first.)
    let waiting = "SELECT count(*) FROM pg_stat_activity \
                   WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE%'";
    while sql(port, &db, waiting).await[0][0].as_deref() != Some("2") {
        assert!(
            Instant::now() < deadline,
            "the updates never waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = app.get_as("/api/bookmarks", "whale").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert!(
        refused.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tenant_busy");
    assert_eq!(body["error"]["limit"], 2);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has 2 requests in progress"),
        "{body}"
    );

    // A minnow, on the same shard or not, is served meanwhile.
    let minnow = app.get_as("/api/bookmarks", "minnow").await;
    assert_eq!(minnow.status(), 200);

    // Released, the held updates finish and nothing was lost.
    locker.batch_execute("ROLLBACK").await.unwrap();
    for update in held {
        assert_eq!(update.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(app.get_as("/api/bookmarks", "whale").await.status(), 200);
    let metrics = app.metrics_text_as(TOKEN).await;
    assert!(
        metrics.lines().any(|l| l
            .starts_with("tenant_busiest_rejected{rank=\"1\",tenant=\"whale\"")
            && !l.ends_with(" 0")),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_dominating_tenant_shows_in_metrics_and_on_the_admin_page_with_the_command_to_move_it() {
    let layout = layout("[sharding]\ndirectory_router = true").await;
    let mut options = test_options("fair-2");
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    let app = TestApp::spawn_with(layout.settings(), options).await;

    let shard_of = async |tenant: &str| {
        let res = app.get_as("/api/bookmarks", tenant).await;
        assert_eq!(res.status(), 200);
        res.headers()["x-shard"].to_str().unwrap().to_owned()
    };
    let whale_shard = shard_of("acme-corp").await;
    let other_shard = if whale_shard == "shard0" {
        "shard1"
    } else {
        "shard0"
    };
    // Ten minnows on the whale's shard (each probe is one request of its own).
    let mut minnows = Vec::new();
    for i in 0.. {
        let name = format!("minnow-{i}");
        if shard_of(&name).await == whale_shard {
            minnows.push(name);
            if minnows.len() == 10 {
                break;
            }
        }
    }
    for _ in 0..299 {
        assert_eq!(
            app.get_as("/api/bookmarks", "acme-corp").await.status(),
            200
        );
    }
    for minnow in &minnows {
        for _ in 0..9 {
            assert_eq!(app.get_as("/api/bookmarks", minnow).await.status(), 200);
        }
    }

    // Who the customers are is no one's business but the operator's.
    let open = app.metrics_text().await;
    assert!(!open.contains("acme-corp"), "{open}");
    assert!(open.contains("http_requests_total"), "{open}");
    // acme-corp: 300 of the shard's 400 requests.
    let metrics = app.metrics_text_as(TOKEN).await;
    let expected = format!(
        "tenant_busiest_requests{{rank=\"1\",tenant=\"acme-corp\",shard=\"{whale_shard}\"}} 300"
    );
    assert!(metrics.lines().any(|l| l == expected), "{metrics}");
    assert!(
        metrics.lines().any(|l| l
            == format!(
                "tenant_busiest_shard_share{{rank=\"1\",tenant=\"acme-corp\",shard=\"{whale_shard}\"}} 0.75"
            )),
        "{metrics}"
    );
    let series = metrics
        .lines()
        .filter(|l| l.starts_with("tenant_busiest_requests{"))
        .count();
    assert_eq!(series, 10, "the top ten only, not a series per tenant");

    let res = app
        .get("/admin/api/busiest")
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let busiest: Value = res.json().await.unwrap();
    let move_command = format!(
        "move_slot run --from {whale_shard} --to {other_shard} --tenant acme-corp --confirm"
    );
    assert_eq!(busiest["advice"].as_array().unwrap().len(), 1, "{busiest}");
    assert_eq!(busiest["advice"][0]["tenant"], "acme-corp");
    assert_eq!(busiest["advice"][0]["move_command"], move_command.as_str());
    assert_eq!(
        busiest["advice"][0]["pin_command"],
        format!("bookmarks pin acme-corp {other_shard}").as_str()
    );

    let page = app
        .get("/admin")
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("acme-corp makes 75% of {whale_shard}")),
        "{page}"
    );
    assert!(page.contains(&move_command), "the page shows the command");
    assert!(page.contains("id=\"busiest-tenants\""));
    app.stop().await;
}
