//! End to end through nginx on the real compose stack: two web replicas, control, shard0 with its
//! streaming replica, shard1. Runs the quick start and the walkthrough, checks placement in the
//! shard containers, stops a shard, freezes (pauses) a shard primary, a replica and the control
//! database, restarts both web replicas and the worker and adds a third shard (docs/deploys.md,
//! "Adding a shard") under a mixed load that must see no failed request, stops and kills a web
//! replica under read load, and tears everything down.
//!
//! `BOOKMARKS_STACK_OFFLINE=1` adds compose/offline.yml (local stand-in images, built
//! by scripts/build-offline-images.sh, and the app image built from the Dockerfile by
//! scripts/check-dockerfile.sh or scripts/build-offline-app-image.sh); otherwise the stack
//! is built and pulled as users run it.

mod browser;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/doc_sections.rs"]
mod doc_sections;
mod faults;
mod rolling;

use std::collections::HashMap;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use browser::Browser;
use common::{eventually, free_port, unique};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};
use testcontainers::compose::DockerCompose;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

struct Stack {
    project: String,
    files: Vec<String>,
    port: u16,
    /// Where compose/verify.yml publishes the shard primaries (shard0, 1, 2).
    shard_ports: [u16; 3],
    base: String,
    http: reqwest::Client,
    admin_token: String,
    /// Each tenant's API key and its id, made on first use.
    keys: Mutex<HashMap<String, (String, i64)>>,
}

impl Stack {
    /// What every `docker compose` of this test runs with, scripts included: the project,
    /// its files and the published ports (a compose call without the ports would see
    /// another configuration and recreate the services that publish them).
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("COMPOSE_PROJECT_NAME", self.project.clone()),
            ("COMPOSE_FILE", self.files.join(":")),
            ("BOOKMARKS_HTTP_PORT", self.port.to_string()),
            ("BOOKMARKS_SHARD0_PORT", self.shard_ports[0].to_string()),
            ("BOOKMARKS_SHARD1_PORT", self.shard_ports[1].to_string()),
            ("BOOKMARKS_SHARD2_PORT", self.shard_ports[2].to_string()),
        ]
    }

    /// A command run from the repository's root in this test's compose environment.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.current_dir(ROOT).envs(self.env());
        command
    }

    /// `docker compose …` against this test's project.
    fn compose(&self, args: &[&str]) -> Output {
        let out = self
            .command("docker")
            .arg("compose")
            .args(args)
            .output()
            .expect("docker compose runs");
        assert!(
            out.status.success(),
            "docker compose {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn psql(&self, service: &str, query: &str) -> String {
        self.psql_in(service, "bookmarks_shard", query)
    }

    /// `query` on `database` of `service`, as the schema's owner over the local socket.
    fn psql_in(&self, service: &str, database: &str, query: &str) -> String {
        let out = self.compose(&[
            "exec",
            "-T",
            service,
            "psql",
            "-U",
            "bookmarks",
            "-d",
            database,
            "-tAc",
            query,
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The schema owner's password, which the stack made on its first start.
    fn owner_password(&self) -> String {
        let out = self.compose(&[
            "exec",
            "-T",
            "postgres-shard-0",
            "cat",
            "/run/secrets/db-owner/password",
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base))
    }

    /// `tenant`'s API key and its id: made through the admin API (through nginx) on first
    /// use, as loadgen makes its tenants' keys, then reused.
    async fn key_of(&self, tenant: &str) -> (String, i64) {
        if let Some(known) = self.keys.lock().unwrap().get(tenant) {
            return known.clone();
        }
        let res = self
            .http
            .post(format!("{}/admin/api/tenants/{tenant}/keys", self.base))
            .bearer_auth(&self.admin_token)
            .json(&json!({ "note": "stack test" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "a key for {tenant}");
        let body: Value = res.json().await.unwrap();
        let made = (
            body["key"].as_str().unwrap().to_owned(),
            body["id"].as_i64().unwrap(),
        );
        self.keys
            .lock()
            .unwrap()
            .insert(tenant.to_owned(), made.clone());
        made
    }

    /// The headers that act as `tenant`: its key.
    async fn as_tenant(&self, tenant: &str) -> HeaderMap {
        let (key, _) = self.key_of(tenant).await;
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, format!("Bearer {key}").parse().unwrap());
        headers
    }

    async fn wait_ready(&self, within: Duration) -> bool {
        eventually(within, || async {
            matches!(self.get("/ready").send().await, Ok(r) if r.status() == 200)
        })
        .await
    }
}

/// The admin token the stack's control migrations generated, as its operator reads it.
fn admin_token(stack: &Stack) -> String {
    let out = stack.compose(&["exec", "-T", "web1", "bookmarks", "admin-token"]);
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The admin page and the tenant UI in headless Chromium, through nginx: the Basic-auth
/// prompt answered, both shards and the slot map shown, the browse table paged forward and
/// back, a tenant looked up with its keys; then the tenant UI: no way in without a key,
/// sign-in with one, a bookmark added, a viewer seeing no write controls, sign-out, and a
/// revoked key ending the session.
async fn browse_the_admin_page_and_the_tenant_ui(stack: &Stack) -> Browser {
    let b = Browser::start().await;
    let token = stack.admin_token.clone();
    let port = stack.port;
    let base = stack.base.clone();
    // Credentials in the URL answer the Basic prompt; the browser then reuses them for
    // the whole origin, as it would after a user typed them into its prompt.
    b.client
        .goto(&format!("http://admin:{token}@127.0.0.1:{port}/admin"))
        .await
        .unwrap();
    assert_eq!(b.client.title().await.unwrap(), "Admin · Bookmarks");
    assert_eq!(b.count(".shard-card").await, 2, "a card per shard");
    // The cards show the live slot map: the walkthrough moved 2048-3071 to shard1.
    assert!(
        b.text(".shard-card[data-shard=shard0]")
            .await
            .contains("0-2047, 3072-8191")
    );
    assert!(
        b.text(".shard-card[data-shard=shard1]")
            .await
            .contains("2048-3071, 8192-16383")
    );
    assert!(
        b.text("#slot-drift")
            .await
            .contains("bookmarks slots compact"),
        "the slot map section shows the drift from autumn.toml"
    );
    assert!(
        b.count("#slot-map svg rect").await >= 128,
        "the slot map is drawn"
    );
    b.screenshot("admin").await;

    let first_row = b.attr("#browse-table tr[data-id]", "data-id").await;
    assert!(first_row.is_some(), "the browse table lists bookmarks");
    b.click("#browse-older").await;
    assert!(
        b.client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .contains("cursor=")
    );
    let second_row = b.attr("#browse-table tr[data-id]", "data-id").await;
    assert_ne!(second_row, first_row, "the next page starts further down");
    b.screenshot("admin-older").await;
    b.click("#browse-newer").await;
    b.wait_for_url("prev=").await;
    let back = b.attr("#browse-table tr[data-id]", "data-id").await;
    assert_eq!(back, first_row, "Newer leads back to the first page");

    b.submit("#lookup-form", &[("lookup", "initech")]).await;
    b.wait_for("#lookup-result").await;
    let effective = b.text("#effective-shard").await;
    assert!(
        effective.contains("shard0"),
        "initech was moved to shard0: {effective}"
    );
    let keys = b.text("#lookup-keys").await;
    assert!(
        keys.contains("walkthrough") && !keys.contains("bks_"),
        "the lookup lists initech's keys, never a key: {keys}"
    );
    b.screenshot("admin-lookup").await;

    // The tenant UI: nothing without a key (a page asks for a sign-in), then a sign-in
    // with one, a bookmark added and listed.
    b.client
        .goto(&format!("{base}/bookmarks/new"))
        .await
        .unwrap();
    b.wait_for_url("/signin").await;
    b.submit(
        "form",
        &[("tenant", "browser-co"), ("key", "bks_not-a-key-at-all")],
    )
    .await;
    b.wait_for("p.error").await;
    assert_eq!(
        b.count("form.filters").await,
        0,
        "a wrong key signs nobody in"
    );
    let (key, key_id) = stack.key_of("browser-co").await;
    b.submit("form", &[("tenant", "browser-co"), ("key", &key)])
        .await;
    b.wait_for("form.filters").await;
    b.screenshot("signed-in").await;
    b.client
        .goto(&format!("{base}/bookmarks/new"))
        .await
        .unwrap();
    b.submit(
        "form",
        &[
            ("url", "https://browser.example/added"),
            ("title", "Added in a real browser"),
        ],
    )
    .await;
    b.wait_for("ul li").await;
    let listed = b.text("ul").await;
    assert!(listed.contains("Added in a real browser"), "{listed}");
    b.screenshot("tenant-ui").await;
    // The export link downloads with the browser's session (fetched here, since a real
    // download would leave the page).
    let exported = b
        .client
        .execute(
            "return fetch(document.querySelector('#export-netscape').href)\
             .then(async r => r.status + ' ' + r.headers.get('content-disposition') + '\\n' + await r.text())",
            vec![],
        )
        .await
        .unwrap();
    let exported = exported.as_str().unwrap_or_default().to_owned();
    assert!(
        exported.starts_with("200 attachment")
            && exported.contains("https://browser.example/added"),
        "the export link gives the signed-in tenant's bookmark file: {exported}"
    );

    // The import form uploads a bookmark file, and the import's page follows it to its end.
    b.click("#import-link").await;
    b.wait_for("#import-form").await;
    b.choose_file(
        "#import-file",
        &format!("{ROOT}/docs/examples/bookmarks.html"),
    )
    .await;
    b.click("#import-form button[type=submit]").await;
    b.wait_for_url("/imports/0").await;
    let finished = eventually(Duration::from_secs(60), || async {
        b.text_now("#import-state").await.as_deref() == Some("done")
    })
    .await;
    assert!(finished, "the import's page showed it done");
    let (created, refused) = (
        b.text("#import-created").await,
        b.text("#import-refused").await,
    );
    assert_eq!((created.as_str(), refused.as_str()), ("4", "1"));
    b.screenshot("import-done").await;
    b.client.goto(&base).await.unwrap();
    b.wait_for("form.filters").await;
    let listed = b.text("ul").await;
    assert!(
        listed.contains("Consistency Models"),
        "imported and listed: {listed}"
    );

    // The page says who is signed in, and a viewer sees no write controls (the server
    // refuses a viewer's writes anyway).
    let who = b.text("#signed-in-as").await;
    assert!(
        who.contains("Owner (admin)"),
        "the tenant's first key acts for its owner: {who}"
    );
    let as_owner = format!("Bearer {key}");
    let member: Value = stack
        .http
        .post(format!("{base}/api/members"))
        .header(AUTHORIZATION, &as_owner)
        .json(&json!({"name": "Vic Viewer", "email": "vic@browser.example", "role": "viewer"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let made: Value = stack
        .http
        .post(format!(
            "{base}/api/members/{}/keys",
            member["id"].as_str().unwrap()
        ))
        .header(AUTHORIZATION, &as_owner)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let viewer_key = made["key"].as_str().unwrap().to_owned();
    b.click("form[action=\"/signout\"] button").await;
    b.wait_for("input[name=key]").await;
    b.submit("form", &[("tenant", "browser-co"), ("key", &viewer_key)])
        .await;
    b.wait_for("form.filters").await;
    let who = b.text("#signed-in-as").await;
    assert!(who.contains("Vic Viewer (viewer)"), "{who}");
    let listed = b.text("ul").await;
    assert!(
        listed.contains("Added in a real browser"),
        "a viewer reads: {listed}"
    );
    assert_eq!(
        b.count("a[href=\"/bookmarks/new\"]").await,
        0,
        "no way to add for a viewer"
    );
    assert_eq!(
        b.count("form[action$=\"/delete\"]").await,
        0,
        "no delete button for a viewer"
    );
    b.screenshot("viewer-ui").await;

    // Signing out ends the session in the browser.
    b.click("form[action=\"/signout\"] button").await;
    b.wait_for("input[name=key]").await;
    b.client.goto(&format!("{base}/")).await.unwrap();
    b.wait_for("input[name=key]").await;
    assert_eq!(b.count("form.filters").await, 0, "signed out");

    // Revoking the key ends a session signed in with it, within a second.
    b.submit("form", &[("tenant", "browser-co"), ("key", &key)])
        .await;
    b.wait_for("form.filters").await;
    let res = stack
        .http
        .delete(format!("{base}/admin/api/keys/{key_id}"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the key is revoked");
    let ended = eventually(Duration::from_secs(2), || async {
        b.client.goto(&format!("{base}/")).await.unwrap();
        b.count("input[name=key]").await == 1
    })
    .await;
    assert!(ended, "the revoked key's session ended");
    b.screenshot("session-revoked").await;

    // The API's page, through nginx: Swagger UI from the app itself draws every operation
    // of the document it fetches from the app.
    b.client.goto(&format!("{base}/api/docs")).await.unwrap();
    b.wait_for(".opblock").await;
    let drawn = b.count(".opblock").await;
    let described: Value = stack
        .get("/api/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let operations: usize = described["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|item| item.as_object().unwrap().len())
        .sum();
    assert_eq!(
        drawn, operations,
        "the page shows every documented operation"
    );
    b.screenshot("api-docs").await;
    b
}

fn offline() -> bool {
    std::env::var("BOOKMARKS_STACK_OFFLINE").is_ok_and(|v| v == "1")
}

/// A run section's shell snippets (see `doc_sections`), with the published port
/// substituted.
fn doc_snippets(port: u16, section: &str) -> Vec<String> {
    let page = doc_sections::page_of(section);
    let text = std::fs::read_to_string(format!("{ROOT}/{page}")).unwrap();
    doc_sections::sh_blocks(&text, section)
        .unwrap_or_else(|| panic!("{page} has a {section} section"))
        .into_iter()
        .map(|s| s.replace("localhost:8080", &format!("localhost:{port}")))
        .collect()
}

/// The run sections this process has run, so that the stack test can show it ran them all.
static SECTIONS_RUN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// Runs a documented section verbatim in one shell, as a reader pastes it into one terminal
/// (`env` stands for what earlier sections left in that shell); returns what it printed.
fn run_section(stack: &Stack, name: &'static str, env: &[(&str, &str)]) -> String {
    SECTIONS_RUN.lock().unwrap().push(name);
    let snippets = doc_snippets(stack.port, name);
    assert!(!snippets.is_empty(), "{name}: no snippets");
    // Each snippet announces itself on stderr, so that a failure names its snippet.
    let script: String = snippets
        .iter()
        .enumerate()
        .map(|(i, snippet)| format!("echo '== snippet {}' >&2\n{snippet}\n", i + 1))
        .collect();
    // Bounded: a snippet that waits for recovery must not hang the suite.
    let out = stack
        .command("timeout")
        .args(["900", "bash", "-euo", "pipefail", "-c", &script])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failed_in = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("== snippet "))
        .next_back()
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| snippets.get(n - 1));
    assert!(
        out.status.success(),
        "{}'s {name} section failed in:\n{}\nstdout: {}\nstderr: {stderr}",
        doc_sections::page_of(name),
        failed_in.map_or("(before the first snippet)", |s| s.as_str()),
        String::from_utf8_lossy(&out.stdout),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends GETs through nginx until `stop` is set, counting each answer (or failure) in
/// `answered` as it comes; returns (sent, failed, examples of failures).
async fn read_load(
    base: String,
    auth: HeaderMap,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
) -> (usize, usize, Vec<String>) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let sent = AtomicUsize::new(0);
    let mut failures = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        sent.fetch_add(1, Ordering::Relaxed);
        match client
            .get(format!("{base}/api/bookmarks"))
            .headers(auth.clone())
            .send()
            .await
        {
            Ok(r) if r.status() == 200 => {}
            Ok(r) => failures.push(format!("status {}", r.status())),
            Err(e) => failures.push(e.to_string()),
        }
        answered.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (
        sent.into_inner(),
        failures.len(),
        failures.into_iter().take(5).collect(),
    )
}

/// Runs `action` while `readers` reader loops (each with connections of its own, so that
/// both nginx workers carry some) hammer nginx; asserts no GET failed.
async fn no_get_fails_while(stack: &Stack, what: &str, readers: usize, action: impl FnOnce()) {
    let stop = Arc::new(AtomicBool::new(false));
    let auth = stack.as_tenant("hooli").await;
    let answered: Vec<Arc<AtomicUsize>> = (0..readers).map(|_| Arc::default()).collect();
    let loads: Vec<_> = answered
        .iter()
        .map(|n| {
            let (base, auth) = (stack.base.clone(), auth.clone());
            tokio::spawn(read_load(base, auth, stop.clone(), n.clone()))
        })
        .collect();
    let counts = || -> Vec<usize> { answered.iter().map(|n| n.load(Ordering::Relaxed)).collect() };
    // Every reader loop is under way (has had an answer) before the action.
    let running = eventually(Duration::from_secs(30), || async {
        counts().iter().all(|&n| n > 0)
    })
    .await;
    assert!(running, "{what}: every reader loop got an answer");
    action();
    // The readers go on past the action: for 2 s, and until each has had 5 more answers
    // and more than 20 were sent in all (a loaded machine answers more slowly).
    let acted = Instant::now();
    let before = counts();
    let carried_on = eventually(Duration::from_secs(60), || async {
        let now = counts();
        acted.elapsed() >= Duration::from_secs(2)
            && now.iter().zip(&before).all(|(n, b)| *n >= b + 5)
            && now.iter().sum::<usize>() > 20
    })
    .await;
    assert!(carried_on, "{what}: every reader loop went on after it");
    stop.store(true, Ordering::Relaxed);
    let (mut sent, mut failed, mut examples) = (0, 0, Vec::new());
    for load in loads {
        let (s, f, e) = load.await.unwrap();
        (sent, failed) = (sent + s, failed + f);
        examples.extend(e);
    }
    assert!(sent > 20, "{what}: the load loop ran ({sent} requests)");
    assert_eq!(
        failed, 0,
        "{what}: {failed} of {sent} GETs failed, e.g. {examples:?}"
    );
}

/// One timed GET through nginx as `tenant`: (status, elapsed, JSON body, serving replica).
async fn timed_get(stack: &Stack, path: &str, tenant: &str) -> (u16, Duration, Value, String) {
    timed_get_after(stack, path, tenant, None).await
}

/// [`timed_get`] bringing a consistency token.
async fn timed_get_after(
    stack: &Stack,
    path: &str,
    tenant: &str,
    token: Option<&str>,
) -> (u16, Duration, Value, String) {
    let mut request = stack.get(path).headers(stack.as_tenant(tenant).await);
    if let Some(token) = token {
        request = request.header("X-Consistency-Token", token);
    }
    let started = Instant::now();
    let res = request.send().await.unwrap();
    let took = started.elapsed();
    let status = res.status().as_u16();
    let replica = res
        .headers()
        .get("x-served-by")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = res.json().await.unwrap_or_default();
    (status, took, body, replica)
}

/// The longest each web replica is given to notice a silent server by itself, through its
/// liveness monitor: two timed-out checks (1 s interval, each bounded by the 2 s connect
/// timeout) with nothing else answering take about 6.5 s; a loaded machine takes longer.
const LIVENESS_NOTICE: Duration = Duration::from_secs(30);

/// Whether both web replicas have opened their circuit for `shard`'s `role` server (the
/// control database is shard `control`, role `control`), as each one's own `/metrics` says
/// (asked inside its container: nginx serves no metrics).
fn circuit_open_on_both(stack: &Stack, shard: &str, role: &str) -> bool {
    let open = format!("db_circuit_open{{shard=\"{shard}\",role=\"{role}\"}} 1");
    ["web1", "web2"].into_iter().all(|web| {
        let url = "http://127.0.0.1:3000/metrics";
        let scraped = stack.compose(&["exec", "-T", web, "curl", "-fsS", url]);
        String::from_utf8_lossy(&scraped.stdout)
            .lines()
            .any(|l| l == open)
    })
}

/// A partition, not a stop: `docker compose pause` freezes a server so that connections
/// stay open and nothing answers. Checks the targets of the outage table in docs/outages.md for a
/// shard primary, the shard0 replica and the control database.
async fn partitions_cost_one_timeout_then_fail_fast(stack: &Stack) {
    for tenant in ["acme-corp", "hooli"] {
        for _ in 0..4 {
            assert_eq!(timed_get(stack, "/api/bookmarks", tenant).await.0, 200);
        }
    }

    // Shard1's primary.
    stack.compose(&["pause", "postgres-shard-1"]);
    let (status, took, body, _) = timed_get(stack, "/api/bookmarks", "acme-corp").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["shard"], "shard1", "{body}");
    assert!(
        took <= Duration::from_millis(2500),
        "the first request after the freeze took {took:?} (nginx must not retry a shard 503)"
    );
    eprintln!("partition: first shard1 request answered 503 in {took:?}");
    let noticed = eventually(LIVENESS_NOTICE, || async {
        circuit_open_on_both(stack, "shard1", "primary")
    })
    .await;
    assert!(noticed, "both web replicas opened shard1's primary circuit");
    let mut replicas = std::collections::BTreeSet::new();
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let (status, took, body, replica) = timed_get(stack, "/api/bookmarks", "acme-corp").await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["shard"], "shard1", "{body}");
        assert!(
            took <= Duration::from_millis(100),
            "a later 503 took {took:?}"
        );
        slowest = slowest.max(took);
        replicas.insert(replica);
    }
    assert_eq!(
        replicas.len(),
        2,
        "both web replicas fail fast: {replicas:?}"
    );
    let mut shard0_slowest = Duration::ZERO;
    for _ in 0..20 {
        let (status, took, _, _) = timed_get(stack, "/api/bookmarks", "hooli").await;
        assert_eq!(status, 200, "shard0 tenants are unaffected");
        shard0_slowest = shard0_slowest.max(took);
    }
    assert!(
        shard0_slowest <= Duration::from_millis(100),
        "{shard0_slowest:?}"
    );
    eprintln!("partition: later shard1 503s ≤ {slowest:?}; shard0 200s ≤ {shard0_slowest:?}");
    stack.compose(&["unpause", "postgres-shard-1"]);
    let thawed = Instant::now();
    let served = eventually(Duration::from_secs(5), || async {
        let a = timed_get(stack, "/api/bookmarks", "acme-corp").await.0;
        let b = timed_get(stack, "/api/bookmarks", "acme-corp").await.0;
        a == 200 && b == 200
    })
    .await;
    assert!(served, "shard1 tenants served within 5 s of unpause");
    eprintln!(
        "partition: shard1 served again {:?} after unpause",
        thawed.elapsed()
    );

    // Shard0's read replica: reads fall back to the primary, then return to the replica.
    // On this stack only reads that bring a consistency token use replicas.
    let res = stack
        .http
        .post(format!("{}/api/bookmarks", stack.base))
        .headers(stack.as_tenant("hooli").await)
        .json(&json!({"url": "https://replica-partition.example"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let token = res.headers()["x-consistency-token"]
        .to_str()
        .unwrap()
        .to_owned();
    let token = Some(token.as_str());
    stack.compose(&["pause", "postgres-shard-0-replica"]);
    let (status, took, body, _) = timed_get_after(stack, "/api/tags", "hooli", token).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        took <= Duration::from_millis(2500),
        "first read took {took:?}"
    );
    let noticed = eventually(LIVENESS_NOTICE, || async {
        circuit_open_on_both(stack, "shard0", "replica")
    })
    .await;
    assert!(noticed, "both web replicas opened shard0's replica circuit");
    for _ in 0..10 {
        let (status, took, body, _) = timed_get_after(stack, "/api/tags", "hooli", token).await;
        assert_eq!(status, 200);
        assert_eq!(body["served_by"], "primary", "{body}");
        assert!(
            took <= Duration::from_millis(100),
            "a later read took {took:?}"
        );
    }
    stack.compose(&["unpause", "postgres-shard-0-replica"]);
    let back = eventually(Duration::from_secs(10), || async {
        let a = timed_get_after(stack, "/api/tags", "hooli", token).await.2;
        let b = timed_get_after(stack, "/api/tags", "hooli", token).await.2;
        a["served_by"] == "replica" && b["served_by"] == "replica"
    })
    .await;
    assert!(back, "reads return to the replica after unpause");

    // The control database: cached keys and placements keep serving, a key this replica has
    // not seen fails fast. (The newcomers' keys are made first, and never used before.)
    for i in 0..=10 {
        stack.key_of(&format!("partition-newcomer-{i}")).await;
    }
    stack.compose(&["pause", "postgres-control"]);
    let (status, took, _, _) = timed_get(stack, "/api/bookmarks", "hooli").await;
    assert_eq!(
        status, 200,
        "a cached placement serves while control is frozen"
    );
    assert!(took <= Duration::from_millis(100), "{took:?}");
    let (status, took, body, _) = timed_get(stack, "/api/bookmarks", "partition-newcomer-0").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "auth_unavailable", "{body}");
    assert!(
        took <= Duration::from_millis(2500),
        "first lookup took {took:?}"
    );
    let noticed = eventually(LIVENESS_NOTICE, || async {
        circuit_open_on_both(stack, "control", "control")
    })
    .await;
    assert!(noticed, "both web replicas opened the control circuit");
    for i in 1..=10 {
        let tenant = format!("partition-newcomer-{i}");
        let (status, took, body, _) = timed_get(stack, "/api/bookmarks", &tenant).await;
        assert_eq!(status, 503, "{body}");
        assert!(
            took <= Duration::from_millis(100),
            "a later lookup took {took:?}"
        );
        let (status, took, _, _) = timed_get(stack, "/api/bookmarks", "hooli").await;
        assert_eq!(status, 200);
        assert!(took <= Duration::from_millis(100), "{took:?}");
    }
    stack.compose(&["unpause", "postgres-control"]);
    let served = eventually(Duration::from_secs(5), || async {
        let a = timed_get(stack, "/api/bookmarks", "partition-newcomer-0")
            .await
            .0;
        let b = timed_get(stack, "/api/bookmarks", "partition-newcomer-0")
            .await
            .0;
        a == 200 && b == 200
    })
    .await;
    assert!(served, "unseen keys served within 5 s of unpausing control");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_stack_serves_through_nginx_survives_outages_and_tears_down_cleanly() {
    let mut files = vec![format!("{ROOT}/docker-compose.yml")];
    if offline() {
        files.push(format!("{ROOT}/compose/offline.yml"));
    }
    // The shard primaries on loopback, for the fault check's direct read-back.
    files.push(format!("{ROOT}/compose/verify.yml"));
    let project = unique("bookmarks-e2e");
    let port = free_port();
    let shard_ports = [free_port(), free_port(), free_port()];
    let mut compose = DockerCompose::with_local_client(files.as_slice())
        .with_project_name(&project)
        .with_env("BOOKMARKS_HTTP_PORT", port.to_string())
        .with_env("BOOKMARKS_SHARD0_PORT", shard_ports[0].to_string())
        .with_env("BOOKMARKS_SHARD1_PORT", shard_ports[1].to_string())
        .with_env("BOOKMARKS_SHARD2_PORT", shard_ports[2].to_string())
        .with_build(!offline())
        .with_wait(false);
    let started = Instant::now();
    compose.up().await.expect("docker compose up");
    let mut stack = Stack {
        project: project.clone(),
        files,
        port,
        shard_ports,
        base: format!("http://127.0.0.1:{port}"),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        admin_token: String::new(),
        keys: Mutex::default(),
    };
    assert!(
        stack.wait_ready(Duration::from_secs(180)).await,
        "/ready via nginx"
    );
    eprintln!("stack ready after {:?}", started.elapsed());

    // No secret comes from the repository: the admin token is this stack's own, generated
    // by its control migrations (256 bits of hex), and the replicas take it.
    stack.admin_token = admin_token(&stack);
    assert!(
        stack.admin_token.len() == 64 && stack.admin_token.bytes().all(|b| b.is_ascii_hexdigit()),
        "generated admin token: {:?}",
        stack.admin_token
    );

    // The primary admits replication because our init script said so, not because the image
    // did (the official image's pg_hba.conf has no such line, and neither has the stand-in's),
    // and databases get the official image's collation.
    assert_eq!(
        stack.psql(
            "postgres-shard-0",
            "select string_agg(array_to_string(user_name, ','), ' ') from pg_hba_file_rules \
             where 'replication' = any(database) and type = 'host' and address = 'all'"
        ),
        "replicator",
        "only the line 10-replication.sh wrote admits replication from other hosts"
    );
    assert_eq!(
        stack.psql(
            "postgres-shard-0",
            "select datcollate from pg_database where datname = current_database()"
        ),
        "en_US.utf8"
    );

    // The web replicas' shard and control connections act as the app's role, not as their
    // login: readiness asks through the app's own pools.
    for _ in 0..2 {
        let ready: Value = stack
            .get("/ready")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for shard in ["db:shard:shard0", "db:shard:shard1"] {
            let details = &ready["components"][shard]["details"];
            for server in ["primary", "replica"] {
                let said = details[server].as_str().unwrap_or_default();
                assert!(
                    said.ends_with("acting as bookmarks_app"),
                    "{shard} {server}: {ready}"
                );
            }
        }
        let control = ready["components"]["db:control"]["details"]["primary"]
            .as_str()
            .unwrap_or_default();
        assert!(
            control.ends_with("acting as bookmarks_app"),
            "control: {ready}"
        );
    }

    // Every app process logs in as its own login, which is no superuser: on each primary
    // the sessions of the web replicas and the worker (pools, reindexers, liveness checks)
    // are bookmarks_web's; the owner's own (this psql, a health check) are left out.
    for (service, database) in [
        ("postgres-control", "bookmarks_control"),
        ("postgres-shard-0", "bookmarks_shard"),
        ("postgres-shard-1", "bookmarks_shard"),
    ] {
        let logins = stack.psql_in(
            service,
            database,
            "select coalesce(string_agg(distinct a.usename || case when r.rolsuper \
             then ' (superuser)' else '' end, ','), '') from pg_stat_activity a \
             join pg_roles r on r.rolname = a.usename \
             where a.backend_type = 'client backend' and a.usename <> 'bookmarks'",
        );
        assert_eq!(logins, "bookmarks_web", "{service}'s sessions");
    }

    // The README's quick start, verbatim: a first key, a first bookmark, a route.
    let said = run_section(&stack, "quickstart", &[]);
    assert!(
        said.contains("\"url\":\"https://www.postgresql.org/docs/15/\"")
            && said.to_ascii_lowercase().contains("x-shard: shard1")
            && said.contains("\"via\":\"hash\""),
        "the quick start saved and listed acme-corp's first bookmark on shard1 and routed it: {said}"
    );

    // The walkthrough, verbatim: the keys made by its first snippet are used by the others.
    assert!(doc_snippets(port, "walkthrough").len() >= 4);
    let said = run_section(&stack, "walkthrough", &[]);
    assert!(
        said.contains("x-read-from: primary; why=no_token")
            && said.contains("token: 1:shard0:")
            && (said.contains("x-read-from: replica; why=token")
                || said.contains("x-read-from: primary; why=token")),
        "the walkthrough's read without a token went to the primary, its write answered a \
         token, and the read that brought it back was served by its token: {said}"
    );
    assert!(
        said.contains("\"missing_credentials\"") && said.contains("\"tenant_mismatch\""),
        "the walkthrough shows a request without a key and one with another tenant's: {said}"
    );
    assert!(
        said.contains("\"forbidden_role\"")
            && said.contains("eddie creates: 201")
            && said.contains("eddie adds a member: 403")
            && said.contains("\"email\":\"vera@acme.example\""),
        "the walkthrough's viewer was refused a write, its editor wrote but could not add a \
         member, and the viewer read the member list: {said}"
    );
    assert!(
        said.contains("eddie files a bookmark: 201")
            && said.contains("\"url\":\"https://doc.rust-lang.org/book/\"")
            && said.contains("vera makes a collection: 403")
            && said.contains("\"collection_not_empty\"")
            && said.contains("(409)")
            && said.contains("\"renamed\":1")
            && said.contains("eddie sends a batch: 200")
            && said.contains("\"batch_refused\""),
        "the walkthrough's editor filed a bookmark in a nested collection, the viewer found it \
         through the parent and could not make a collection, a collection with contents was \
         kept, a tag was renamed, and a batch was applied and another refused whole: {said}"
    );
    assert!(
        said.contains("\"state\":\"done\"")
            && said.contains(
                "\"counts\":{\"parsed\":5,\"created\":4,\"updated\":0,\"skipped\":0,\"refused\":1}"
            )
            && said.contains("\"reason\":\"url must be an http:// or https:// address\"")
            && said.contains("\"name\":\"Distributed systems\"")
            && said.contains("\"title\":\"Redis cluster specification\"")
            && said.contains("<DT><H3 ")
            && said.contains(">Bookmarks Toolbar</H3>")
            && said.contains("\"changes\":["),
        "the walkthrough imported the shipped bookmark file (its folders became collections, \
         its bookmarklet was refused), exported it and read the change feed: {said}"
    );
    assert!(
        said.contains("spare key: 200") && said.contains("\"invalid_api_key\""),
        "the walkthrough's spare key worked, then was refused once revoked: {said}"
    );
    for replica in ["web1", "web2"] {
        assert!(
            said.contains(&format!("umbrella: {replica} shard1")),
            "{replica} routes the moved range's new tenant to its new owner: {said}"
        );
    }
    assert!(
        said.contains("belongs to shard shard1") && said.contains("\"source\": \"slot_map\""),
        "the old owner refused a direct insert, and `bookmarks slots` showed the override: {said}"
    );
    let q = "select count(*) from bookmarks where tenant_id = 'umbrella'";
    assert_eq!(
        stack.psql("postgres-shard-1", q),
        "1",
        "umbrella's first write is on its new owner"
    );
    assert_eq!(stack.psql("postgres-shard-0", q), "0");
    assert!(stack.wait_ready(Duration::from_secs(30)).await);

    // Three processes run reindexers (web1, web2, worker); each shard has exactly one leader.
    let leaders = format!(
        "select count(*) from pg_locks where locktype = 'advisory' and granted \
         and ((classid::bigint << 32) | objid::bigint) = {}",
        bookmarks_sharded::search::reindexer::LEADER_LOCK
    );
    for shard in ["postgres-shard-0", "postgres-shard-1"] {
        assert_eq!(
            stack.psql(shard, &leaders),
            "1",
            "one reindexer leader on {shard}"
        );
    }

    // The walkthrough moved initech from shard1 to shard0 with move_slot, in its own
    // container on the stack's network.
    let q = "select count(*) from bookmarks where tenant_id = 'initech'";
    assert_eq!(
        stack.psql("postgres-shard-0", q),
        "4",
        "initech's rows moved, and its write after the move landed beside them"
    );
    assert_eq!(
        stack.psql("postgres-shard-1", q),
        "0",
        "nothing left behind"
    );
    let filed = "select count(*) from bookmarks b join collections c \
                 on c.tenant_id = b.tenant_id and c.id = b.collection_id \
                 where b.tenant_id = 'initech' and c.name = 'TPS reports'";
    assert_eq!(
        stack.psql("postgres-shard-0", filed),
        "3",
        "initech's collection moved with the bookmarks filed in it"
    );
    let left = "select count(*) from collections where tenant_id = 'initech'";
    assert_eq!(stack.psql("postgres-shard-1", left), "0");
    // Its change feed moved too: a cursor read on shard1 went on on shard0 with exactly the
    // bookmark written after the move.
    // (The last feed page on shard0: hooli's import step read one there before.)
    let after = said
        .lines()
        .rfind(|l| l.starts_with("{\"shard\":\"shard0\",\"changes\":"))
        .unwrap_or_else(|| panic!("the walkthrough read initech's feed after the move: {said}"));
    assert_eq!(
        after.matches("\"kind\":").count(),
        1,
        "one change since the cursor: {after}"
    );
    assert!(
        after.contains("https://example.com/tps/after-the-move")
            && after.contains("\"more\":false"),
        "{after}"
    );

    // The directory: a pin made through one replica's CLI reroutes both replicas at once,
    // and the tenant's first write lands on the pinned shard.
    let placed = "e2e-pinned"; // hashes to shard1
    let placed_auth = stack.as_tenant(placed).await;
    stack.compose(&["exec", "-T", "web2", "bookmarks", "pin", placed, "shard0"]);
    let t0 = Instant::now();
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < 2 || seen.values().any(|s| s != "shard0") {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "both replicas route {placed} to shard0 within 1 s: {seen:?}"
        );
        let res = stack
            .get("/api/bookmarks")
            .headers(placed_auth.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let by = res.headers()["x-served-by"].to_str().unwrap().to_owned();
        seen.insert(by, res.headers()["x-shard"].to_str().unwrap().to_owned());
    }
    let res = stack
        .http
        .post(format!("{}/api/bookmarks", stack.base))
        .headers(placed_auth)
        .json(&json!({"url": "https://e2e.example/placed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let q = format!("select count(*) from bookmarks where tenant_id = '{placed}'");
    assert_eq!(
        stack.psql("postgres-shard-0", &q),
        "1",
        "{placed} is on shard0"
    );
    assert_eq!(
        stack.psql("postgres-shard-1", &q),
        "0",
        "{placed} is not where the hash would put it"
    );

    // Placement: every tenant's row is where `bookmarks route` says, whichever replica served.
    let tenants: Vec<String> = (0..24).map(|i| format!("e2e-tenant-{i}")).collect();
    for t in &tenants {
        let res = stack
            .http
            .post(format!("{}/api/bookmarks", stack.base))
            .headers(stack.as_tenant(t).await)
            .json(&json!({"url": format!("https://e2e.example/{t}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{t}");
    }
    // Asked inside the stack, so `route` reads the directory and the live slot map (the
    // walkthrough's range move changed it) as the web replicas do.
    let mut args = vec!["exec", "-T", "web1", "bookmarks", "route", "--"];
    args.extend(tenants.iter().map(String::as_str));
    let route = stack.compose(&args);
    let routes: Vec<Value> = String::from_utf8_lossy(&route.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut instances = std::collections::BTreeSet::new();
    for (t, r) in tenants.iter().zip(&routes) {
        let owner = r["shard"].as_str().unwrap();
        let (here, there) = if owner == "shard0" {
            ("postgres-shard-0", "postgres-shard-1")
        } else {
            ("postgres-shard-1", "postgres-shard-0")
        };
        let q = format!("select count(*) from bookmarks where tenant_id = '{t}'");
        assert_eq!(stack.psql(here, &q), "1", "{t} on its shard {owner}");
        assert_eq!(stack.psql(there, &q), "0", "{t} only on {owner}");
        let mut served = std::collections::BTreeMap::new();
        for _ in 0..6 {
            let res = stack
                .get("/api/bookmarks")
                .headers(stack.as_tenant(t).await)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            let by = res.headers()["x-served-by"].to_str().unwrap().to_owned();
            let shard = res.headers()["x-shard"].to_str().unwrap().to_owned();
            assert_eq!(shard, owner, "{t} served by {by} from {shard}");
            served.insert(by, shard);
            if served.len() == 2 {
                break;
            }
        }
        instances.extend(served.into_keys());
    }
    assert_eq!(
        instances.into_iter().collect::<Vec<_>>(),
        ["web1", "web2"],
        "both replicas served and agreed"
    );

    // Who may see what through nginx: no key, no tenant; no metrics at all, so no tenant
    // names, however the scrape is made; the replicas' own /metrics names tenants only
    // for the admin token.
    let res = stack.get("/api/bookmarks").send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["www-authenticate"], "Bearer");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "missing_credentials", "{body}");
    let (acme_key, _) = stack.key_of("acme-corp").await;
    let res = stack
        .get("/api/bookmarks")
        .headers(stack.as_tenant("acme-corp").await)
        .header("X-Tenant-Id", "hooli")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "acme-corp's key cannot act as hooli");
    for path in ["/metrics", "/actuator/metrics", "/actuator/health"] {
        for auth in [
            None,
            Some(stack.admin_token.as_str()),
            Some(acme_key.as_str()),
        ] {
            let mut req = stack.get(path);
            if let Some(value) = auth {
                req = req.bearer_auth(value);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 404, "{path} through nginx");
            let text = res.text().await.unwrap();
            assert!(!text.contains("tenant"), "{path}: {text}");
        }
    }
    let scrape = |extra: &[&str]| {
        let mut args = vec!["exec", "-T", "web1", "curl", "-fsS"];
        args.extend_from_slice(extra);
        args.push("http://127.0.0.1:3000/metrics");
        String::from_utf8_lossy(&stack.compose(&args).stdout).into_owned()
    };
    let anonymous = scrape(&[]);
    assert!(
        anonymous.contains("http_requests_total") && !anonymous.contains("tenant=\""),
        "an anonymous scrape names no tenant"
    );
    let bearer = format!("Authorization: Bearer {}", stack.admin_token);
    let operator = scrape(&["-H", &bearer]);
    assert!(
        operator.contains("tenant_busiest_requests{rank=\"1\",tenant=\""),
        "the operator's scrape ranks the busiest tenants: {operator}"
    );

    let browser = browse_the_admin_page_and_the_tenant_ui(&stack).await;

    // The replica is in recovery and streams a fresh shard0 row within 5 s.
    assert_eq!(
        stack.psql("postgres-shard-0-replica", "select pg_is_in_recovery()"),
        "t"
    );
    let res = stack
        .http
        .post(format!("{}/api/bookmarks", stack.base))
        .headers(stack.as_tenant("hooli").await)
        .json(&json!({"url": "https://e2e.example/replicated"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let streamed = eventually(Duration::from_secs(5), || async {
        stack.psql(
            "postgres-shard-0-replica",
            "select count(*) from bookmarks where url = 'https://e2e.example/replicated'",
        ) == "1"
    })
    .await;
    assert!(streamed, "the row reached the replica within 5 s");

    // A shard outage, its primary and its replica: partial answers within 3 s, 503s naming
    // the shard, recovery in 30 s. (With its replica up, the shard's cross-tenant counts
    // would still be answered.)
    stack.compose(&["stop", "postgres-shard-1-replica", "postgres-shard-1"]);
    let t0 = Instant::now();
    let degraded = eventually(Duration::from_secs(3), || async {
        let Ok(res) = stack.get("/api/stats").send().await else {
            return false;
        };
        if res.status() != 200 {
            return false;
        }
        let stats: Value = res.json().await.unwrap_or_default();
        stats["shards"][1]["status"] == "down"
            && stats["shards"][0]["bookmarks"]
                .as_i64()
                .is_some_and(|n| n > 0)
    })
    .await;
    assert!(
        degraded,
        "stats degraded within 3 s (took {:?})",
        t0.elapsed()
    );
    let res = stack
        .get("/api/bookmarks")
        .headers(stack.as_tenant("acme-corp").await)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["shard"], "shard1", "{body}");
    let res = stack
        .get("/api/bookmarks")
        .headers(stack.as_tenant("hooli").await)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // Each web replica answers /ready from a probe up to 1 s old.
    let not_ready = eventually(Duration::from_secs(10), || async {
        matches!(stack.get("/ready").send().await, Ok(r) if r.status() == 503)
    })
    .await;
    assert!(not_ready, "/ready says 503 once a probe sees shard1 down");
    // The admin page still renders, and its banner names the missing shard.
    browser
        .client
        .goto(&format!("{}/admin", stack.base))
        .await
        .unwrap();
    let banner = browser.text("#banner").await;
    assert!(banner.contains("shard1 is missing"), "{banner}");
    assert!(
        browser
            .text(".shard-card[data-shard=shard0]")
            .await
            .contains("up")
    );
    browser.screenshot("admin-shard-down").await;
    browser.close().await;
    stack.compose(&["start", "postgres-shard-1", "postgres-shard-1-replica"]);
    let acme = stack.as_tenant("acme-corp").await;
    let recovered = eventually(Duration::from_secs(30), || async {
        let ok = matches!(stack.get("/api/bookmarks").headers(acme.clone()).send().await, Ok(r) if r.status() == 200);
        ok && matches!(stack.get("/ready").send().await, Ok(r) if r.status() == 200)
    })
    .await;
    assert!(
        recovered,
        "shard1 tenants and /ready recovered within 30 s without restarting web replicas"
    );

    partitions_cost_one_timeout_then_fail_fast(&stack).await;

    rolling::deploys_and_a_third_shard_fail_no_request(&stack).await;

    faults::no_acknowledged_write_is_lost_under_faults(&stack).await;

    let run = SECTIONS_RUN.lock().unwrap().clone();
    for (page, section) in doc_sections::RUN_SECTIONS {
        assert!(
            run.contains(section),
            "{page}'s {section} section is run by this test"
        );
    }

    // A web replica leaving, gracefully and not: readers never notice. The second to go is
    // the one that stayed up, while nginx may still hold the first one's stop against it
    // (it trusts a passed-over replica again only after a request to it succeeded).
    no_get_fails_while(&stack, "docker compose stop web1", 1, || {
        stack.compose(&["stop", "web1"]);
    })
    .await;
    stack.compose(&["start", "web1"]);
    let healthy = eventually(Duration::from_secs(30), || async {
        let out = stack.compose(&["ps", "--format", "{{.Service}} {{.Health}}", "web1"]);
        String::from_utf8_lossy(&out.stdout).contains("web1 healthy")
    })
    .await;
    assert!(healthy, "web1 is healthy again");
    no_get_fails_while(
        &stack,
        "docker compose kill web2, web1 just back",
        8,
        || {
            stack.compose(&["kill", "web2"]);
        },
    )
    .await;

    // Teardown leaves nothing behind. The third shard's services are behind a profile this
    // project's files do not enable, so `down` would not see their containers.
    stack.compose(&[
        "--profile",
        "shard2",
        "rm",
        "--stop",
        "--force",
        "postgres-shard-2",
        "postgres-shard-2-replica",
    ]);
    compose.down().await.expect("docker compose down -v");
    let label = format!("label=com.docker.compose.project={project}");
    for kind in [["ps", "-aq"], ["volume", "ls"], ["network", "ls"]] {
        let out = Command::new("docker")
            .args(kind)
            .args(["-q", "--filter", &label])
            .output()
            .unwrap();
        let left = String::from_utf8_lossy(&out.stdout);
        assert!(left.trim().is_empty(), "docker {kind:?} still lists {left}");
    }
    eprintln!("end-to-end run took {:?}", started.elapsed());
}
