//! How far the search index trails writes: at a steady trickle, and under a burst.
//!
//! Real Postgres in containers (the test cluster), the real server in-process with its
//! reindexers. Steady: `BENCH_STEADY_WRITES` bookmarks (default 100) written through HTTP
//! at 10 per second; for each, the time from its 201 to its dirty marker being gone.
//! Burst: `BENCH_BURST_ROWS` rows (default 100 000) inserted into one shard in one
//! statement, then the time until the backlog is empty (the lag of the last row of the
//! burst) and the indexing rate. `cargo xtask bench index-lag` runs it.

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let steady = env_usize("BENCH_STEADY_WRITES", 100);
    let burst = env_usize("BENCH_BURST_ROWS", 100_000);
    let layout = layout("").await;
    let app = TestApp::spawn(layout.settings(), "bench-lag").await;
    let (port, db) = port_of(&layout, "shard0");

    let mut lags = Vec::with_capacity(steady);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for i in 0..steady {
        tick.tick().await;
        let created = app
            .create(
                "hooli",
                json!({"url": format!("https://lag.example/{i}"), "notes": "steady trickle"}),
            )
            .await;
        let written = Instant::now();
        let id = created["id"].as_str().unwrap().to_owned();
        let query = format!("SELECT count(*) FROM search_pending WHERE bookmark_id = '{id}'");
        while sql(port, &db, &query).await[0][0].as_deref() != Some("0") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        lags.push(written.elapsed());
    }
    lags.sort();
    println!(
        "steady, {steady} writes at 10/s: index lag p50 {:?}, p99 {:?}, max {:?}",
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags[lags.len() - 1]
    );

    let started = Instant::now();
    sql(
        port,
        &db,
        &format!(
            "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
             SELECT 'burst-' || (i % 50), gen_random_uuid(), 'https://burst.example/' || i, \
                    'burst row ' || i, 'written in one statement', ARRAY['burst', 't' || (i % 7)] \
             FROM generate_series(1, {burst}) i"
        ),
    )
    .await;
    let inserted = started.elapsed();
    let drained_from = Instant::now();
    let mut peak = 0i64;
    loop {
        let pending: i64 = sql(port, &db, "SELECT count(*) FROM search_pending").await[0][0]
            .as_deref()
            .unwrap()
            .parse()
            .unwrap();
        peak = peak.max(pending);
        if pending == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drain = drained_from.elapsed();
    println!(
        "burst of {burst} rows (inserted in {inserted:?}): backlog peaked at {peak}, empty after \
         {drain:?} ({:.0} rows/s); the burst's last row waited about {:?}",
        burst as f64 / drain.as_secs_f64(),
        inserted + drain
    );
    app.stop().await;
}
