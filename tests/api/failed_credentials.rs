//! The limit on guessing: failed credential checks (wrong keys, wrong admin tokens, refused
//! sign-ins) count against the client's address; past the limit the address gets 429 with
//! `Retry-After` and its credentials are not looked up at all.

use bookmarks_sharded::tenancy::api_key::ApiKey;
use serde_json::Value;

use crate::service::{cookie_value, post_form};
use crate::support::*;

const TOKEN: &str = "failed-credentials-admin-token-0123";

/// `name`'s value in a `/metrics` text (0 when the series is absent).
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A list request with `key`, and the forwarded address `from` when given.
async fn list_with(app: &TestApp, key: &str, from: Option<&str>) -> reqwest::Response {
    let mut req = app.get("/api/bookmarks").bearer_auth(key);
    if let Some(from) = from {
        req = req.header("x-forwarded-for", from);
    }
    req.send().await.unwrap()
}

async fn code(res: reqwest::Response) -> (u16, String) {
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or_default();
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn a_thousand_wrong_keys_from_one_address_cost_twenty_lookups_and_then_get_429() {
    // Alone: the lookup counter is the process's, and other tests' apps look keys up too.
    let _alone = alone().await;
    let l = layout("").await;
    let mut options = test_options("guesses");
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    let app = TestApp::spawn_with(l.settings(), options).await;
    let good = app.key("acme-corp").await;
    let lookups = || async { counter(&app.metrics_text().await, "api_key_lookups_total") };
    let failures = || async { counter(&app.metrics_text().await, "failed_credentials_total") };
    let (before, failed_before) = (lookups().await, failures().await);

    let mut answers = Vec::new();
    let mut retry_after = Vec::new();
    for _ in 0..1000 {
        let res = list_with(&app, ApiKey::generate().expose(), None).await;
        if let Some(seconds) = res.headers().get("retry-after") {
            retry_after.push(seconds.to_str().unwrap().parse::<u32>().unwrap());
        }
        answers.push(code(res).await);
    }
    let unauthorized = answers.iter().filter(|a| a.0 == 401).count();
    assert_eq!(unauthorized, 20, "the first twenty are checked");
    assert!(
        answers[..20].iter().all(|a| a.1 == "invalid_api_key"),
        "{:?}",
        &answers[..20]
    );
    assert!(
        answers[20..]
            .iter()
            .all(|a| *a == (429, "too_many_failed_credentials".to_owned())),
        "{:?}",
        answers[20..].iter().find(|a| a.0 != 429)
    );
    assert_eq!(retry_after.len(), 980);
    assert!(
        retry_after.iter().all(|s| (1..=60).contains(s)),
        "{retry_after:?}"
    );
    assert_eq!(
        lookups().await - before,
        20,
        "no control query for the refused ones"
    );

    // The address is refused whatever it presents, for as long as its minute lasts: a
    // good key, the admin token, a sign-in.
    assert_eq!(
        code(list_with(&app, &good, None).await).await,
        (429, "too_many_failed_credentials".to_owned())
    );
    let admin = app
        .get("/admin/api/shards")
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(admin.status(), 429);
    let home = app.get("/signin").send().await.unwrap();
    assert_eq!(home.status(), 200, "a request with no credential is served");
    let csrf = cookie_value(&home, "csrf").unwrap();
    let fields = [
        ("tenant", "acme-corp"),
        ("key", good.as_str()),
        ("csrf", &csrf),
    ];
    let signin = post_form(&app, "/signin", &format!("csrf={csrf}"), &fields).await;
    assert_eq!(signin.status(), 429);
    assert!(signin.headers().contains_key("retry-after"));
    assert!(cookie_value(&signin, "session").is_none());
    assert_eq!(lookups().await - before, 20);
    // What needs no credential is served.
    assert_eq!(app.get("/health").send().await.unwrap().status(), 200);
    assert_eq!(failures().await - failed_before, 20);
    app.stop().await;
}

#[tokio::test]
async fn wrong_admin_tokens_and_refused_sign_ins_count_against_the_address_too() {
    let l = layout("[web]\nfailed_credentials_per_minute = 4\n").await;
    let mut options = test_options("guesses-admin");
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    let app = TestApp::spawn_with(l.settings(), options).await;
    let key = app.key("acme-corp").await;
    for _ in 0..2 {
        let wrong = app
            .get("/admin/api/shards")
            .bearer_auth("not-the-admin-token-at-all")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
    }
    let home = app.get("/signin").send().await.unwrap();
    let csrf = cookie_value(&home, "csrf").unwrap();
    let cookies = format!("csrf={csrf}");
    let sign_in = |tenant: &'static str, key: String| {
        let (app, cookies, csrf) = (&app, cookies.clone(), csrf.clone());
        async move {
            let fields = [("tenant", tenant), ("key", key.as_str()), ("csrf", &csrf)];
            post_form(app, "/signin", &cookies, &fields).await
        }
    };
    // A key of another tenant, and no key at all.
    assert_eq!(sign_in("globex", key.clone()).await.status(), 422);
    assert_eq!(
        sign_in("acme-corp", "bks_nope".to_owned()).await.status(),
        422
    );
    // Four failures: the address is refused, though what it now presents is right.
    let refused = sign_in("acme-corp", key.clone()).await;
    assert_eq!(refused.status(), 429);
    assert!(refused.text().await.unwrap().contains("credential checks"));
    let admin = app
        .get("/admin/api/shards")
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        code(admin).await,
        (429, "too_many_failed_credentials".to_owned())
    );
    app.stop().await;
}

#[tokio::test]
async fn a_forwarded_address_counts_only_when_the_peer_is_a_trusted_proxy() {
    let limit = "[web]\nfailed_credentials_per_minute = 3\n";
    let trusting = layout(&format!("{limit}trusted_proxies = [\"127.0.0.1\"]\n")).await;
    let behind_proxy = TestApp::spawn(trusting.settings(), "behind-proxy").await;
    let wrong = ApiKey::generate();
    for _ in 0..3 {
        let res = list_with(&behind_proxy, wrong.expose(), Some("192.0.2.1")).await;
        assert_eq!(res.status(), 401);
    }
    let res = list_with(&behind_proxy, wrong.expose(), Some("192.0.2.1")).await;
    assert_eq!(code(res).await.0, 429, "the proxy's client is refused");
    let res = list_with(&behind_proxy, wrong.expose(), Some("192.0.2.2")).await;
    assert_eq!(
        res.status(),
        401,
        "another client behind the same proxy is not"
    );
    behind_proxy.stop().await;

    // Where 127.0.0.1 is no trusted proxy, a client cannot escape by naming other
    // addresses.
    let direct = TestApp::spawn(layout(limit).await.settings(), "direct").await;
    for i in 0..3 {
        let from = format!("198.51.100.{i}");
        let res = list_with(&direct, wrong.expose(), Some(&from)).await;
        assert_eq!(res.status(), 401);
    }
    let res = list_with(&direct, wrong.expose(), Some("198.51.100.99")).await;
    assert_eq!(code(res).await.0, 429);
    direct.stop().await;
}
