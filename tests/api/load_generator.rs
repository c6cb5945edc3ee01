//! `loadgen` against the real service (real Postgres in containers, the app spawned for
//! real), driven through the library API for a few seconds per test: its counts agree with
//! the server's own request counter, a whale gets its configured share, and a stopped shard
//! shows up as errors for exactly that shard's tenants.
//!
//! `http_requests_total` lives in a process-wide recorder shared by every app in this test
//! binary, so each of these tests runs [`alone`] and compares deltas.

use std::collections::BTreeMap;
use std::time::Duration;

use loadgen::{Config, Load, Report};
use serde_json::Value;

use crate::support::*;

const API_ROUTES: [&str; 3] = [
    r#"route="/api/bookmarks""#,
    r#"route="/api/bookmarks/{id}""#,
    r#"route="/api/collections""#,
];

/// `http_requests_total` of the bookmark API routes, by status.
fn api_requests_by_status(metrics: &str) -> BTreeMap<String, u64> {
    let mut by_status = BTreeMap::new();
    for line in metrics.lines() {
        let Some(labels) = line.strip_prefix("http_requests_total{") else {
            continue;
        };
        if !API_ROUTES.iter().any(|r| labels.contains(r)) {
            continue;
        }
        let status = labels
            .split("status=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("?")
            .to_owned();
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        *by_status.entry(status).or_default() += value as u64;
    }
    by_status
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// The admin token loadgen creates its tenants' API keys with.
const TOKEN: &str = "loadgen-test-admin-token";

/// The app with its admin page on, for loadgen to create keys through.
async fn spawn(settings: bookmarks_sharded::configuration::Settings, name: &str) -> TestApp {
    let mut options = test_options(name);
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(TOKEN).unwrap();
    TestApp::spawn_with(settings, options).await
}

fn config(app: &TestApp) -> Config {
    Config {
        base_url: app.base.clone(),
        admin_token: Some(TOKEN.to_owned()),
        tenants: 10,
        seed: 7,
        load: Load::Open {
            rate: 100.0,
            max_in_flight: 256,
        },
        duration: Duration::from_secs(3),
        // Longer than the server's request timeout: every request gets the server's answer.
        timeout: Duration::from_secs(30),
        ..Config::default()
    }
}

async fn run(config: &Config) -> Report {
    let report = loadgen::run(config).await.expect("loadgen runs");
    println!("{}", report.table());
    report
}

#[tokio::test]
async fn the_json_reports_request_counts_match_the_servers_own_request_counter() {
    let _alone = alone().await;
    let l = layout("").await;
    let app = spawn(l.settings(), "loadgen-counts").await;
    let config = Config {
        prefill: 2,
        whales: vec!["acme-corp=0.3".parse().unwrap()],
        ..config(&app)
    };
    let before = api_requests_by_status(&app.metrics_text().await);
    let report = run(&config).await;
    let after = api_requests_by_status(&app.metrics_text().await);
    let served = delta(&before, &after);

    let path = std::env::temp_dir().join(format!("{}.json", unique("loadgen-report")));
    std::fs::write(&path, report.to_json()).unwrap();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);

    let n = |v: &Value| v.as_u64().unwrap();
    let sent = n(&json["total"]["requests"]);
    let prefilled = n(&json["prefill"]["requests"]);
    assert_eq!(prefilled, 22, "2 per tenant, the whale too");
    assert!(sent >= 250, "about 100/s for 3 s: {sent}");
    assert_eq!(n(&json["total"]["not_sent"]), 0);
    assert_eq!(
        served.values().sum::<u64>(),
        sent + prefilled,
        "server saw {served:?}"
    );
    let ok = n(&json["total"]["ok"]) + n(&json["prefill"]["created"]);
    let served_ok: u64 = served
        .iter()
        .filter(|(s, _)| s.starts_with('2'))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(served_ok, ok, "2xx: server saw {served:?}");
    let errors: &serde_json::Map<String, Value> = json["total"]["errors"].as_object().unwrap();
    for (kind, count) in errors {
        assert_eq!(
            served.get(kind).copied(),
            count.as_u64(),
            "error {kind}: the client saw {count}, the server {served:?}"
        );
    }

    let sum = |rows: &Value| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| n(&r["requests"]))
            .sum()
    };
    let classes = json["classes"].as_array().unwrap();
    let names: Vec<&str> = classes
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["whales", "others"]);
    assert_eq!(
        n(&classes[0]["requests"]) + n(&classes[1]["requests"]),
        sent
    );
    assert_eq!(sum(&json["shards"]), sent);
    assert_eq!(
        n(&json["whale_tenants"][0]["requests"]),
        n(&classes[0]["requests"])
    );
    assert_eq!(json["config"]["load"]["rate"], 100.0);
    assert_eq!(json["config"]["whales"][0]["name"], "acme-corp");
    let series_total: u64 = json["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| n(&p["count"]))
        .sum();
    assert_eq!(series_total, sent);
    app.stop().await;
}

#[tokio::test]
async fn a_whale_configured_at_half_gets_half_of_all_requests() {
    let _alone = alone().await;
    let l = layout("").await;
    let app = spawn(l.settings(), "loadgen-whale").await;
    let config = Config {
        tenants: 20,
        // Also warms the app's connection pools: a cold start at 100/s queues behind
        // connection set-up and times out.
        prefill: 1,
        zipf: 1.0,
        whales: vec!["acme-corp=0.5".parse().unwrap()],
        mix: "list=8,get=1,create=1".parse().unwrap(),
        load: Load::Open {
            rate: 100.0,
            max_in_flight: 512,
        },
        requests: Some(400),
        duration: Duration::from_secs(20),
        ..config(&app)
    };
    let report = run(&config).await;
    let due = report.total.requests + report.total.not_sent;
    assert_eq!(due, 400, "--requests caps the run");
    assert!(report.window_s < 10.0, "400 at 100/s: {}", report.window_s);
    let whale = &report.whale_tenants[0];
    assert_eq!(whale.name, "acme-corp");
    let share = (whale.requests + whale.not_sent) as f64 / due as f64;
    assert!((share - 0.5).abs() <= 0.04, "the whale got {share}");
    let others: u64 = report
        .tenants
        .iter()
        .filter(|t| !t.whale)
        .map(|t| t.requests + t.not_sent)
        .sum();
    assert_eq!(others + whale.requests + whale.not_sent, due);
    // Zipf 1.0: tenant-0001 is the busiest of the others.
    let busiest = report
        .tenants
        .iter()
        .filter(|t| !t.whale)
        .max_by_key(|t| t.requests + t.not_sent)
        .unwrap();
    assert_eq!(busiest.name, "tenant-0001");
    app.stop().await;
}

#[tokio::test]
async fn whale_import_seeds_each_whale_through_the_import_endpoint_before_the_run() {
    let l = layout("").await;
    let app = spawn(l.settings(), "loadgen-whale-import").await;
    let whale = unique("import-whale");
    let seeded = Config {
        tenants: 3,
        whales: vec![format!("{whale}=0.5").parse().unwrap()],
        whale_import: 2_500,
        requests: Some(20),
        ..config(&app)
    };
    run(&seeded).await;
    let imports = app.get_json("/api/imports", &whale).await;
    let import = &imports["imports"][0];
    assert_eq!(import["state"], "done", "{imports}");
    assert_eq!(import["counts"]["created"], 2_500, "{imports}");
    let shard = hash_shard(&l.settings(), &whale);
    let (port, db) = port_of(&l, &shard);
    let q = format!(
        "SELECT count(*) FROM bookmarks WHERE tenant_id = '{whale}' \
         AND url LIKE 'https://import.example/%'"
    );
    assert_eq!(sql(port, &db, &q).await[0][0].as_deref(), Some("2500"));
    let refused = Config {
        whales: Vec::new(),
        whale_import: 10,
        ..config(&app)
    };
    let e = match loadgen::run(&refused).await {
        Ok(_) => panic!("--whale-import without a whale runs"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("--whale-import needs at least one --whale"),
        "{e}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_stopped_shard_shows_up_as_errors_only_for_that_shards_tenants() {
    let _alone = alone().await;
    let (_main, doomed, layout) = split_servers("bookmarks-loadgen-net").await;
    let app = spawn(layout.settings(), "loadgen-outage").await;
    let ready = eventually(Duration::from_secs(30), || async {
        app.get("/ready").send().await.unwrap().status() == 200
    })
    .await;
    assert!(ready, "both shards serve before the prefill");
    let base = Config {
        tenants: 12,
        whales: vec!["acme-corp=0.2".parse().unwrap()],
        mix: "list=6,get=2,create=1,update=1".parse().unwrap(),
        load: Load::Open {
            rate: 60.0,
            max_in_flight: 256,
        },
        ..config(&app)
    };

    // Prefill (and one measured request) while both shards are up: X-Shard says where
    // each tenant lives. A fresh server on a busy machine may refuse the first requests;
    // prefill is idempotent (a 409 counts as there), so it is simply run again.
    let mut warm = None;
    for _ in 0..5 {
        let report = run(&Config {
            prefill: 2,
            requests: Some(1),
            ..base.clone()
        })
        .await;
        if report.prefill.errors.is_empty() {
            warm = Some(report);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let warm = warm.expect("prefill succeeds within five tries");
    assert_eq!(warm.prefill.created + warm.prefill.existing, 26);
    let home: BTreeMap<String, String> = warm
        .tenants
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.home_shard.clone().expect("prefill saw X-Shard"),
            )
        })
        .collect();
    let on_doomed: Vec<&String> = home
        .iter()
        .filter(|(_, s)| *s == "shard1")
        .map(|(t, _)| t)
        .collect();
    assert!(
        !on_doomed.is_empty() && on_doomed.len() < home.len(),
        "both shards have tenants: {home:?}"
    );

    doomed.container.stop_with_timeout(Some(5)).await.unwrap();
    let report = run(&base).await;

    for t in &report.tenants {
        let what = format!("{} on {}: {:?}", t.name, home[&t.name], t);
        if home[&t.name] == "shard1" {
            assert!(t.requests > 0, "{what}");
            assert_eq!(t.ok, 0, "{what}");
            assert!(
                t.errors.keys().all(|k| k.starts_with('5')),
                "only 5xx: {what}"
            );
        } else {
            assert!(t.errors.is_empty(), "no errors: {what}");
            assert_eq!(t.ok, t.requests, "{what}");
        }
    }
    let shard0 = report.shards.iter().find(|r| r.name == "shard0").unwrap();
    assert!(shard0.errors.is_empty(), "{shard0:?}");
    assert!(report.total.errors.keys().all(|k| k.starts_with('5')));
    app.stop().await;
}

#[tokio::test]
async fn verify_checks_collections_filed_bookmarks_batches_and_refused_viewers_against_the_real_service()
 {
    let _alone = alone().await;
    let l = layout("").await;
    let app = spawn(l.settings(), "loadgen-verify").await;
    let config = Config {
        prefill: 1,
        mix: "list=1,create=3,update=3,collection=2,viewer=1,batch=2"
            .parse()
            .unwrap(),
        load: Load::Open {
            rate: 60.0,
            max_in_flight: 256,
        },
        verify: Some(loadgen::VerifyConfig {
            settle: Duration::ZERO,
            patience: Duration::from_secs(30),
            shards: Vec::new(),
        }),
        ..config(&app)
    };
    let report = run(&config).await;
    let verdict = report.verdict.as_ref().expect("--verify ran");
    assert!(verdict.passed(), "{}", report.to_json());
    let count = |by: &BTreeMap<&str, usize>, k: &str| by.get(k).copied().unwrap_or(0);
    assert!(
        count(&verdict.collection_writes, "acked") > 0,
        "{:?}",
        verdict.collection_writes
    );
    assert!(
        count(&verdict.viewer_writes, "refused") > 0 && count(&verdict.viewer_writes, "acked") == 0,
        "{:?}",
        verdict.viewer_writes
    );
    assert!(
        count(&verdict.batch_writes, "acked") > 0,
        "{:?}",
        verdict.batch_writes
    );
    // The checker held filed bookmarks to their collections: some were filed.
    let mut filed = 0;
    for (name, ..) in &l.shards {
        let n = crate::moves::on_shard(
            &l,
            name,
            "SELECT count(*) FROM bookmarks WHERE collection_id IS NOT NULL",
        )
        .await;
        filed += n[0][0].as_deref().unwrap().parse::<u64>().unwrap();
    }
    assert!(filed > 0, "bookmarks were filed in collections");
    app.stop().await;
}
