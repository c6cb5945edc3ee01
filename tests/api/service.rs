//! The bookmarks service against real Postgres: control, shard0 (with a streaming replica)
//! and shard1 each in their own container, the app spawned for real, rows checked directly
//! in the shard databases.

use std::time::Duration;

use crate::support::*;
use bookmarks_sharded::migrate::Kind;
use serde_json::{Value, json};

async fn app() -> (TestApp, Layout) {
    let l = layout("").await;
    (TestApp::spawn(l.settings(), "test-instance").await, l)
}

/// What `bookmarks route` says about keys, run as a user would run it.
fn route_with_cli(layout: &Layout, keys: &[String]) -> Vec<Value> {
    let args: Vec<&str> = ["route", "--"]
        .into_iter()
        .chain(keys.iter().map(String::as_str))
        .collect();
    let out = bookmarks_cli(layout, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn every_tenants_rows_land_on_the_shard_that_route_names() {
    let (app, layout) = app().await;
    let tenants: Vec<String> = (0..24).map(|i| format!("placement-tenant-{i}")).collect();
    for t in &tenants {
        let created = app
            .create(t, json!({"url": format!("https://example.com/{t}")}))
            .await;
        assert!(created["shard"] == "shard0" || created["shard"] == "shard1");
    }
    let routes = route_with_cli(&layout, &tenants);
    let mut seen = std::collections::BTreeSet::new();
    for (t, route) in tenants.iter().zip(routes) {
        let owner = route["shard"].as_str().unwrap().to_owned();
        seen.insert(owner.clone());
        for shard in ["shard0", "shard1"] {
            let (port, db) = port_of(&layout, shard);
            let rows = sql(
                port,
                &db,
                &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{t}'"),
            )
            .await;
            let expected = if shard == owner { "1" } else { "0" };
            assert_eq!(
                rows[0][0].as_deref(),
                Some(expected),
                "tenant {t} on {shard}, route says {owner}"
            );
        }
    }
    assert_eq!(seen.len(), 2, "24 tenants should exercise both shards");
    app.stop().await;
}

#[tokio::test]
async fn responses_name_the_serving_shard_and_instance() {
    let (app, _) = app().await;
    let created = app
        .create("acme-corp", json!({"url": "https://a.example"}))
        .await;
    assert_eq!(created["shard"], "shard1");
    let res = app.get_as("/api/bookmarks", "acme-corp").await;
    assert_eq!(res.headers()["x-shard"], "shard1");
    assert_eq!(res.headers()["x-served-by"], "test-instance");
    assert!(res.headers().contains_key("x-request-id"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["shard"], "shard1");
    assert_eq!(body["items"].as_array().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn tenants_sharing_a_shard_cannot_see_or_touch_each_others_bookmarks() {
    let (app, layout) = app().await;
    // Find two tenants that hash to the same shard.
    let candidates: Vec<String> = (0..10).map(|i| format!("iso-{i}")).collect();
    let routes = route_with_cli(&layout, &candidates);
    let first_shard = routes[0]["shard"].clone();
    let other = routes
        .iter()
        .skip(1)
        .position(|r| r["shard"] == first_shard)
        .unwrap()
        + 1;
    let (a, b) = (&candidates[0], &candidates[other]);

    let mine = app
        .create(a, json!({"url": "https://shared.example", "tags": ["x"]}))
        .await;
    // The same URL for another tenant is not a duplicate.
    app.create(b, json!({"url": "https://shared.example"}))
        .await;
    let id = mine["id"].as_str().unwrap();

    let list: Value = app.get_json("/api/bookmarks", b).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_ne!(list["items"][0]["id"], mine["id"]);
    for req in [
        app.get(&format!("/api/bookmarks/{id}")),
        app.patch(&format!("/api/bookmarks/{id}"))
            .json(&json!({"title": "stolen"})),
        app.delete(&format!("/api/bookmarks/{id}")),
    ] {
        let res = req.headers(app.tenant(b).await).send().await.unwrap();
        assert_eq!(res.status(), 404);
    }
    let tags: Value = app.get_json("/api/tags", b).await;
    assert_eq!(tags["tags"], json!([]));
    let mine_again: Value = app.get_json(&format!("/api/bookmarks/{id}"), a).await;
    assert_eq!(mine_again["title"], "");
    app.stop().await;
}

async fn expect_error(res: reqwest::Response, status: u16, code: &str) -> Value {
    let got = res.status().as_u16();
    let text = res.text().await.unwrap();
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({got}): {text}"));
    assert_eq!(
        (got, body["error"]["code"].as_str().unwrap_or_default()),
        (status, code),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    body
}

#[tokio::test]
async fn bad_input_gets_a_specific_json_4xx_never_a_500() {
    let (app, _) = app().await;
    let t = "validation-tenant";
    let as_t = app.tenant(t).await;
    let post = |body: Value| app.post("/api/bookmarks").headers(as_t.clone()).json(&body);

    for (body, field) in [
        (json!({"url": "ftp://example.com"}), "url"),
        (json!({"url": "javascript:alert(1)"}), "url"),
        (json!({"url": ""}), "url"),
        (
            json!({"url": format!("https://e.com/{}", "a".repeat(2048))}),
            "url",
        ),
        (
            json!({"url": "https://e.com", "title": "t".repeat(301)}),
            "title",
        ),
        (
            json!({"url": "https://e.com", "notes": "n".repeat(10_001)}),
            "notes",
        ),
        (
            json!({"url": "https://e.com", "tags": (0..21).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
            "tags",
        ),
        (
            json!({"url": "https://e.com", "tags": ["x".repeat(41)]}),
            "tags",
        ),
    ] {
        let body = expect_error(post(body).send().await.unwrap(), 422, "validation_failed").await;
        assert_eq!(body["error"]["fields"][0]["field"], field, "{body}");
    }
    // Limits are inclusive.
    let ok = app
        .create(t, json!({"url": "https://e.com/max", "title": "é".repeat(300), "notes": "n".repeat(10_000),
            "tags": (0..20).map(|i| format!("Tag{i}{}", "x".repeat(30))).collect::<Vec<_>>()}))
        .await;
    assert_eq!(
        ok["tags"][0],
        format!("tag0{}", "x".repeat(30)),
        "tags are lower-cased"
    );

    let dup = app.create(t, json!({"url": "https://dup.example"})).await;
    let conflict = expect_error(
        post(json!({"url": "https://dup.example"}))
            .send()
            .await
            .unwrap(),
        409,
        "duplicate_url",
    )
    .await;
    assert_eq!(conflict["error"]["id"], dup["id"]);

    let raw = |body: &'static str| {
        app.post("/api/bookmarks")
            .headers(as_t.clone())
            .header("content-type", "application/json")
            .body(body)
    };
    expect_error(
        raw("{\"url\":").send().await.unwrap(),
        400,
        "malformed_json",
    )
    .await;
    expect_error(
        raw("{\"url\": 42}").send().await.unwrap(),
        400,
        "invalid_body",
    )
    .await;
    expect_error(
        raw("{\"url\": \"https://e.com\", \"colour\": 1}")
            .send()
            .await
            .unwrap(),
        400,
        "invalid_body",
    )
    .await;
    expect_error(
        app.post("/api/bookmarks")
            .headers(as_t.clone())
            .body("{}")
            .send()
            .await
            .unwrap(),
        415,
        "unsupported_media_type",
    )
    .await;
    let huge = format!(
        "{{\"url\": \"https://e.com\", \"notes\": \"{}\"}}",
        "n".repeat(200_000)
    );
    expect_error(
        app.post("/api/bookmarks")
            .headers(as_t.clone())
            .header("content-type", "application/json")
            .body(huge)
            .send()
            .await
            .unwrap(),
        413,
        "payload_too_large",
    )
    .await;

    let missing = "/api/bookmarks/01900000-0000-7000-8000-000000000000";
    let cases = [
        (app.get(missing), 404, "not_found"),
        (app.get("/api/bookmarks/not-a-uuid"), 404, "not_found"),
        (
            app.patch(missing).json(&json!({"title": "x"})),
            404,
            "not_found",
        ),
        (app.delete(missing), 404, "not_found"),
        (app.get("/api/bookmarks?limit=101"), 400, "invalid_limit"),
        (app.get("/api/bookmarks?limit=0"), 400, "invalid_limit"),
        (app.get("/api/bookmarks?limit=ten"), 400, "invalid_query"),
        (app.get("/api/bookmarks?cursor=zzz"), 400, "invalid_cursor"),
    ];
    for (request, status, code) in cases {
        let res = request.headers(as_t.clone()).send().await.unwrap();
        expect_error(res, status, code).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn a_missing_key_is_a_401_and_a_malformed_tenant_header_a_400_that_says_why() {
    let (app, _) = app().await;
    let missing = app.get("/api/bookmarks").send().await.unwrap();
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    let body = expect_error(missing, 401, "missing_credentials").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer")
    );
    let longest = "a".repeat(64);
    let key = format!("Bearer {}", app.key(&longest).await);
    for (bad, why) in [
        ("", "empty"),
        ("-starts-with-dash", "start with a letter or digit"),
        ("has space", "only contain"),
        ("semi;colon", "only contain"),
        (&"a".repeat(65), "longer than 64"),
    ] {
        let res = app
            .get("/api/bookmarks")
            .header("authorization", &key)
            .header("X-Tenant-Id", bad)
            .send()
            .await
            .unwrap();
        let body = expect_error(res, 400, "invalid_tenant").await;
        assert!(
            body["error"]["message"].as_str().unwrap().contains(why),
            "{bad:?}: {body}"
        );
    }
    let ok = app.get_as("/api/bookmarks", &longest).await;
    assert_eq!(ok.status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn lists_are_newest_first_with_keyset_pages_tag_filter_and_search() {
    let (app, _) = app().await;
    let t = "pager";
    let mut ids = Vec::new();
    for i in 0..7 {
        let tags = if i % 2 == 0 {
            json!(["Even"])
        } else {
            json!(["odd"])
        };
        let b = app.create(t, json!({"url": format!("https://p.example/{i}"), "title": format!("Item {i} 100%"), "tags": tags})).await;
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    let page1: Value = app.get_json("/api/bookmarks?limit=3", t).await;
    let got: Vec<&str> = page1["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, [&ids[6], &ids[5], &ids[4]]);
    let cursor = page1["next_cursor"].as_str().unwrap();
    let page2: Value = app
        .get_json(&format!("/api/bookmarks?limit=3&cursor={cursor}"), t)
        .await;
    let got: Vec<&str> = page2["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, [&ids[3], &ids[2], &ids[1]]);
    let page3: Value = app
        .get(&format!(
            "/api/bookmarks?limit=3&cursor={}",
            page2["next_cursor"].as_str().unwrap()
        ))
        .headers(app.tenant(t).await)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page3["items"].as_array().unwrap().len(), 1);
    assert!(page3["next_cursor"].is_null());

    let even: Value = app.get_json("/api/bookmarks?tag=EVEN", t).await;
    assert_eq!(even["items"].as_array().unwrap().len(), 4);
    // Web-search syntax over words, whether or not the reindexer got to the rows yet.
    let search: Value = app.get_json("/api/bookmarks?q=item%203", t).await;
    assert_eq!(search["items"].as_array().unwrap().len(), 1);
    let either: Value = app
        .get_json("/api/bookmarks?q=%223%22%20or%20%225%22", t)
        .await;
    assert_eq!(either["items"].as_array().unwrap().len(), 2);
    let all: Value = app.get_json("/api/bookmarks?q=100%25", t).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 7);
    let none: Value = app
        .get_json("/api/bookmarks?q=item%20-even%20-odd", t)
        .await;
    assert_eq!(none["items"].as_array().unwrap().len(), 0);
    // A search that only leaves words out would scan the tenant: it is refused.
    let only_not = app.get_as("/api/bookmarks?q=-zzzz", t).await;
    expect_error(only_not, 400, "invalid_query").await;
    app.stop().await;
}

#[tokio::test]
async fn a_tenant_reads_its_own_writes_immediately_and_can_edit_and_delete() {
    let (app, _) = app().await;
    let t = "ryow-tenant";
    for i in 0..5 {
        let created = app
            .create(t, json!({"url": format!("https://r.example/{i}")}))
            .await;
        let id = created["id"].as_str().unwrap();
        let got = app.get_as(&format!("/api/bookmarks/{id}"), t).await;
        assert_eq!(got.status(), 200, "a fresh write is visible at once");
    }
    let b = app
        .create(t, json!({"url": "https://edit.example", "title": "before"}))
        .await;
    let id = b["id"].as_str().unwrap();
    let patched: Value = app
        .patch(&format!("/api/bookmarks/{id}"))
        .headers(app.tenant(t).await)
        .json(&json!({"title": "after", "tags": ["New", "new", " two "]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(patched["title"], "after");
    assert_eq!(patched["tags"], json!(["new", "two"]));
    assert_eq!(patched["url"], "https://edit.example");
    assert_eq!(patched["id"], b["id"], "ids never change");
    let conflict = app
        .patch(&format!("/api/bookmarks/{id}"))
        .headers(app.tenant(t).await)
        .json(&json!({"url": "https://r.example/0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(conflict.status(), 409);
    let del = app
        .delete(&format!("/api/bookmarks/{id}"))
        .headers(app.tenant(t).await)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 204);
    let gone = app.get_as(&format!("/api/bookmarks/{id}"), t).await;
    assert_eq!(gone.status(), 404);
    app.stop().await;
}

#[tokio::test]
async fn the_replica_streams_shard0_and_serves_lag_tolerant_reads() {
    let layout = layout("reads_without_token = \"replica\"").await;
    let app = TestApp::spawn(layout.settings(), "test-instance").await;
    let c = cluster().await;
    let (_, _, db, _) = &layout.shards[0];
    let in_recovery = sql(c.replica0, db, "SELECT pg_is_in_recovery()").await;
    assert_eq!(in_recovery[0][0].as_deref(), Some("t"));
    // "hooli" hashes to shard0 (slot 3974).
    app.create("hooli", json!({"url": "https://h.example", "tags": ["x"]}))
        .await;
    let replicated = eventually(Duration::from_secs(5), || async {
        sql(
            c.replica0,
            db,
            "SELECT count(*) FROM bookmarks WHERE tenant_id = 'hooli'",
        )
        .await[0][0]
            .as_deref()
            == Some("1")
    })
    .await;
    assert!(replicated, "the row reached the replica within 5 s");
    let served_by_replica = eventually(Duration::from_secs(5), || async {
        let tags: Value = app.get_json("/api/tags", "hooli").await;
        tags["served_by"] == "replica" && tags["tags"] == json!([{"tag": "x", "count": 1}])
    })
    .await;
    assert!(served_by_replica);
    let stats: Value = app.json("/api/stats").await;
    assert_eq!(stats["shards"][0]["served_by"], "replica");
    assert_eq!(stats["shards"][1]["served_by"], "primary");
    app.stop().await;
}

#[tokio::test]
async fn stats_fan_out_over_every_shard_in_declaration_order() {
    let (app, _) = app().await;
    app.create("hooli", json!({"url": "https://1.example"}))
        .await; // shard0
    app.create("acme-corp", json!({"url": "https://2.example"}))
        .await; // shard1
    app.create("acme-corp", json!({"url": "https://3.example"}))
        .await;
    let counts_match = eventually(Duration::from_secs(5), || async {
        let stats: Value = app.json("/api/stats").await;
        stats["shards"][0]["bookmarks"] == 1 && stats["shards"][1]["bookmarks"] == 2
    })
    .await;
    assert!(counts_match, "the replica catches up within 5 s");
    let stats: Value = app.json("/api/stats").await;
    assert_eq!(
        stats["shards"][1],
        json!({"name": "shard1", "slots": 8192, "bookmarks": 2, "tenants": 1, "status": "up", "served_by": "primary"})
    );
    assert_eq!(stats["shards"][0]["name"], "shard0");
    app.stop().await;
}

#[tokio::test]
async fn migrate_is_idempotent_and_status_reports_each_target() {
    let layout = layout("").await;
    let run = |args: &[&str]| bookmarks_cli(&layout, args);
    let embedded = |kind| bookmarks_sharded::migrate::expected_versions(kind).len();
    let (control_n, shard_n) = (embedded(Kind::Control), embedded(Kind::Shard));
    let before = run(&["migrate", "status"]);
    let table = String::from_utf8_lossy(&before.stdout).to_string();
    let pending = format!(" {shard_n} ");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("shard:shard1") && l.contains(" 0 ") && l.contains(&pending)),
        "{table}"
    );

    let first = run(&["migrate"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(
        out.contains(&format!("control: {control_n} applied"))
            && out.contains(&format!("shard:shard0: {shard_n} applied"))
            && out.contains(&format!("shard:shard1: {shard_n} applied")),
        "{out}"
    );
    let logs = String::from_utf8_lossy(&first.stderr);
    assert!(
        logs.contains("target=control") && logs.contains("target=shard:shard1"),
        "{logs}"
    );
    let control_pos = logs.find("target=control").unwrap();
    assert!(
        control_pos < logs.find("target=shard:shard0").unwrap(),
        "control migrates first"
    );

    let second = run(&["migrate"]);
    assert!(second.status.success());
    assert!(String::from_utf8_lossy(&second.stdout).contains("shard:shard1: 0 applied"));
    let after = String::from_utf8_lossy(&run(&["migrate", "status"]).stdout).to_string();
    for (target, n) in [
        ("control", control_n),
        ("shard:shard0", shard_n),
        ("shard:shard1", shard_n),
    ] {
        let line = after.lines().find(|l| l.starts_with(target)).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cols[1..3], [n.to_string().as_str(), "0"], "{line}");
    }
    let known = sql(
        layout.control.0,
        &layout.control.1,
        "SELECT name FROM known_shards ORDER BY name",
    )
    .await;
    assert_eq!(
        known,
        vec![
            vec![Some("shard0".to_owned())],
            vec![Some("shard1".to_owned())]
        ]
    );

    let unknown = run(&["migrate", "--shard", "shard9"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no shard is named \"shard9\""));
}

#[tokio::test]
async fn serve_does_not_migrate_unless_asked_and_readiness_says_so() {
    let layout = layout("").await;
    let app = TestApp::spawn_unmigrated(layout.settings(), "unmigrated").await;
    // On a loaded machine a probe may time out ("unreachable", "no answer within …"); what
    // readiness must say once it reaches a database is that its migrations are pending. Every
    // answer meanwhile is a 503.
    let pending = |body: &Value, component: &str| {
        body["components"][component]["details"]["primary"]
            .as_str()
            .is_some_and(|d| d.contains("pending"))
    };
    let mut body = Value::Null;
    for _ in 0..60 {
        let res = app.get("/ready?scope=replica").send().await.unwrap();
        assert_eq!(res.status(), 503, "no balancer sends requests to it either");
        let res = app.get("/ready").send().await.unwrap();
        assert_eq!(res.status(), 503);
        body = res.json().await.unwrap();
        if ["db:control", "db:shard:shard0", "db:shard:shard1"]
            .iter()
            .all(|c| pending(&body, c))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(pending(&body, "db:control"), "{body}");
    assert!(pending(&body, "db:shard:shard1"), "{body}");
    assert_eq!(
        app.get("/health").send().await.unwrap().status(),
        200,
        "liveness ignores the database"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_replica_stays_in_its_balancer_while_a_newer_release_migrates_the_control_database() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "newer-schema").await;
    let (port, db) = &l.control;
    // What the next release's `bookmarks migrate` leaves behind: a migration this build
    // does not know.
    sql(
        *port,
        db,
        "INSERT INTO __diesel_schema_migrations (version) VALUES ('29991231000000')",
    )
    .await;
    let told = eventually(Duration::from_secs(10), || async {
        app.json("/ready").await["components"]["db:control"]["details"]["primary"]
            .as_str()
            .is_some_and(|d| d.contains("newer schema"))
    })
    .await;
    assert!(
        told,
        "readiness says the control database is ahead of this build"
    );
    assert_eq!(app.get("/ready").send().await.unwrap().status(), 503);
    let res = app.get("/ready?scope=replica").send().await.unwrap();
    assert_eq!(
        res.status(),
        200,
        "its schema still serves this build, so a rolling update keeps the old replicas"
    );
    assert_eq!(
        app.get_as("/api/bookmarks", "acme-corp").await.status(),
        200,
        "and it serves"
    );
    app.stop().await;
}

/// `ready_probes_total` as `/metrics` shows it (0 before the first probe).
async fn ready_probes(app: &TestApp) -> u64 {
    app.metrics_text()
        .await
        .lines()
        .find_map(|l| l.strip_prefix("ready_probes_total "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn ready_answers_every_caller_from_one_probe_while_its_report_is_young() {
    // Alone: the probe counter is the process's, and other tests' apps probe too.
    let _alone = alone().await;
    let l = layout("").await;
    let options = bookmarks_sharded::startup::ServeOptions {
        ready_max_age: Duration::from_secs(3600),
        ..test_options("ready-cache")
    };
    let app = TestApp::spawn_with(l.settings(), options).await;
    let before = ready_probes(&app).await;
    let ask = || async {
        let res = app.get("/ready").send().await.unwrap();
        (res.status(), res.json::<Value>().await.unwrap())
    };
    let first: Vec<_> = futures::future::join_all((0..40).map(|_| ask())).await;
    assert_eq!(
        ready_probes(&app).await,
        before + 1,
        "40 callers at once share one probe"
    );
    let later: Vec<_> = futures::future::join_all((0..40).map(|_| ask())).await;
    assert_eq!(
        ready_probes(&app).await,
        before + 1,
        "and later callers get its report"
    );
    assert!(
        first.iter().chain(&later).all(|a| *a == first[0]),
        "every caller got the same report: {:?}",
        first[0]
    );
    app.stop().await;
}

#[tokio::test]
async fn health_readiness_and_metrics_describe_every_shard() {
    let (app, _) = app().await;
    app.create("acme-corp", json!({"url": "https://m.example"}))
        .await;
    let ready = eventually(Duration::from_secs(5), || async {
        let res = app.get("/ready").send().await.unwrap();
        let body: Value = res.json().await.unwrap();
        body["components"]["db:shard:shard0"]["details"]["reads"] == "replica"
    })
    .await;
    assert!(ready, "the replica becomes ready");
    let res = app.get("/actuator/health").send().await.unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    for c in ["db:control", "db:shard:shard0", "db:shard:shard1"] {
        assert_eq!(body["components"][c]["status"], "UP", "{body}");
    }
    let metrics = app.metrics_text().await;
    assert!(
        metrics
            .contains(r#"http_requests_total{route="/api/bookmarks",status="201",shard="shard1"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("http_request_duration_seconds_bucket"),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"db_pool_connections{shard="shard0",role="replica",state="max"} 4"#),
        "{metrics}"
    );
    let actuator: Value = app.json("/actuator/metrics").await;
    assert_eq!(actuator["database_shards"]["shard0"]["slots"], 8192);
    assert_eq!(
        actuator["database_shards"]["shard1"]["primary"]["max_size"],
        8
    );
    assert_eq!(
        actuator["total_max_connections"],
        // Four servers (control, shard0's primary and replica, shard1), one liveness session
        // each; each primary its reindexer leader's lock; shard0's replica its pool and the
        // replay poller's session on each of the shard's servers.
        4 + 8 + (8 + 1 + 4 + 2) + (8 + 1)
    );
    app.stop().await;
}

/// Submits an HTML form as a browser holding `cookies` would.
pub(crate) async fn post_form(
    app: &TestApp,
    path: &str,
    cookies: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    app.post(path)
        .header("cookie", cookies)
        .form(fields)
        .send()
        .await
        .unwrap()
}

pub(crate) fn cookie_value(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| {
            c.strip_prefix(&format!("{name}="))
                .map(|rest| rest.split(';').next().unwrap_or_default().to_owned())
        })
}

#[tokio::test]
async fn the_html_ui_signs_in_with_a_key_escapes_output_and_refuses_cross_site_forms() {
    let (app, layout) = app().await;
    let home = app.get("/").send().await.unwrap();
    assert_eq!(home.status(), 200);
    let csrf = cookie_value(&home, "csrf").expect("a csrf cookie is set");
    let html = home.text().await.unwrap();
    assert!(html.contains("Sign in") && html.contains(&csrf), "{html}");
    let jar = format!("csrf={csrf}");

    // No tenant without a key: a wrong key, another tenant's key, a malformed tenant.
    let key = app.key("ui-tenant").await;
    let others = app.key("ui-other").await;
    for (tenant, key, status) in [
        ("ui-tenant", "bks_nonsense", 422),
        ("ui-tenant", others.as_str(), 422),
        ("<b>", key.as_str(), 400),
    ] {
        let refused = post_form(
            &app,
            "/signin",
            &jar,
            &[("tenant", tenant), ("key", key), ("csrf", csrf.as_str())],
        )
        .await;
        assert_eq!(refused.status(), status, "{tenant} {key}");
        assert_eq!(cookie_value(&refused, "session"), None);
        assert!(!refused.text().await.unwrap().contains("<b>"));
    }
    let forged_signin = post_form(
        &app,
        "/signin",
        &jar,
        &[("tenant", "ui-tenant"), ("key", &key), ("csrf", "guess")],
    )
    .await;
    assert_eq!(forged_signin.status(), 403);

    let signed_in = post_form(
        &app,
        "/signin",
        &jar,
        &[
            ("tenant", "ui-tenant"),
            ("key", &key),
            ("csrf", csrf.as_str()),
        ],
    )
    .await;
    assert_eq!(signed_in.status(), 303);
    let set_cookie = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("session="))
        .expect("a session cookie is set");
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    assert!(!set_cookie.contains(&key), "the key is not in the cookie");
    let session = cookie_value(&signed_in, "session").unwrap();
    let jar = format!("csrf={csrf}; session={session}");

    let forged = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[("url", "https://x.example"), ("csrf", "guess")],
    )
    .await;
    assert_eq!(forged.status(), 403);
    let invalid = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[
            ("url", "ftp://x"),
            ("title", "keep me"),
            ("csrf", csrf.as_str()),
        ],
    )
    .await;
    assert_eq!(invalid.status(), 422);
    let page = invalid.text().await.unwrap();
    assert!(
        page.contains("url must be an http") && page.contains("keep me"),
        "inline message, input kept"
    );

    let created = post_form(
        &app,
        "/bookmarks",
        &jar,
        &[
            ("url", "https://x.example/?a=1&b=2"),
            ("title", "<script>alert('x')</script>"),
            ("tags", "Rust, web"),
            ("csrf", csrf.as_str()),
        ],
    )
    .await;
    assert_eq!(created.status(), 303);
    let list = app.get("/").header("cookie", &jar).send().await.unwrap();
    let owner = route_with_cli(&layout, &["ui-tenant".to_owned()])[0]["shard"].clone();
    assert_eq!(
        list.headers()["x-shard"].to_str().unwrap(),
        owner,
        "the page names its shard"
    );
    let html = list.text().await.unwrap();
    assert!(!html.contains("<script>alert"), "titles are escaped");
    assert!(
        html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"),
        "{html}"
    );
    assert!(html.contains("ui-tenant") && html.contains(">rust<"));

    // The session acts for its tenant only: a header naming another is refused.
    let other = app
        .get("/api/bookmarks")
        .header("cookie", &jar)
        .header("X-Tenant-Id", "someone-else")
        .send()
        .await
        .unwrap();
    expect_error(other, 403, "tenant_mismatch").await;
    let mine: Value = app
        .get("/api/bookmarks")
        .header("cookie", &jar)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine["items"][0]["title"], "<script>alert('x')</script>");
    // A browser signed in to the admin page sends its Basic credentials everywhere on the
    // origin; the session still proves the tenant.
    let with_basic = app
        .get("/api/bookmarks")
        .header("cookie", &jar)
        .header("authorization", "Basic YWRtaW46dG9rZW4=")
        .send()
        .await
        .unwrap();
    assert_eq!(with_basic.status(), 200);

    // A forged session signs nobody in.
    let forged_jar = format!("csrf={csrf}; session=ui-tenant%3A00%3A99999999999");
    let api = app
        .get("/api/bookmarks")
        .header("cookie", &forged_jar)
        .send();
    expect_error(api.await.unwrap(), 401, "invalid_session").await;
    let page = app
        .get("/")
        .header("cookie", &forged_jar)
        .send()
        .await
        .unwrap();
    assert!(page.text().await.unwrap().contains("Sign in"));

    // Signing out ends the session, a copy of the cookie included; so does revoking its key.
    let out = post_form(&app, "/signout", &jar, &[("csrf", csrf.as_str())]).await;
    assert_eq!(out.status(), 303);
    assert!(
        out.headers()
            .get_all("set-cookie")
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("session=;")),
        "the cookie is removed"
    );
    let still = app
        .get("/api/bookmarks")
        .header("cookie", &jar)
        .send()
        .await
        .unwrap();
    assert_eq!(
        still.status(),
        401,
        "a copied cookie is refused once signed out"
    );
    let signed_in = post_form(
        &app,
        "/signin",
        &format!("csrf={csrf}"),
        &[("tenant", "ui-tenant"), ("key", &key), ("csrf", &csrf)],
    )
    .await;
    let jar = format!(
        "csrf={csrf}; session={}",
        cookie_value(&signed_in, "session").unwrap()
    );
    let again = app
        .get("/api/bookmarks")
        .header("cookie", &jar)
        .send()
        .await;
    assert_eq!(again.unwrap().status(), 200, "signing in again works");
    revoke_keys(&app.settings, "ui-tenant").await;
    let ended = eventually(Duration::from_secs(1), || async {
        let res = app
            .get("/api/bookmarks")
            .header("cookie", &jar)
            .send()
            .await;
        res.is_ok_and(|r| r.status() == 401)
    })
    .await;
    assert!(ended, "a revoked key ends its sessions within a second");
    let page = app.get("/").header("cookie", &jar).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("Sign in"));
    app.stop().await;
}

/// Why the test transaction below ended without committing.
enum TxError {
    RolledBackOnPurpose,
    Db(diesel::result::Error),
}

impl From<diesel::result::Error> for TxError {
    fn from(e: diesel::result::Error) -> Self {
        TxError::Db(e)
    }
}

impl bookmarks_sharded::web::extract::QueryFailure for TxError {
    fn database_error(&self) -> Option<&diesel::result::Error> {
        match self {
            TxError::RolledBackOnPurpose => None,
            TxError::Db(e) => Some(e),
        }
    }

    fn into_database_error(self) -> Result<diesel::result::Error, Self> {
        match self {
            TxError::Db(e) => Ok(e),
            own => Err(own),
        }
    }
}

impl bookmarks_sharded::web::extract::WorkError for TxError {
    fn into_api(self) -> bookmarks_sharded::web::error::ApiError {
        match self {
            TxError::RolledBackOnPurpose => bookmarks_sharded::web::error::ApiError::BadRequest {
                code: "rolled_back",
                message: "the handler rolled back".to_owned(),
            },
            TxError::Db(e) => e.into_api(),
        }
    }
}

/// A handler that writes two rows in one `ShardedDb::tx`, optionally failing after the first.
async fn two_rows_in_one_transaction(
    mut db: bookmarks_sharded::web::extract::ShardedDb,
    axum::extract::Path(fail): axum::extract::Path<bool>,
) -> Result<&'static str, bookmarks_sharded::web::error::ApiError> {
    use diesel_async::RunQueryDsl;
    db.tx(|conn| {
        Box::pin(async move {
            for url in ["https://tx.example/1", "https://tx.example/2"] {
                diesel::sql_query("INSERT INTO bookmarks (tenant_id, id, url) VALUES ('tx-tenant', gen_random_uuid(), $1)")
                    .bind::<diesel::sql_types::Text, _>(url)
                    .execute(conn)
                    .await?;
                if fail {
                    return Err(TxError::RolledBackOnPurpose);
                }
            }
            Ok(())
        })
    })
    .await?;
    Ok("committed")
}

#[tokio::test]
async fn sharded_db_tx_commits_or_rolls_back_on_the_tenants_own_shard() {
    use tower::ServiceExt;
    let l = layout("").await;
    migrated(&l.settings()).await;
    let options = bookmarks_sharded::startup::ServeOptions {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    let app = bookmarks_sharded::startup::Application::build(l.settings(), options)
        .await
        .unwrap();
    // A route of one's own, as a tenant route: behind the app's tenant authentication.
    let routes = axum::Router::new().route(
        "/tx/{fail}",
        axum::routing::post(two_rows_in_one_transaction),
    );
    let router: axum::Router = app
        .state()
        .tenant_routes(routes.into())
        .with_state(app.state().clone())
        .into();
    let key = format!("Bearer {}", create_key(&l.settings(), "tx-tenant").await);
    let call = |fail: bool| {
        let req = axum::http::Request::post(format!("/tx/{fail}"))
            .header("X-Tenant-Id", "tx-tenant")
            .header("authorization", &key)
            .body(axum::body::Body::empty())
            .unwrap();
        router.clone().oneshot(req)
    };
    let route = route_with_cli(&l, &["tx-tenant".to_owned()]);
    let (port, db) = port_of(&l, route[0]["shard"].as_str().unwrap());
    let count = || {
        sql(
            port,
            &db,
            "SELECT count(*) FROM bookmarks WHERE tenant_id = 'tx-tenant'",
        )
    };

    let res = call(true).await.unwrap();
    assert_eq!(
        res.status(),
        400,
        "the handler's own error reaches the client"
    );
    assert_eq!(
        count().await[0][0].as_deref(),
        Some("0"),
        "the first insert was rolled back"
    );
    let res = call(false).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        count().await[0][0].as_deref(),
        Some("2"),
        "both inserts committed together"
    );
}

#[tokio::test]
async fn a_wrong_method_and_a_timed_out_request_answer_in_the_json_error_format() {
    let (app, layout) = app().await;
    let res = app
        .delete("/api/tags")
        .headers(app.tenant("hooli").await)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert!(
        res.headers()["allow"].to_str().unwrap().contains("GET"),
        "the Allow header survives"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DELETE")
    );

    // A shard that accepts connections and never answers: only the request timeout ends it.
    let black_hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut stuck = layout.clone();
    stuck.shards[1].1 = black_hole.local_addr().unwrap().port();
    let mut options = test_options("timeout");
    options.request_timeout = Duration::from_millis(300);
    // Two failed liveness checks would open the shard's breaker and answer 503
    // shard_unavailable instead; on a slow machine a second check can come first.
    options.liveness_interval = Duration::from_secs(3600);
    let app = TestApp::start(stuck.settings(), options).await;
    assert_eq!(hash_shard(&app.settings, "acme-corp"), "shard1");
    let res = app.get_as("/api/bookmarks", "acme-corp").await;
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    drop(black_hole);
}

#[tokio::test]
async fn a_connection_prepares_the_create_statement_once_and_reuses_it() {
    use bookmarks_sharded::bookmarks::model::NewBookmarkInput;
    use bookmarks_sharded::bookmarks::store;
    use bookmarks_sharded::tenancy::TenantId;
    use diesel::QueryableByName;
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let (_app, layout) = app().await;
    let (_, port, db, _) = &layout.shards[0];
    let mut conn = AsyncPgConnection::establish(&url(*port, db)).await.unwrap();
    let tenant = TenantId::parse(&unique("prepared")).unwrap();
    for i in 0..3 {
        let draft = NewBookmarkInput {
            url: format!("https://example.com/prepared/{i}"),
            title: format!("prepared {i}"),
            notes: String::new(),
            tags: vec!["one".into(), "two".into()],
            ..NewBookmarkInput::default()
        }
        .validate()
        .unwrap();
        store::insert(&mut conn, &tenant, &draft, None)
            .await
            .unwrap();
    }
    // A statement prepared per call is closed after it runs and never listed here; a
    // cached one stays, once.
    let prepared: N = diesel::sql_query(
        "SELECT count(*) AS n FROM pg_prepared_statements \
         WHERE statement LIKE 'INSERT INTO \"bookmarks\"%'",
    )
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        prepared.n, 1,
        "three creates on one connection, one prepared insert"
    );
}

#[tokio::test]
async fn a_connection_prepares_the_patch_and_the_search_statements_once_whatever_they_hold() {
    use bookmarks_sharded::bookmarks::model::{BookmarkPatch, NewBookmarkInput};
    use bookmarks_sharded::bookmarks::store::{self, ListQuery};
    use bookmarks_sharded::tenancy::TenantId;
    use diesel::QueryableByName;
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    async fn prepared(conn: &mut AsyncPgConnection, like: &str) -> i64 {
        diesel::sql_query(format!(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE '{like}' \
             AND statement NOT LIKE '%pg_prepared_statements%'"
        ))
        .get_result::<N>(conn)
        .await
        .unwrap()
        .n
    }
    let (_app, layout) = app().await;
    let (_, port, db, _) = &layout.shards[0];
    let mut conn = AsyncPgConnection::establish(&url(*port, db)).await.unwrap();
    let tenant = TenantId::parse(&unique("prepared")).unwrap();
    // Declared as the request path declares it: the search's index step answers only for
    // the session's declared tenant, whoever the session is.
    diesel::sql_query(format!(
        "SELECT set_config('app.tenant_id', '{}', false)",
        tenant.as_str()
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    // More rows than a search checks one by one, so that a narrow search asks the index too.
    let mut ids = Vec::new();
    for i in 0..300 {
        let draft = NewBookmarkInput {
            url: format!("https://example.com/prepared/{i}"),
            title: format!("prepared {i}"),
            notes: if i == 3 {
                "a rare zeppelin".into()
            } else {
                String::new()
            },
            tags: vec!["one".into()],
            ..NewBookmarkInput::default()
        }
        .validate()
        .unwrap();
        ids.push(
            store::insert(&mut conn, &tenant, &draft, None)
                .await
                .unwrap()
                .id,
        );
    }

    // Three patches, each setting other fields: one statement.
    let patches = [
        BookmarkPatch {
            title: Some("first".into()),
            ..BookmarkPatch::default()
        },
        BookmarkPatch {
            url: Some("https://example.com/prepared/moved".into()),
            tags: Some(vec!["two".into()]),
            ..BookmarkPatch::default()
        },
        BookmarkPatch {
            notes: Some("noted".into()),
            ..BookmarkPatch::default()
        },
    ];
    for patch in &patches {
        store::update(&mut conn, &tenant, ids[0], patch)
            .await
            .unwrap()
            .expect("the bookmark is there");
    }
    let row = store::get(&mut conn, &tenant, ids[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.title.as_str(), row.url.as_str(), row.notes.as_str()),
        ("first", "https://example.com/prepared/moved", "noted"),
        "each patch changed its fields and kept the others"
    );
    assert_eq!(row.tags, ["two"]);
    assert_eq!(prepared(&mut conn, "UPDATE bookmarks SET%").await, 1);

    // Three searches for other words: a broad one fills its page from the newest rows, a
    // narrow one asks the index for older ones too; each statement is prepared once.
    for q in ["prepared", "zeppelin", "rare"] {
        let query = ListQuery {
            q: Some(q.into()),
            limit: 20,
            ..ListQuery::default()
        };
        let page = store::list(&mut conn, &tenant, &query).await.unwrap();
        assert!(!page.items.is_empty(), "{q} finds something");
    }
    let searches = prepared(&mut conn, "%websearch_to_tsquery%").await;
    assert_eq!(
        searches, 2,
        "the newest rows' check and the index's, once each"
    );
}
