//! Who may act as a tenant: API keys (created, listed and revoked by the CLI and the admin
//! page), the tenant header that must agree with them, revocation reaching every server
//! process at once, and the request path's defences against input that costs work before
//! it is refused.

use std::time::{Duration, Instant};

use bookmarks_sharded::bookmarks::stats::STATS_FRESH_FOR;
use serde_json::{Value, json};

use crate::support::*;

const TOKEN: &str = "auth-test-admin-token-0123";

async fn expect(res: reqwest::Response, status: u16, code: &str) -> Value {
    let got = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or_default();
    assert_eq!(
        (got, body["error"]["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    body
}

/// The status of a list request made with `key`.
async fn list_with(app: &TestApp, key: &str) -> u16 {
    let res = app
        .get("/api/bookmarks")
        .header("authorization", format!("Bearer {key}"))
        .send()
        .await
        .unwrap();
    res.status().as_u16()
}

async fn admin_app(layout: &Layout, name: &str) -> TestApp {
    let mut options = test_options(name);
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    TestApp::spawn_with(layout.settings(), options).await
}

#[tokio::test]
async fn a_key_acts_only_for_its_own_tenant_whatever_the_header_says() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "auth-cross").await;
    let b_bookmark = app
        .create(
            "tenant-b",
            json!({"url": "https://b.example", "title": "b's"}),
        )
        .await;
    let id = b_bookmark["id"].as_str().unwrap();
    let a_key = format!("Bearer {}", app.key("tenant-a").await);

    // A's key naming B in the header: refused, nothing looked up on a shard.
    let res = app
        .get("/api/bookmarks")
        .header("authorization", &a_key)
        .header("X-Tenant-Id", "tenant-b")
        .send()
        .await
        .unwrap();
    let body = expect(res, 403, "tenant_mismatch").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Tenant-Id")
    );

    // A's key alone acts for A: B's bookmark is not found, changed or deleted.
    for req in [
        app.get(&format!("/api/bookmarks/{id}")),
        app.patch(&format!("/api/bookmarks/{id}"))
            .json(&json!({"title": "stolen"})),
        app.delete(&format!("/api/bookmarks/{id}")),
    ] {
        let res = req.header("authorization", &a_key).send().await.unwrap();
        assert_eq!(res.status(), 404);
    }
    let as_a: Value = app
        .get("/api/bookmarks")
        .header("authorization", &a_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        as_a["tenant"], "tenant-a",
        "without the header the key's tenant is used"
    );
    assert_eq!(as_a["items"], json!([]));
    let b = app
        .get_json(&format!("/api/bookmarks/{id}"), "tenant-b")
        .await;
    assert_eq!(b["title"], "b's", "nothing of B changed");
    app.stop().await;
}

/// A port that accepts connections and counts them (and never answers).
async fn counting_port() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn a_refused_request_reaches_no_shard_and_says_why_in_json() {
    use std::sync::atomic::Ordering;
    // Both shards are a port that counts the connections it gets.
    let mut l = layout("").await;
    let (port, connects) = counting_port().await;
    for shard in &mut l.shards {
        shard.1 = port;
        shard.3 = None;
    }
    let control_only = bookmarks_sharded::migrate::TargetFilter {
        control_only: true,
        ..Default::default()
    };
    let targets = bookmarks_sharded::migrate::targets(&l.settings().topology, &control_only);
    bookmarks_sharded::migrate::run(&targets.unwrap())
        .await
        .unwrap();
    let mut options = test_options("auth-no-shard");
    // No background work, and one liveness check (at start): after that, only a request
    // would connect to a shard.
    options.liveness_interval = Duration::from_secs(3600);
    options.background = false;
    let app = TestApp::start(l.settings(), options).await;
    let settled = eventually(Duration::from_secs(5), || async {
        connects.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(settled, "the start-up liveness checks connected");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = connects.load(Ordering::SeqCst);
    let valid_format_unknown = format!("Bearer bks_{}", "0".repeat(64));
    let non_utf8 = reqwest::header::HeaderValue::from_bytes(b"Bearer \xff\xfe").unwrap();
    let cases: Vec<(reqwest::RequestBuilder, &str)> = vec![
        (app.get("/api/bookmarks"), "missing_credentials"),
        (
            app.get("/api/bookmarks").header("authorization", ""),
            "invalid_authorization",
        ),
        (
            app.get("/api/bookmarks")
                .header("authorization", "Basic YTpi"),
            "invalid_authorization",
        ),
        (
            app.get("/api/bookmarks").header("authorization", "Bearer"),
            "invalid_authorization",
        ),
        (
            app.get("/api/bookmarks")
                .header("authorization", format!("Bearer {}", "x".repeat(10 * 1024))),
            "invalid_api_key",
        ),
        (
            app.get("/api/bookmarks").header("authorization", non_utf8),
            "invalid_authorization",
        ),
        (
            app.get("/api/bookmarks")
                .header("authorization", "Bearer sk_live_0123456789"),
            "invalid_api_key",
        ),
        (
            app.get("/api/bookmarks")
                .header("authorization", &valid_format_unknown),
            "invalid_api_key",
        ),
        (
            app.post("/api/bookmarks")
                .header("X-Tenant-Id", "acme-corp")
                .json(&json!({"url": "https://sneak.example"})),
            "missing_credentials",
        ),
        (
            app.get("/api/bookmarks")
                .header("cookie", "session=forged%3Avalue"),
            "invalid_session",
        ),
    ];
    for (request, code) in cases {
        let started = Instant::now();
        let res = request.send().await.unwrap();
        assert!(res.headers().contains_key("www-authenticate"), "{code}");
        expect(res, 401, code).await;
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{code}: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        connects.load(Ordering::SeqCst),
        before,
        "no refused request connected to a shard"
    );
    app.stop().await;
}

#[tokio::test]
async fn only_a_digest_of_a_key_is_stored_and_the_cli_prints_it_once() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "auth-cli").await;
    let out = bookmarks_cli(&l, &["keys", "create", "cli-tenant", "--note", "ci"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = created["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("bks_") && key.len() == 68, "{key}");
    assert_eq!(created["tenant"], "cli-tenant");
    assert_eq!(created["note"], "ci");
    let stored = stored_key_columns(&l, "cli-tenant").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0][1].as_deref(),
        Some("32"),
        "a SHA-256, not the key"
    );
    assert!(!format!("{stored:?}").contains(&key[4..]));

    assert_eq!(list_with(&app, &key).await, 200);

    let out = bookmarks_cli(&l, &["keys", "list", "cli-tenant"]);
    assert!(out.status.success());
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        !listed.contains(&key[4..]),
        "list never prints a key: {listed}"
    );
    let row: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(row["id"], created["id"]);
    assert!(row.get("key").is_none());

    let id = created["id"].to_string();
    let out = bookmarks_cli(&l, &["keys", "revoke", &id]);
    assert!(out.status.success());
    let revoked: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(revoked["revoked_at"].is_string());
    let out = bookmarks_cli(&l, &["keys", "revoke", "999999"]);
    assert_eq!(out.status.code(), Some(2));
    let out = bookmarks_cli(&l, &["keys", "create", "not a tenant!"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TENANT"));
    app.stop().await;
}

#[tokio::test]
async fn signing_out_ends_the_session_on_every_server_within_a_second_not_only_in_the_browser() {
    use crate::service::{cookie_value, post_form};
    let l = layout("").await;
    // Two replicas sharing the session secret, as compose's do.
    let replica = |name: &str| bookmarks_sharded::startup::ServeOptions {
        session_secret: bookmarks_sharded::configuration::secret::Secret::Given(vec![7u8; 32]),
        ..test_options(name)
    };
    let (web1, web2) = (
        TestApp::spawn_with(l.settings(), replica("signout-web1")).await,
        TestApp::spawn_with(l.settings(), replica("signout-web2")).await,
    );
    let key = create_key(&l.settings(), "signs-out").await;
    let sign_in = async |app: &TestApp| {
        let home = app.get("/signin").send().await.unwrap();
        let csrf = cookie_value(&home, "csrf").unwrap();
        let fields = [
            ("tenant", "signs-out"),
            ("key", key.as_str()),
            ("csrf", &csrf),
        ];
        let signed_in = post_form(app, "/signin", &format!("csrf={csrf}"), &fields).await;
        assert_eq!(signed_in.status(), 303);
        let session = cookie_value(&signed_in, "session").unwrap();
        (csrf.clone(), format!("csrf={csrf}; session={session}"))
    };
    let status = async |app: &TestApp, cookies: &str| {
        let res = app
            .get("/api/bookmarks")
            .header("cookie", cookies)
            .send()
            .await;
        res.unwrap().status().as_u16()
    };
    let (csrf, copied) = sign_in(&web1).await;
    assert_eq!(
        (status(&web1, &copied).await, status(&web2, &copied).await),
        (200, 200)
    );

    let out = post_form(&web1, "/signout", &copied, &[("csrf", &csrf)]).await;
    assert_eq!(out.status(), 303);
    let signed_out_at = Instant::now();
    assert_eq!(
        status(&web1, &copied).await,
        401,
        "at once where it signed out"
    );
    let refused = eventually(Duration::from_secs(1), || async {
        status(&web2, &copied).await == 401
    })
    .await;
    assert!(refused, "and on the other server within a second");
    eprintln!(
        "sign-out reached the other server in {:?}",
        signed_out_at.elapsed()
    );
    let res = web2
        .get("/api/bookmarks")
        .header("cookie", &copied)
        .send()
        .await
        .unwrap();
    expect(res, 401, "invalid_session").await;

    // Signing in again works, on either server.
    let (_, again) = sign_in(&web2).await;
    let both = eventually(Duration::from_secs(1), || async {
        status(&web1, &again).await == 200 && status(&web2, &again).await == 200
    })
    .await;
    assert!(both, "a new session works everywhere");
    web1.stop().await;
    web2.stop().await;
}

#[tokio::test]
async fn a_revoked_key_stops_working_on_every_server_within_a_second() {
    let l = layout("").await;
    let (web1, web2) = (
        TestApp::spawn(l.settings(), "auth-web1").await,
        TestApp::spawn(l.settings(), "auth-web2").await,
    );
    let key = format!("Bearer {}", create_key(&l.settings(), "revoked-soon").await);
    let status = async |app: &TestApp| {
        app.get("/api/bookmarks")
            .header("authorization", &key)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    // Both processes have checked (and cached) the key.
    assert_eq!((status(&web1).await, status(&web2).await), (200, 200));
    revoke_keys(&l.settings(), "revoked-soon").await;
    let revoked_at = Instant::now();
    let refused = eventually(Duration::from_secs(1), || async {
        status(&web1).await == 401 && status(&web2).await == 401
    })
    .await;
    assert!(refused, "refused by both within a second (cache TTL 30 s)");
    eprintln!(
        "revocation reached both processes in {:?}",
        revoked_at.elapsed()
    );
    web1.stop().await;
    web2.stop().await;
}

#[tokio::test]
async fn after_its_listener_reconnects_a_process_forgets_keys_revoked_while_it_was_away() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "auth-reconnect").await;
    let key = format!("Bearer {}", app.key("away").await);
    let status = async || {
        app.get("/api/bookmarks")
            .header("authorization", &key)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status().await, 200);
    // Revoked while the listener is away (its first reconnect waits 250 ms): the
    // notification is lost, and only the flush on reconnect can forget the key.
    let cut_at = cut_control_listener(&l).await;
    revoke_keys(&l.settings(), "away").await;
    let refused = eventually(Duration::from_secs(5), || async { status().await == 401 }).await;
    assert!(refused, "well before the 30 s TTL");
    assert!(control_listener_started_after(&l, &cut_at).await);
    app.stop().await;
}

#[tokio::test]
async fn the_admin_page_lists_creates_and_revokes_a_tenants_keys() {
    let l = layout("").await;
    let app = admin_app(&l, "auth-admin").await;
    let admin = |req: reqwest::RequestBuilder| req.bearer_auth(TOKEN);

    let created = admin(app.post("/admin/api/tenants/admin-made/keys"))
        .json(&json!({"note": "from the admin API"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let key = created["key"].as_str().unwrap();
    assert_eq!(list_with(&app, key).await, 200);

    let listed: Value = admin(app.get("/admin/api/tenants/admin-made/keys"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["keys"][0]["id"], created["id"]);
    assert!(!listed.to_string().contains(&key[4..]));
    let lookup: Value = admin(app.get("/admin/api/tenants/admin-made"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(lookup["keys"][0]["note"], "from the admin API", "{lookup}");

    // A form post (another site could send one) cannot create a key through the JSON API.
    let form = admin(app.post("/admin/api/tenants/admin-made/keys"))
        .form(&[("note", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);
    let unauthorized = app
        .post("/admin/api/tenants/admin-made/keys")
        .json(&json!({}))
        .send();
    assert_eq!(unauthorized.await.unwrap().status(), 401);

    let id = created["id"].as_i64().unwrap();
    let revoked = admin(app.delete(&format!("/admin/api/keys/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let refused = eventually(Duration::from_secs(1), || async {
        list_with(&app, key).await == 401
    })
    .await;
    assert!(refused);
    let missing = admin(app.delete("/admin/api/keys/999999"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // The page's form shows a new key once and needs the CSRF token.
    let page = admin(app.get("/admin?lookup=admin-made"))
        .send()
        .await
        .unwrap();
    let csrf = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .find_map(|c| {
            c.to_str()
                .unwrap()
                .strip_prefix("csrf=")
                .map(|v| v.split(';').next().unwrap().to_owned())
        })
        .unwrap();
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("API keys of admin-made")
    );
    let form = |submitted: &str| {
        admin(app.post("/admin/keys/create"))
            .header("cookie", format!("csrf={csrf}"))
            .form(&[
                ("tenant", "admin-made"),
                ("note", "from the page"),
                ("csrf", submitted),
            ])
    };
    assert_eq!(form("guess").send().await.unwrap().status(), 403);
    let shown = form(&csrf).send().await.unwrap();
    assert_eq!(shown.status(), 201);
    let html = shown.text().await.unwrap();
    let new_key = html
        .split("bks_")
        .nth(1)
        .map(|rest| format!("bks_{}", &rest[..64]))
        .expect("the page shows the new key");
    assert_eq!(list_with(&app, &new_key).await, 200);
    app.stop().await;
}

#[tokio::test]
async fn input_that_would_cost_work_is_refused_before_any_shard_is_asked() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "auth-costly").await;
    let t = "costly-tenant";
    let as_t = app.tenant(t).await;
    // Ten thousand entries (one tag, repeated) in a body under the size limit.
    let tags = vec!["a"; 10_000];
    let res = app
        .post("/api/bookmarks")
        .headers(as_t.clone())
        .json(&json!({"url": "https://tags.example", "tags": tags}))
        .send()
        .await
        .unwrap();
    let body = expect(res, 422, "validation_failed").await;
    assert!(
        body["error"]["message"].as_str().unwrap().contains("10000"),
        "{body}"
    );
    let long_q = format!("/api/bookmarks?q={}", "a".repeat(2048));
    expect(
        app.get(&long_q).headers(as_t.clone()).send().await.unwrap(),
        400,
        "invalid_query",
    )
    .await;
    let negation = app
        .get("/api/bookmarks?q=-zzzz")
        .headers(as_t.clone())
        .send();
    expect(negation.await.unwrap(), 400, "invalid_query").await;
    let listed = app.get_json("/api/bookmarks", t).await;
    assert_eq!(listed["items"], json!([]), "nothing was stored");
    app.stop().await;
}

#[tokio::test]
async fn a_server_working_on_its_limit_of_requests_answers_503_at_once_but_still_answers_health() {
    let l = layout("").await;
    let mut options = test_options("auth-busy");
    options.max_in_flight = 1;
    let app = TestApp::spawn_with(l.settings(), options).await;
    let created = app
        .create("busy", json!({"url": "https://busy.example"}))
        .await;
    let shard = created["shard"].as_str().unwrap().to_owned();
    let (port, db) = port_of(&l, &shard);
    let locker = session(port, &db).await;
    locker
        .batch_execute("BEGIN; LOCK TABLE bookmarks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let held = {
        let request = app.get("/api/bookmarks").headers(app.tenant("busy").await);
        tokio::spawn(request.send())
    };
    // The held request is in flight once its statement waits on the lock (the reindexer's
    // session may wait too; it is no request).
    let waiting = "SELECT count(*) FROM pg_stat_activity \
                   WHERE datname = current_database() AND wait_event_type = 'Lock' \
                   AND application_name NOT LIKE 'bookmarks-reindexer/%'";
    let arrived = eventually(Duration::from_secs(10), || async {
        sql(port, &db, waiting).await[0][0].as_deref() != Some("0")
    })
    .await;
    assert!(arrived, "the held request waits on the lock");
    let started = Instant::now();
    let refused = app.get_as("/api/bookmarks", "busy").await;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(refused.headers()["retry-after"], "1");
    expect(refused, 503, "server_busy").await;
    assert_eq!(app.get("/health").send().await.unwrap().status(), 200);
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn in_trusted_header_mode_the_header_alone_names_the_tenant() {
    let l = layout("[tenancy]\nauth = \"trusted_header\"").await;
    let app = TestApp::spawn(l.settings(), "auth-trusted").await;
    let res = app
        .post("/api/bookmarks")
        .header("X-Tenant-Id", "behind-a-gateway")
        .json(&json!({"url": "https://gw.example"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let missing = app.get("/api/bookmarks").send().await.unwrap();
    expect(missing, 400, "missing_tenant").await;
    app.stop().await;
}

#[tokio::test]
async fn stats_are_counted_at_most_once_a_second_however_many_ask() {
    let l = layout("").await;
    let app = TestApp::spawn(l.settings(), "auth-stats").await;
    // Every shard's count, or none while a shard is reported down (a fan-out that met a
    // shard still opening its first connection on a loaded machine).
    let total = |stats: &Value| -> Option<i64> {
        stats["shards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bookmarks"].as_i64())
            .sum()
    };
    // Warm: the tenant's key is known and every shard has answered a count (then the
    // answer's second runs out), so that what follows is timed by the cache alone.
    app.create("counted", json!({"url": "https://warm.counted.example"}))
        .await;
    let counted = eventually(Duration::from_secs(10), || async {
        total(&app.json("/api/stats").await).is_some()
    })
    .await;
    assert!(counted, "every shard answers the stats");
    tokio::time::sleep(STATS_FRESH_FOR + Duration::from_millis(100)).await;
    let before = total(&app.json("/api/stats").await).expect("every shard counted");
    app.create("counted", json!({"url": "https://counted.example"}))
        .await;
    let cached = total(&app.json("/api/stats").await);
    assert_eq!(
        cached,
        Some(before),
        "the answer of under a second ago serves"
    );
    tokio::time::sleep(STATS_FRESH_FOR + Duration::from_millis(100)).await;
    let fresh = total(&app.json("/api/stats").await);
    assert_eq!(fresh, Some(before + 1));
    app.stop().await;
}
