//! The API document against the running app: the server serves the document the code
//! generates, answers every operation in it, ships the page that browses it with no
//! network, and holds to it when schemathesis (a third-party fuzzer) throws generated
//! input at every operation.

use std::path::PathBuf;
use tokio::process::Command;

use crate::support::*;
use serde_json::{Value, json};

const TOKEN: &str = "openapi-admin-token-0123456789";

async fn app_with_admin(instance: &str) -> TestApp {
    let settings = layout("").await.with_patient_connects().settings();
    let mut options = test_options(instance);
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    TestApp::spawn_with(settings, options).await
}

fn generated() -> Value {
    serde_json::to_value(bookmarks_sharded::startup::api_document()).unwrap()
}

/// Every (method, path) the document describes.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "patch", "put", "delete"].contains(&method.as_str()) {
                out.push((method.clone(), path.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_server_serves_the_generated_document_and_answers_every_operation_in_it() {
    let app = app_with_admin("openapi-ops").await;
    let served: Value = app.json("/api/openapi.json").await;
    assert_eq!(served, generated());
    assert!(
        served["openapi"].as_str().unwrap().starts_with("3.1"),
        "an OpenAPI 3.1 document: {}",
        served["openapi"]
    );

    let tenant_headers = app.tenant("openapi-acme").await;
    let ops = operations(&served);
    assert!(ops.len() >= 20, "{ops:?}");
    for (method, path) in ops {
        let concrete = path
            .replace("{id}", "00000000-0000-4000-8000-000000000000")
            .replace("{key}", "openapi-acme");
        let concrete = if path == "/admin/api/keys/{id}" {
            "/admin/api/keys/999999".to_owned()
        } else {
            concrete
        };
        let url = format!("{}{concrete}", app.base);
        let request = app
            .client
            .request(method.to_uppercase().parse().unwrap(), &url);
        let request = if path.starts_with("/admin/") {
            request.bearer_auth(TOKEN)
        } else {
            request.headers(tenant_headers.clone())
        };
        let request = match method.as_str() {
            "post" | "patch" => request.json(&json!({"url": "https://example.com/openapi"})),
            _ => request,
        };
        let res = request.send().await.unwrap();
        let status = res.status().as_u16();
        let body = res.text().await.unwrap();
        assert_ne!(status, 405, "{method} {path} is mounted: {body}");
        assert!(
            !body.contains("no such route"),
            "{method} {path} is mounted: {status} {body}"
        );
        assert!(
            status < 500 || path == "/ready",
            "{method} {path}: {status} {body}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn the_docs_page_and_its_assets_come_from_the_server_itself() {
    let app = TestApp::spawn(layout("").await.settings(), "openapi-page").await;
    let res = app.get("/api/docs").send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = res.text().await.unwrap();
    assert!(page.contains("/api/openapi.json"), "{page}");
    let assets: Vec<&str> = page
        .split(['"', '\''])
        .filter(|s| s.ends_with(".js") || s.ends_with(".css"))
        .collect();
    assert!(assets.len() >= 2, "a script and a stylesheet: {assets:?}");
    for asset in assets {
        assert!(
            asset.starts_with("/api/docs/"),
            "{asset} is served by the app, not fetched from elsewhere"
        );
        let res = app.get(asset).send().await.unwrap();
        assert_eq!(res.status(), 200, "{asset}");
        assert!(res.bytes().await.unwrap().len() > 1000, "{asset}");
    }
    app.stop().await;
}

/// The schemathesis command line, installed by `scripts/install-schemathesis.sh`.
fn schemathesis() -> PathBuf {
    if let Some(path) = std::env::var_os("BOOKMARKS_SCHEMATHESIS") {
        return path.into();
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    let installed = PathBuf::from(home).join(".cache/bookmarks-sharded/schemathesis/bin/st");
    assert!(
        installed.exists(),
        "schemathesis is not installed at {}: run scripts/install-schemathesis.sh (or set \
         BOOKMARKS_SCHEMATHESIS to its `st` command)",
        installed.display()
    );
    installed
}

/// Runs schemathesis against `app` for `seconds` on the operations `filter` selects,
/// sending `headers`; panics with its report when it finds anything. Runs beside the app
/// (which serves on this test's runtime), not blocking it.
async fn fuzz(app: &TestApp, filter: &[&str], headers: &[String], seconds: u32) {
    let mut cmd = Command::new(schemathesis());
    cmd.arg("run")
        .arg(format!("{}/api/openapi.json", app.base))
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_schema_conformance,response_headers_conformance,negative_data_rejection",
            "--max-time",
            &seconds.to_string(),
            // One worker: with two, hypothesis parses lambda sources on two threads at
            // once, which trips CPython 3.11's "AST constructor recursion depth mismatch"
            // bug (python/cpython#106905, fixed in later releases) as a spurious error.
            "--workers",
            "1",
            "--seed",
            "20261202",
            "--request-timeout",
            "10",
            "--suppress-health-check",
            "all",
            "--output-truncate",
            "false",
        ])
        .args(filter);
    for header in headers {
        cmd.arg("-H").arg(header);
    }
    cmd.env("NO_COLOR", "1").current_dir(std::env::temp_dir());
    let out = cmd.output().await.expect("schemathesis runs");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{report}");
    assert!(
        out.status.success(),
        "schemathesis found problems ({:?}):\n{report}",
        out.status
    );
}

#[tokio::test]
async fn schemathesis_finds_no_answer_that_breaks_the_document() {
    // A minute of generated load on a 2-core machine, beside other tests like any other:
    // the tests it once slowed past their progress checks (a move under load counted its
    // writes after a fixed time) now wait for the writes themselves.
    let app = app_with_admin("openapi-fuzz").await;
    let tenant = "fuzz-tenant";
    for i in 0..3 {
        app.create(
            tenant,
            json!({"url": format!("https://example.com/fuzz/{i}"), "tags": ["fuzz"]}),
        )
        .await;
    }
    let key = app.key(tenant).await;
    // Readiness is left out: it answers 503 whenever a shard's replica lags, which is its
    // job, and takes no input to fuzz; the operations test above calls it.
    fuzz(
        &app,
        &[
            "--exclude-tag",
            "admin",
            "--exclude-tag",
            "members",
            "--exclude-path-regex",
            "^/(ready|actuator/health)$",
        ],
        &[
            format!("Authorization: Bearer {key}"),
            format!("X-Tenant-Id: {tenant}"),
        ],
        40,
    )
    .await;
    // Members and keys with a tenant of their own: following the answers' links, the fuzzer
    // demotes, disables and revokes whatever it finds, its own key included.
    let members_key = app.key("fuzz-members").await;
    fuzz(
        &app,
        &["--include-tag", "members"],
        &[format!("Authorization: Bearer {members_key}")],
        20,
    )
    .await;
    fuzz(
        &app,
        &["--include-tag", "admin"],
        &[format!("Authorization: Bearer {TOKEN}")],
        20,
    )
    .await;
    app.stop().await;
}

/// Sends `request` and asserts it is refused with `status` and `code`.
async fn refused(request: reqwest::RequestBuilder, status: u16, code: &str) {
    let res = request.send().await.unwrap();
    let got = res.status().as_u16();
    let answer: Value = res.json().await.unwrap();
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (status, Some(code)),
        "{answer}"
    );
}

#[tokio::test]
async fn a_nul_character_anywhere_in_input_is_refused_and_nothing_is_stored() {
    let app = app_with_admin("openapi-nul").await;
    let t = "nul-tenant";
    let as_t = app.tenant(t).await;
    for body in [
        json!({"url": "https://nul.example/\u{0}"}),
        json!({"url": "https://nul.example/t", "title": "a\u{0}b"}),
        json!({"url": "https://nul.example/n", "notes": "\u{0}"}),
        json!({"url": "https://nul.example/g", "tags": ["x\u{0}"]}),
    ] {
        let create = app.post("/api/bookmarks").headers(as_t.clone()).json(&body);
        refused(create, 422, "validation_failed").await;
    }
    for query in ["tag=a%00b", "q=zeppelin%00"] {
        let list = app.get(&format!("/api/bookmarks?{query}"));
        refused(list.headers(as_t.clone()), 400, "invalid_query").await;
    }
    let note = app
        .post("/admin/api/tenants/nul-tenant/keys")
        .bearer_auth(TOKEN)
        .json(&json!({"note": "a\u{0}"}));
    refused(note, 400, "invalid_body").await;
    let browse = app.get("/admin/api/bookmarks?tag=a%00").bearer_auth(TOKEN);
    refused(browse, 400, "invalid_query").await;
    let listed = app.get_json("/api/bookmarks", t).await;
    assert_eq!(listed["items"], json!([]), "nothing was stored");
    app.stop().await;
}
