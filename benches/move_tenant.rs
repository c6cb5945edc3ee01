//! How fast a tenant moves, and how long its writes are refused, while it is being written.
//!
//! Two Postgres servers in containers (control and shard0 on one, shard1 on the other), the
//! real server in-process, a tenant of 100 000 bookmarks, and a writer creating bookmarks
//! for it through HTTP at `BENCH_WRITES_PER_SEC` (default 200; 0 means as fast as one
//! connection allows, which on a 2-core machine takes a core away from the move). The move is the library's own
//! `Mover` (what `move_slot run --confirm` runs). Prints the bulk copy rate, the fence
//! window the mover recorded and the one the writer saw (the longest stretch without a
//! successful write that contained a refusal), and checks every acknowledged write arrived.
//!
//! `scripts/bench-move.sh` runs it; `BOOKMARKS_POSTGRES_IMAGE` picks the image.

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bookmarks_sharded::bookmarks::TENANT_TABLES;
use bookmarks_sharded::moves::plan::TenantSelection;
use bookmarks_sharded::moves::{Mover, Step};
use serde_json::json;
use support::*;

const ROWS: usize = 100_000;
const TENANT: &str = "whale-bench";

struct Seen {
    acknowledged: Vec<String>,
    refused: usize,
    longest_refusal_gap: Duration,
}

/// Creates bookmarks at `per_second` (0: back to back) until `stop`; measures the longest
/// stretch between two successful writes that had a refusal in it.
async fn writer(app: Arc<TestApp>, stop: Arc<AtomicBool>, per_second: u64) -> Seen {
    let mut tick = (per_second > 0).then(|| {
        let mut t = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second as f64));
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        t
    });
    let mut seen = Seen {
        acknowledged: Vec::new(),
        refused: 0,
        longest_refusal_gap: Duration::ZERO,
    };
    let mut last_ok = Instant::now();
    let mut refused_since_ok = false;
    let mut n = 0;
    // Tenants authenticate with an API key since the service has them.
    let auth = app.tenant(TENANT).await;
    while !stop.load(Ordering::Relaxed) {
        if let Some(tick) = &mut tick {
            tick.tick().await;
        }
        n += 1;
        let res = app
            .post("/api/bookmarks")
            .headers(auth.clone())
            .json(&json!({"url": format!("https://bench.example/live/{n}")}))
            .send()
            .await
            .unwrap();
        match res.status().as_u16() {
            201 => {
                let body: serde_json::Value = res.json().await.unwrap();
                seen.acknowledged
                    .push(body["id"].as_str().unwrap().to_owned());
                if refused_since_ok {
                    seen.longest_refusal_gap = seen.longest_refusal_gap.max(last_ok.elapsed());
                }
                last_ok = Instant::now();
                refused_since_ok = false;
            }
            503 => {
                seen.refused += 1;
                refused_since_ok = true;
            }
            other => panic!("unexpected status {other}: {}", res.text().await.unwrap()),
        }
    }
    seen
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let network = unique("bookmarks-bench-net");
    remove_network_at_exit(&network);
    let (a, b) = tokio::join!(start_server(&network), start_server(&network));
    for db in ["control", "shard0"] {
        create_database(a.port, db).await;
    }
    create_database(b.port, "shard1").await;
    let layout = Layout {
        control: (a.port, "control".to_owned()),
        shards: vec![
            ("shard0".to_owned(), a.port, "shard0".to_owned(), None),
            ("shard1".to_owned(), b.port, "shard1".to_owned(), None),
        ],
        extra: "[sharding]\ndirectory_router = true\n".to_owned(),
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
    };
    let app = Arc::new(TestApp::spawn(layout.settings(), "bench").await);
    let from = hash_shard(&app.settings, TENANT);
    let to = other_shard(&from).to_owned();
    let (port, db) = if from == "shard0" {
        (a.port, "shard0")
    } else {
        (b.port, "shard1")
    };
    sql(
        port,
        db,
        &format!(
            "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
             SELECT '{TENANT}', gen_random_uuid(), 'https://bench.example/seed/' || i, \
             'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
             ARRAY['bench', 'tag' || (i % 10)] FROM generate_series(1, {ROWS}) i; ANALYZE bookmarks"
        ),
    )
    .await;

    let per_second: u64 = std::env::var("BENCH_WRITES_PER_SEC")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writer(app.clone(), stop.clone(), per_second));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut mover = Mover::connect(&app.settings, TENANT_TABLES).await.unwrap();
    let selection = TenantSelection::Tenants(vec![TENANT.to_owned()]);
    let mut m = mover.start(&from, &to, &selection, true).await.unwrap();
    mover.claim(&m).await.unwrap();
    let copy_started = Instant::now();
    mover
        .step(&mut m, Step::Copy, Duration::ZERO)
        .await
        .unwrap();
    let copy_took = copy_started.elapsed();
    let rows_copied = m.rows_copied;
    mover.drive(&mut m, true, Duration::ZERO).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = writing.await.unwrap();

    let (dport, ddb) = if to == "shard0" {
        (a.port, "shard0")
    } else {
        (b.port, "shard1")
    };
    let ids = seen
        .acknowledged
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(",");
    let arrived = sql(
        dport,
        ddb,
        &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{TENANT}' AND id IN ({ids})"),
    )
    .await;
    let left = sql(
        port,
        db,
        &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{TENANT}'"),
    )
    .await;

    println!();
    let pace = if per_second == 0 {
        "back to back".to_owned()
    } else {
        format!("{per_second}/s")
    };
    println!("move of one tenant, {ROWS} seeded bookmarks, {from} -> {to}, writes at {pace}");
    println!(
        "  copy step (capture, bulk copy, catch-up): {rows_copied} rows in {} ms = {:.0} rows/s",
        copy_took.as_millis(),
        rows_copied as f64 / copy_took.as_secs_f64()
    );
    println!(
        "  fence window recorded by the mover:       {} ms",
        m.fence_ms.unwrap_or_default()
    );
    println!(
        "  longest write gap with a refusal (writer): {} ms ({} writes refused with 503)",
        seen.longest_refusal_gap.as_millis(),
        seen.refused
    );
    println!(
        "  writes acknowledged during the run:       {} (on the destination: {})",
        seen.acknowledged.len(),
        arrived[0][0].as_deref().unwrap_or("?")
    );
    println!(
        "  rows left on the source:                  {}",
        left[0][0].as_deref().unwrap_or("?")
    );
    assert_eq!(
        arrived[0][0].as_deref(),
        Some(seen.acknowledged.len().to_string().as_str()),
        "every acknowledged write arrived"
    );
    for s in [a, b] {
        keep_until_exit(s.container);
    }
}
