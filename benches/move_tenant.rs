//! What a tenant's clients see while it moves, and how long its writes are fenced, at two
//! sizes.
//!
//! Two Postgres servers in containers (control and shard0 on one, shard1 on the other), the
//! real server in-process, and per size (`BENCH_ROWS`, default `100000,1000000`) a tenant
//! seeded with that many bookmarks, one writer creating bookmarks for it through HTTP at
//! `BENCH_WRITES_PER_SEC` (default 200) and `BENCH_READERS` readers (default 2) listing its
//! newest page at `BENCH_READS_PER_SEC` each (default 50). The move is
//! the library's own `Mover` (what `move_slot run --confirm` runs); `BENCH_VERIFY=full`
//! compares every row inside the fence (`--full`) instead of only the rows changed during
//! the copy. Prints, per size: the copy rate, the fence window, the writer's latency during
//! the move (p50, p99, max), the errors any client saw, how many writes waited out the
//! fence, and checks every acknowledged write arrived.
//!
//! `cargo xtask bench move` runs it; `BOOKMARKS_POSTGRES_IMAGE` picks the image.

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bookmarks_sharded::content::TENANT_TABLES;
use bookmarks_sharded::moves::plan::TenantSelection;
use bookmarks_sharded::moves::{FenceOptions, Mover, Step};
use hdrhistogram::Histogram;
use serde_json::json;
use support::*;

/// What the writer saw.
struct Written {
    acknowledged: Vec<String>,
    /// Answers other than 201, by status and error code.
    errors: BTreeMap<String, usize>,
    /// Latencies (µs) of the writes sent while the move ran.
    during: Histogram<u64>,
}

/// Creates bookmarks at `per_second` until `stop`, timing those sent while `moving`.
async fn writer(
    app: Arc<TestApp>,
    tenant: String,
    per_second: u64,
    moving: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> Written {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second.max(1) as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seen = Written {
        acknowledged: Vec::new(),
        errors: BTreeMap::new(),
        during: Histogram::new(3).unwrap(),
    };
    let auth = app.tenant(&tenant).await;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        n += 1;
        let during = moving.load(Ordering::Relaxed);
        let sent = Instant::now();
        let res = app
            .post("/api/bookmarks")
            .headers(auth.clone())
            .json(&json!({"url": format!("https://bench.example/live/{n}")}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: serde_json::Value = res.json().await.unwrap_or_default();
        if during {
            seen.during
                .record(sent.elapsed().as_micros() as u64)
                .unwrap();
        }
        if status == 201 {
            seen.acknowledged
                .push(body["id"].as_str().unwrap().to_owned());
        } else {
            let code = body["error"]["code"].as_str().unwrap_or("-");
            *seen.errors.entry(format!("{status} {code}")).or_default() += 1;
        }
    }
    seen
}

/// Lists the tenant's newest page at `per_second` until `stop`: (reads, failed reads).
async fn reader(
    app: Arc<TestApp>,
    tenant: String,
    per_second: u64,
    stop: Arc<AtomicBool>,
) -> (usize, usize) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second.max(1) as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let auth = app.tenant(&tenant).await;
    let (mut reads, mut failed) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let res = app
            .get("/api/bookmarks?limit=20")
            .headers(auth.clone())
            .send()
            .await
            .unwrap();
        reads += 1;
        if res.status() != 200 {
            failed += 1;
        }
    }
    (reads, failed)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn bench() {
    let (a, b, mut layout) = split_servers("bookmarks-bench-net").await;
    layout.extra = "[sharding]\ndirectory_router = true\n".to_owned();
    let app = Arc::new(TestApp::spawn(layout.settings(), "bench").await);
    let port_of = |shard: &str| if shard == "shard0" { a.port } else { b.port };
    let per_second: u64 = env_or("BENCH_WRITES_PER_SEC", 200);
    let reader_count: usize = env_or("BENCH_READERS", 2);
    let reads_per_second: u64 = env_or("BENCH_READS_PER_SEC", 50);
    let full = std::env::var("BENCH_VERIFY").as_deref() == Ok("full");
    let sizes: Vec<usize> = std::env::var("BENCH_ROWS")
        .unwrap_or_else(|_| "100000,1000000".to_owned())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("BENCH_ROWS: comma-separated row counts")
        })
        .collect();

    let mut lines = Vec::new();
    for rows in sizes {
        let tenant = format!("whale-bench-{rows}");
        let from = hash_shard(&app.settings, &tenant);
        let to = other_shard(&from).to_owned();
        // A tenant that has been in use for a while: its rows are indexed for search
        // already (built here in one statement, with the triggers off, rather than by the
        // reindexer's batches, which would still be at it when the move starts).
        sql(
            port_of(&from),
            &from,
            &format!(
                "SET session_replication_role = replica; \
                 INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
                 SELECT '{tenant}', gen_random_uuid(), 'https://bench.example/seed/' || i, \
                 'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
                 ARRAY['bench', 'tag' || (i % 10)] FROM generate_series(1, {rows}) i; \
                 INSERT INTO bookmark_search (tenant_id, bookmark_id, document, tags) \
                 SELECT tenant_id, id, bookmark_document(title, url, notes, tags), tags \
                 FROM bookmarks WHERE tenant_id = '{tenant}'; \
                 INSERT INTO tenant_tags (tenant_id, tag, count) \
                 SELECT tenant_id, tag, count(*) FROM bookmarks, unnest(tags) AS tag \
                 WHERE tenant_id = '{tenant}' GROUP BY tenant_id, tag; \
                 RESET session_replication_role; ANALYZE"
            ),
        )
        .await;
        let waited_before = waited(&app).await;

        let (moving, stop) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let writing = tokio::spawn(writer(
            app.clone(),
            tenant.clone(),
            per_second,
            moving.clone(),
            stop.clone(),
        ));
        let readers: Vec<_> = (0..reader_count)
            .map(|_| {
                tokio::spawn(reader(
                    app.clone(),
                    tenant.clone(),
                    reads_per_second,
                    stop.clone(),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;

        moving.store(true, Ordering::Relaxed);
        let mut mover = Mover::connect(&app.settings, TENANT_TABLES).await.unwrap();
        mover.set_fence(FenceOptions {
            full,
            ..FenceOptions::default()
        });
        let selection = TenantSelection::Tenants(vec![tenant.clone()]);
        let mut m = mover.start(&from, &to, &selection, true).await.unwrap();
        mover.claim(&m).await.unwrap();
        let copy_started = Instant::now();
        mover
            .step(&mut m, Step::Copy, Duration::ZERO)
            .await
            .unwrap();
        let copy_took = copy_started.elapsed();
        mover.drive(&mut m, true, Duration::ZERO).await.unwrap();
        moving.store(false, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        let seen = writing.await.unwrap();
        let (mut reads, mut failed_reads) = (0, 0);
        for r in readers {
            let (n, f) = r.await.unwrap();
            reads += n;
            failed_reads += f;
        }

        let ids = seen
            .acknowledged
            .iter()
            .map(|id| format!("'{id}'"))
            .collect::<Vec<_>>()
            .join(",");
        let arrived = sql(
            port_of(&to),
            &to,
            &format!(
                "SELECT count(*) FROM bookmarks WHERE tenant_id = '{tenant}' AND id IN ({ids})"
            ),
        )
        .await;
        let left = sql(
            port_of(&from),
            &from,
            &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{tenant}'"),
        )
        .await;
        assert_eq!(
            arrived[0][0].as_deref(),
            Some(seen.acknowledged.len().to_string().as_str()),
            "every acknowledged write arrived"
        );
        let ms = |us: u64| us as f64 / 1000.0;
        let errors: usize = seen.errors.values().sum();
        lines.push(format!(
            "move of one tenant of {rows} bookmarks, {from} -> {to}, writes at {per_second}/s, \
             {reader_count} readers at {reads_per_second}/s each, {} verification\n\
             \x20 copy step (capture, bulk copy, catch-up): {} rows in {} ms = {:.0} rows/s\n\
             \x20 fence window recorded by the mover:       {} ms\n\
             \x20 writer latency during the move:           p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} writes)\n\
             \x20 client-visible errors:                    {errors} of {} writes {:?}, {failed_reads} of {reads} reads\n\
             \x20 writes that waited out the fence:         {}\n\
             \x20 acknowledged writes on the destination:   {} of {}; rows left on the source: {}",
            if full { "full (--full)" } else { "changed-rows" },
            m.rows_copied,
            copy_took.as_millis(),
            m.rows_copied as f64 / copy_took.as_secs_f64(),
            m.fence_ms.unwrap_or_default(),
            ms(seen.during.value_at_quantile(0.5)),
            ms(seen.during.value_at_quantile(0.99)),
            ms(seen.during.max()),
            seen.during.len(),
            seen.acknowledged.len() + errors,
            seen.errors,
            waited(&app).await - waited_before,
            arrived[0][0].as_deref().unwrap_or("?"),
            seen.acknowledged.len(),
            left[0][0].as_deref().unwrap_or("?"),
        ));
    }
    println!();
    for line in lines {
        println!("{line}");
    }
    for s in [a, b] {
        keep_until_exit(s.container);
    }
}

/// How many requests of the server have waited out a fence so far.
async fn waited(app: &TestApp) -> u64 {
    app.json("/actuator/metrics").await["move_waits"]["waited"]
        .as_u64()
        .unwrap_or_default()
}
