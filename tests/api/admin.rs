//! The admin page and its JSON twins against real shards: access control, the shard cards,
//! a browse that pages across shards without gaps or repeats, tenant lookup with strays,
//! placement through the same rules as `bookmarks pin`, and partial answers with a dead
//! shard.

use std::collections::BTreeSet;

use crate::support::*;
use serde_json::{Value, json};

const TOKEN: &str = "test-admin-token-0123456789";

async fn admin_app(layout: &Layout, instance: &str) -> TestApp {
    let settings = layout.settings();
    migrated(&settings).await;
    start_admin(settings, instance).await
}

async fn start_admin(
    settings: bookmarks_sharded::configuration::Settings,
    instance: &str,
) -> TestApp {
    let mut options = test_options(instance);
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    TestApp::start(settings, options).await
}

/// A layout whose shards have no replica, so reads see writes at once.
async fn primaries_only() -> Layout {
    let mut layout = layout("[sharding]\ndirectory_router = true").await;
    for shard in &mut layout.shards {
        shard.3 = None;
    }
    layout
}

async fn admin_json(app: &TestApp, path: &str) -> Value {
    let res = app.get(path).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    res.json().await.unwrap()
}

/// GETs `path` with the token, expecting an error `status`; returns the JSON body.
async fn admin_refusal(app: &TestApp, path: &str, status: u16) -> Value {
    let res = app.get(path).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(res.status(), status, "{path}");
    res.json().await.unwrap()
}

/// The ids of a browse page's items, in order.
fn item_ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn admin_html(app: &TestApp, path: &str) -> String {
    let res = app.get(path).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    res.text().await.unwrap()
}

#[tokio::test]
async fn without_a_token_the_admin_page_does_not_exist() {
    let app = TestApp::spawn(layout("").await.settings(), "no-admin").await;
    for path in ["/admin", "/admin/api/shards"] {
        let res = app.get(path).bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found");
    }
}

#[tokio::test]
async fn only_the_token_opens_the_admin_page_by_basic_or_bearer() {
    let app = admin_app(&layout("").await, "admin-auth").await;
    for (what, req) in [
        ("no credentials", app.get("/admin")),
        (
            "wrong bearer",
            app.get("/admin").bearer_auth("nope-nope-nope-nope"),
        ),
        (
            "wrong password",
            app.get("/admin").basic_auth("ops", Some("guess")),
        ),
        (
            "token as user name",
            app.get("/admin/api/shards").basic_auth(TOKEN, None::<&str>),
        ),
    ] {
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 401, "{what}");
        let challenge = res.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(challenge.starts_with("Basic realm="), "{what}: {challenge}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{what}");
        assert_eq!(
            body.as_object().unwrap().len(),
            1,
            "{what}: nothing but the error: {body}"
        );
    }
    let page = app
        .get("/admin")
        .basic_auth("any-user-name", Some(TOKEN))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("data-shard=\"shard0\"") && html.contains("data-shard=\"shard1\""));
    assert!(html.contains("<svg"), "the slot map is inline SVG");
    let res = app
        .get("/admin/api/shards")
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn the_shard_cards_report_counts_servers_pools_and_schema_of_every_shard() {
    let layout = layout("").await;
    let app = admin_app(&layout, "admin-cards").await;
    app.create("hooli", json!({"url": "https://h.example/1"}))
        .await; // shard0
    app.create("acme-corp", json!({"url": "https://a.example/1"}))
        .await; // shard1
    app.create("acme-corp", json!({"url": "https://a.example/2"}))
        .await;

    // shard0 answers from its replica, which may need a moment to replay the write.
    let counted = eventually(std::time::Duration::from_secs(5), || async {
        let cards = admin_json(&app, "/admin/api/shards").await;
        cards["shards"][0]["bookmarks"] == 1 && cards["shards"][1]["bookmarks"] == 2
    })
    .await;
    let cards = admin_json(&app, "/admin/api/shards").await;
    assert!(counted, "{cards}");
    let s0 = &cards["shards"][0];
    let s1 = &cards["shards"][1];
    assert_eq!(s0["name"], "shard0");
    assert_eq!(s0["slot_count"], 8192);
    assert_eq!(s0["ranges"], "0-8191");
    assert_eq!(s0["primary"]["up"], true);
    assert_eq!(s0["replica"]["up"], true, "{s0}");
    assert!(
        s0["replica"]["lag_ms"].is_u64(),
        "replica lag reported: {s0}"
    );
    assert_eq!(s0["counted_on"], "replica");
    assert_eq!(s1["replica"], Value::Null);
    assert_eq!(s1["counted_on"], "primary");
    assert_eq!(s1["tenants"], 1);
    assert_eq!(s1["migration"], s1["expected_migration"]);
    assert!(s1["pools"][0]["max_size"].as_u64().unwrap() > 0);
    let coverage = cards["coverage"].as_array().unwrap();
    assert!(coverage.iter().all(|c| c["status"] == "ok"), "{cards}");
    assert_eq!(coverage[0]["server"], "replica");
    assert!(coverage[0]["replica_lag_ms"].is_u64());

    let slots = admin_json(&app, "/admin/api/slots").await;
    assert_eq!(slots["slot_count"], 16384);
    assert_eq!(slots["shards"][1]["ranges"], json!([[8192, 16383]]));
}

#[tokio::test]
async fn browsing_pages_across_shards_newest_first_forward_and_back_without_gaps() {
    let layout = primaries_only().await;
    let app = admin_app(&layout, "admin-browse").await;
    let tenants = ["hooli", "acme-corp", "initech", "globex", "umbrella"];
    let mut created = Vec::new();
    for round in 0..3 {
        for t in tenants {
            let tags = if round == 1 {
                json!(["pick"])
            } else {
                json!([])
            };
            let b = app
                .create(
                    t,
                    json!({"url": format!("https://{t}.example/{round}"), "tags": tags}),
                )
                .await;
            created.push((
                b["id"].as_str().unwrap().to_owned(),
                b["shard"].as_str().unwrap().to_owned(),
            ));
        }
    }
    let shards: BTreeSet<&str> = created.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(shards.len(), 2, "the rows are spread over both shards");

    // Forward, three at a time: every row once, newest first.
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut path = "/admin/api/bookmarks?limit=3".to_owned();
    loop {
        let page = admin_json(&app, &path).await;
        assert_eq!(page["complete"], true);
        let ids = item_ids(&page);
        seen.extend(ids.clone());
        pages.push((ids, page["prev_cursor"].clone()));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/admin/api/bookmarks?limit=3&cursor={c}"),
            None => break,
        }
    }
    let newest_first: Vec<String> = created.iter().rev().map(|(id, _)| id.clone()).collect();
    assert_eq!(seen, newest_first, "one merged order, no gaps, no repeats");
    assert_eq!(pages.len(), 5);
    assert_eq!(pages[0].1, Value::Null, "the first page has nothing newer");

    // Back from the last page: each `prev` page is the page before it.
    for i in (1..pages.len()).rev() {
        let prev = pages[i].1.as_str().expect("a later page links back");
        let page = admin_json(&app, &format!("/admin/api/bookmarks?limit=3&prev={prev}")).await;
        let ids = item_ids(&page);
        assert_eq!(ids, pages[i - 1].0, "page {i} back");
    }

    // Filters: by tenant, by tag, and both.
    let page = admin_json(&app, "/admin/api/bookmarks?tenant=initech").await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|i| i["tenant"] == "initech"));
    let page = admin_json(&app, "/admin/api/bookmarks?tag=pick").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 5);
    let page = admin_json(&app, "/admin/api/bookmarks?tag=pick&tenant=hooli").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);

    // Bad input names the field.
    for (query, code) in [
        ("cursor=yesterday", "invalid_cursor"),
        ("tenant=bad%20tenant", "invalid_tenant"),
        ("limit=0", "invalid_limit"),
        (
            "cursor=1_0193a000-0000-7000-8000-000000000000&prev=1_0193a000-0000-7000-8000-000000000000",
            "invalid_cursor",
        ),
    ] {
        let body = admin_refusal(&app, &format!("/admin/api/bookmarks?{query}"), 400).await;
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }

    // The HTML page pages too, without JavaScript: plain links.
    let first = admin_html(&app, "/admin?tenant=&tag=").await;
    assert!(first.contains(&newest_first[0]), "the newest row is listed");
    assert!(
        !first.contains("id=\"browse-newer\""),
        "no Newer link on the first page"
    );
    let cursor = admin_json(&app, "/admin/api/bookmarks?limit=3").await["next_cursor"].clone();
    let later = admin_html(&app, &format!("/admin?cursor={}", cursor.as_str().unwrap())).await;
    assert!(later.contains("id=\"browse-newer\""), "a Newer link back");
    assert!(
        !later.contains(&newest_first[0]),
        "the newest rows are on the page before"
    );
    assert!(later.contains(&newest_first[3]));
}

#[tokio::test]
async fn a_tenant_lookup_counts_rows_on_every_shard_and_flags_strays() {
    let layout = primaries_only().await;
    let app = admin_app(&layout, "admin-lookup").await;
    app.create("initech", json!({"url": "https://i.example/1"}))
        .await;
    let home = hash_shard(&app.settings, "initech");
    let away = other_shard(&home);
    // A row left where initech does not route, as an interrupted move could leave it.
    let (port, db) = port_of(&layout, away);
    sql(
        port,
        &db,
        "INSERT INTO bookmarks (tenant_id, id, url) VALUES ('initech', gen_random_uuid(), 'https://stray.example')",
    )
    .await;
    record_unfinished_move(&layout, "initech", &home, away).await;

    let report = admin_json(&app, "/admin/api/tenants/initech").await;
    assert_eq!(report["hash_shard"], home.as_str());
    assert_eq!(report["effective_shard"], home.as_str());
    assert_eq!(report["via"], "hash");
    assert_eq!(report["directory_pin"], Value::Null);
    assert_eq!(report["strays"], true);
    let rows = report["rows"].as_array().unwrap();
    let on = |s: &str| rows.iter().find(|r| r["shard"] == s).unwrap().clone();
    // Each bookmark counts with its change feed entry.
    assert_eq!(on(&home)["rows"], 2);
    assert_eq!(on(&home)["serves"], true);
    assert_eq!(on(&home)["stray"], false);
    assert_eq!(on(away)["rows"], 2);
    assert_eq!(on(away)["stray"], true);
    assert_eq!(report["moves"][0]["state"], "copying");
    let moves = admin_json(&app, "/admin/api/moves").await;
    assert_eq!(moves["moves"][0]["tenants"], json!(["initech"]));

    let html = admin_html(&app, "/admin?lookup=initech").await;
    assert!(html.contains("id=\"lookup-result\""));
    assert!(html.contains("stray rows"));

    let body = admin_refusal(&app, "/admin/api/tenants/no%20such", 400).await;
    assert_eq!(body["error"]["code"], "invalid_tenant");
}

/// The CSRF cookie and the form token of a freshly loaded admin page.
async fn form_token(app: &TestApp) -> (String, String) {
    let res = app.get("/admin").bearer_auth(TOKEN).send().await.unwrap();
    let cookie = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("csrf="))
        .expect("a csrf cookie");
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let html = res.text().await.unwrap();
    let marker = "name=\"csrf\" value=\"";
    let at = html.find(marker).unwrap() + marker.len();
    let token = html[at..].split('"').next().unwrap().to_owned();
    (cookie, token)
}

#[tokio::test]
async fn the_placement_form_pins_and_unpins_under_the_same_rules_as_the_cli() {
    let layout = primaries_only().await;
    let app = admin_app(&layout, "admin-place").await;
    let (cookie, token) = form_token(&app).await;
    let post = |path: &'static str, form: Vec<(&'static str, String)>| {
        let cookie = cookie.clone();
        let app = &app;
        async move {
            app.post(path)
                .bearer_auth(TOKEN)
                .header("cookie", cookie)
                .form(&form)
                .send()
                .await
                .unwrap()
        }
    };

    // Without the form token: refused, nothing written.
    let res = post(
        "/admin/pin",
        vec![("tenant", "fresh-co".into()), ("shard", "shard1".into())],
    )
    .await;
    assert_eq!(res.status(), 403);
    let rows = |t: &'static str| directory_row(&layout, t);
    assert!(rows("fresh-co").await.is_empty());

    // A tenant with no rows can be placed anywhere.
    let target = other_shard(&hash_shard(&app.settings, "fresh-co")).to_owned();
    let res = post(
        "/admin/pin",
        vec![
            ("tenant", "fresh-co".into()),
            ("shard", target.clone()),
            ("note", "trial".into()),
            ("csrf", token.clone()),
        ],
    )
    .await;
    assert_eq!(res.status(), 303);
    assert!(
        res.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/admin?lookup=fresh-co")
    );
    assert_eq!(rows("fresh-co").await, vec![vec![Some(target.clone())]]);
    assert_eq!(served_shard(&app, "fresh-co").await.unwrap(), target);

    // A tenant with rows is not stranded: 409, the reason on the page, no directory row.
    app.create("busy-co", json!({"url": "https://b.example"}))
        .await;
    let away = other_shard(&hash_shard(&app.settings, "busy-co")).to_owned();
    let res = post(
        "/admin/pin",
        vec![
            ("tenant", "busy-co".into()),
            ("shard", away),
            ("csrf", token.clone()),
        ],
    )
    .await;
    assert_eq!(res.status(), 409);
    let html = res.text().await.unwrap();
    assert!(html.contains("id=\"placement-error\""), "the page says why");
    assert!(html.contains("does not move its data"), "{html}");
    assert!(rows("busy-co").await.is_empty());

    // Bad input is named.
    let res = post(
        "/admin/pin",
        vec![
            ("tenant", "busy-co".into()),
            ("shard", "shard9".into()),
            ("csrf", token.clone()),
        ],
    )
    .await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("no shard is named"));

    // Unpin puts fresh-co back on its hash shard (it has no rows to strand).
    let res = post(
        "/admin/unpin",
        vec![("tenant", "fresh-co".into()), ("csrf", token.clone())],
    )
    .await;
    assert_eq!(res.status(), 303);
    assert!(rows("fresh-co").await.is_empty());
    let pins = admin_json(&app, "/admin/api/pins").await;
    assert_eq!(pins["pins"], json!([]));
}

#[tokio::test]
async fn with_a_shard_down_every_view_answers_with_what_it_has_and_names_the_missing_shard() {
    let healthy = primaries_only().await;
    let seed = admin_app(&healthy, "admin-seed").await;
    seed.create("hooli", json!({"url": "https://h.example/down"}))
        .await; // shard0
    let mut broken = healthy.clone();
    broken.shards[1].1 = free_port(); // nothing listens there
    let app = start_admin(broken.settings(), "admin-down").await;

    let cards = admin_json(&app, "/admin/api/shards").await;
    assert_eq!(cards["shards"][0]["bookmarks"], 1);
    assert_eq!(cards["shards"][1]["primary"]["up"], false);
    assert_eq!(cards["coverage"][1]["status"], "missing");
    assert_eq!(cards["coverage"][1]["reason"], "unreachable");
    let circuit = &cards["shards"][1]["circuits"][0];
    assert_eq!(circuit["role"], "primary", "{circuit}");
    assert_eq!(
        circuit["open"], true,
        "the failed checkout opened it: {circuit}"
    );
    assert_eq!(cards["shards"][0]["circuits"][0]["open"], false);

    let page = admin_json(&app, "/admin/api/bookmarks").await;
    assert_eq!(page["complete"], false);
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["shards"][1]["shard"], "shard1");
    assert_eq!(page["shards"][1]["status"], "missing");

    let html = admin_html(&app, "/admin").await;
    assert!(
        html.contains("primary circuit</dt><dd><span class=\"down\">open</span>"),
        "the card shows the open circuit"
    );
    let banner = html
        .split("id=\"banner\"")
        .nth(1)
        .and_then(|rest| rest.split("</div>").next())
        .expect("a banner");
    assert!(
        banner.contains("shard1 is missing: unreachable"),
        "{banner}"
    );
    assert!(
        !banner.contains("shard0"),
        "only the missing shard is named"
    );
}
