//! What every answer tells a browser: no sniffing, no framing, no referrer beyond this
//! site, a content security policy, and no caching of anything that may hold a tenant's
//! data or a secret.

use crate::support::*;
use serde_json::json;

fn header<'a>(res: &'a reqwest::Response, name: &str) -> &'a str {
    res.headers()
        .get(name)
        .unwrap_or_else(|| panic!("{} has no {name}", res.url()))
        .to_str()
        .unwrap()
}

#[tokio::test]
async fn every_answer_forbids_sniffing_framing_and_caching_and_the_docs_page_may_run_only_its_own_script()
 {
    let layout = layout("").await;
    let app = TestApp::spawn(layout.settings(), "edge-headers").await;
    app.create("acme-corp", json!({"url": "https://h.example"}))
        .await;
    let tenant_read = app.get_as("/api/bookmarks", "acme-corp").await;
    let refused = app.get("/api/bookmarks").send().await.unwrap();
    let no_route = app.get("/no/such/route").send().await.unwrap();
    let signin = app.get("/signin").send().await.unwrap();
    assert_eq!(tenant_read.status(), 200);
    assert_eq!(refused.status(), 401);
    assert_eq!(no_route.status(), 404);
    assert_eq!(signin.status(), 200);
    for res in [&tenant_read, &refused, &no_route, &signin] {
        assert_eq!(header(res, "x-content-type-options"), "nosniff");
        assert_eq!(header(res, "x-frame-options"), "DENY");
        assert_eq!(header(res, "referrer-policy"), "same-origin");
        assert_eq!(header(res, "cache-control"), "no-store");
        let policy = header(res, "content-security-policy");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(
            policy.contains("script-src 'self';"),
            "no inline script: {policy}"
        );
        assert!(
            policy.contains("style-src 'self';"),
            "no inline style: {policy}"
        );
        assert!(!policy.contains("unsafe-eval"), "{policy}");
    }
    // Nor do the pages have any: their stylesheets come from the app.
    let page = signin.text().await.unwrap();
    assert!(
        !page.contains("<style") && !page.contains("style="),
        "{page}"
    );
    assert!(page.contains("href=\"/assets/site.css\""), "{page}");
    for sheet in ["/assets/site.css", "/assets/admin.css"] {
        let css = app.get(sheet).send().await.unwrap();
        assert_eq!(css.status(), 200, "{sheet}");
        assert_eq!(header(&css, "content-type"), "text/css; charset=utf-8");
        assert_eq!(header(&css, "cache-control"), "public, max-age=3600");
        assert!(css.text().await.unwrap().contains("body {"), "{sheet}");
    }

    let docs = app.get("/api/docs").send().await.unwrap();
    assert_eq!(docs.status(), 200);
    let policy = header(&docs, "content-security-policy");
    assert!(
        policy.contains("script-src 'self' 'unsafe-inline';"),
        "Swagger UI starts with an inline script: {policy}"
    );
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(header(&docs, "cache-control"), "public, max-age=3600");
    assert_eq!(header(&docs, "x-content-type-options"), "nosniff");
    app.stop().await;
}

#[tokio::test]
async fn a_site_served_over_tls_asks_for_tls_and_reads_only_host_only_secure_cookies() {
    use crate::service::{cookie_value, post_form};
    let tls = layout("[tenancy]\nsecure_cookies = true").await;
    let app = TestApp::spawn(tls.settings(), "tls-only").await;
    let key = create_key(&tls.settings(), "tls-corp").await;

    let page = app.get("/signin").send().await.unwrap();
    assert_eq!(
        header(&page, "strict-transport-security"),
        "max-age=31536000"
    );
    let set = header(&page, "set-cookie").to_owned();
    assert!(
        set.starts_with("__Host-csrf=") && set.contains("Secure") && set.contains("Path=/"),
        "{set}"
    );
    let csrf = cookie_value(&page, "__Host-csrf").unwrap();
    let fields = [
        ("tenant", "tls-corp"),
        ("key", key.as_str()),
        ("csrf", &csrf),
    ];

    // The same token in a cookie without the prefix, which a plain-HTTP page or a sibling
    // subdomain could have planted, is not read: the form is refused as cross-site.
    let planted = post_form(&app, "/signin", &format!("csrf={csrf}"), &fields).await;
    assert_eq!(planted.status(), 403);
    assert_eq!(
        header(&planted, "strict-transport-security"),
        "max-age=31536000"
    );

    let signed_in = post_form(&app, "/signin", &format!("__Host-csrf={csrf}"), &fields).await;
    assert_eq!(signed_in.status(), 303);
    let session = cookie_value(&signed_in, "__Host-session").expect("a __Host- session");
    let read = app
        .get("/api/bookmarks")
        .header("cookie", format!("__Host-session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let unprefixed = app
        .get("/api/bookmarks")
        .header("cookie", format!("session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        unprefixed.status(),
        401,
        "a session cookie without the prefix was read"
    );

    // Without TLS, plain names and no HSTS (a browser would drop `Secure` cookies on HTTP).
    let plain = TestApp::spawn(layout("").await.settings(), "plain-http").await;
    let page = plain.get("/signin").send().await.unwrap();
    assert!(page.headers().get("strict-transport-security").is_none());
    assert!(cookie_value(&page, "csrf").is_some());
}
