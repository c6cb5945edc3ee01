//! How fast a slot range moves, how long its writes are refused, and how soon every web
//! replica routes it to its new owner, while it is being written.
//!
//! Two Postgres servers in containers (control and shard0 on one, shard1 on the other), two
//! real servers in-process (web1, web2), and the range `0-4095` of shard0 holding 1 000
//! tenants and 100 000 bookmarks (one whale with half of them). Writers create bookmarks on
//! five tenants of the range (the whale included) through both servers in turn, another
//! creates brand-new tenants in the range, and a co-tenant outside it writes on the same
//! source. The move is the library's own `Mover` (what `move_slot run --slots 0-4095
//! --confirm` runs). Prints the copy rate, the fence window the mover recorded, the longest
//! refused-write window any writer saw, and the time from the flip until both servers
//! route a new tenant of the range to shard1; checks that every acknowledged write is on the
//! destination and that nothing of the range is left on the source.
//!
//! `cargo xtask bench move-range` runs it; `BOOKMARKS_POSTGRES_IMAGE` picks the image.

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

use bookmarks_sharded::content::TENANT_TABLES;
use bookmarks_sharded::moves::plan::TenantSelection;
use bookmarks_sharded::moves::{Mover, Step};
use bookmarks_sharded::sharding::{ShardKey, SlotRange};
use serde_json::json;
use support::*;

const FIRST: u16 = 0;
const LAST: u16 = 4095;
const TENANTS: usize = 1000;
const WHALE_ROWS: usize = 50_000;
const OTHER_ROWS: usize = 50; // × 999 ≈ the other half
/// Each writer's pace, `BENCH_WRITES_PER_SEC` (default 40).
fn writes_per_sec() -> u64 {
    std::env::var("BENCH_WRITES_PER_SEC")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(40)
}

fn in_range(t: &str) -> bool {
    (FIRST..=LAST).contains(&ShardKey::Str(t).slot().index())
}

fn names(prefix: &str, n: usize, inside: bool) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|t| in_range(t) == inside)
        .take(n)
        .collect()
}

/// What one writer saw: acknowledged (tenant, id) pairs, refusals, and the longest stretch
/// between two successful writes that had a refusal in it.
#[derive(Default)]
struct Seen {
    acknowledged: Vec<(String, String)>,
    refused: usize,
    longest_refusal_gap: Duration,
    unexpected: Vec<String>,
}

/// Creates bookmarks for `tenants` in turn (a new tenant each time when `fresh`) through the
/// apps in turn, at `WRITES_PER_SEC`, until `stop`.
async fn writer(
    apps: Arc<Vec<TestApp>>,
    mut tenants: Vec<String>,
    fresh: bool,
    stop: Arc<AtomicBool>,
) -> Seen {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / writes_per_sec() as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seen = Seen::default();
    let (mut last_ok, mut refused_since_ok, mut n) = (Instant::now(), false, 0usize);
    while !stop.load(Ordering::Relaxed) && !tenants.is_empty() {
        tick.tick().await;
        n += 1;
        let app = &apps[n % apps.len()];
        let tenant = if fresh {
            tenants.last().unwrap().clone()
        } else {
            tenants[n % tenants.len()].clone()
        };
        let res = app
            .post("/api/bookmarks")
            .headers(app.tenant(&tenant).await)
            .json(&json!({"url": format!("https://bench.example/range/{n}")}))
            .send()
            .await
            .unwrap();
        match res.status().as_u16() {
            201 => {
                let body: serde_json::Value = res.json().await.unwrap();
                seen.acknowledged
                    .push((tenant, body["id"].as_str().unwrap().to_owned()));
                if fresh {
                    tenants.pop();
                }
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
            other => seen
                .unexpected
                .push(format!("{other}: {}", res.text().await.unwrap())),
        }
    }
    seen
}

/// Polls `app` every 5 ms as a brand-new tenant of the range until it is served by
/// shard1; returns when that was first seen.
async fn watch_flip(app: Arc<Vec<TestApp>>, i: usize, probe: String) -> Instant {
    let headers = app[i].tenant(&probe).await;
    loop {
        let res = app[i]
            .get("/api/bookmarks")
            .headers(headers.clone())
            .send()
            .await
            .unwrap();
        if res.status() == 200 && res.headers()["x-shard"] == "shard1" {
            return Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let (a, b, mut layout) = split_servers("bookmarks-bench-net").await;
    layout.extra = "[sharding]\ndirectory_router = true\n".to_owned();
    layout.connect_timeout_ms = 5000;
    let apps = Arc::new(vec![
        TestApp::spawn(layout.settings(), "web1").await,
        TestApp::spawn(layout.settings(), "web2").await,
    ]);
    let tenants = names(&unique("ranged"), TENANTS, true);
    let (whale, others) = (tenants[0].clone(), tenants[1..].to_vec());
    sql(
        a.port,
        "shard0",
        &format!(
            "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
             SELECT '{whale}', gen_random_uuid(), 'https://bench.example/seed/' || i, \
             'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
             ARRAY['bench', 'tag' || (i % 10)] FROM generate_series(1, {WHALE_ROWS}) i"
        ),
    )
    .await;
    session(a.port, "shard0")
        .await
        .execute(
            &format!(
                "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
                 SELECT t, gen_random_uuid(), 'https://bench.example/seed/' || i, \
                 'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
                 ARRAY['bench', 'tag' || (i % 10)] \
                 FROM unnest($1::text[]) t, generate_series(1, {OTHER_ROWS}) i"
            ),
            &[&others],
        )
        .await
        .unwrap();
    sql(a.port, "shard0", "ANALYZE bookmarks").await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for chunk in [vec![whale.clone()], tenants[1..5].to_vec()] {
        for t in chunk {
            writers.push(tokio::spawn(writer(
                apps.clone(),
                vec![t],
                false,
                stop.clone(),
            )));
        }
    }
    let newcomers = names(&unique("newcomer"), 10_000, true);
    writers.push(tokio::spawn(writer(
        apps.clone(),
        newcomers,
        true,
        stop.clone(),
    )));
    let co_tenant = names(&unique("co"), 1, false).pop().unwrap();
    let co_writer = tokio::spawn(writer(apps.clone(), vec![co_tenant], false, stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut mover = Mover::connect(&apps[0].settings, TENANT_TABLES)
        .await
        .unwrap();
    let selection = TenantSelection::Ranges(vec![SlotRange::new(FIRST, LAST).unwrap()]);
    let mut m = mover
        .start("shard0", "shard1", &selection, true)
        .await
        .unwrap();
    mover.claim(&m).await.unwrap();
    let copy_started = Instant::now();
    mover
        .step(&mut m, Step::Copy, Duration::ZERO)
        .await
        .unwrap();
    let copy_took = copy_started.elapsed();
    let rows_copied = m.rows_copied;
    let probe = names(&unique("probe"), 1, true).pop().unwrap();
    let watchers: Vec<_> = (0..apps.len())
        .map(|i| tokio::spawn(watch_flip(apps.clone(), i, probe.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    mover
        .step(&mut m, Step::Verify, Duration::ZERO)
        .await
        .unwrap();
    let flipped = Instant::now(); // the repin step starts; the slot map flips inside it
    mover
        .step(&mut m, Step::Repin, Duration::ZERO)
        .await
        .unwrap();
    let repin_took = flipped.elapsed();
    let mut seen_at = Vec::new();
    for w in watchers {
        seen_at.push(w.await.unwrap());
    }
    let last_seen = seen_at.into_iter().max().unwrap();
    let flip_seen = last_seen.saturating_duration_since(flipped);
    let grace = Duration::from_secs(1);
    mover.drive(&mut m, true, grace).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);

    let mut acknowledged = Vec::new();
    let (mut refused, mut longest) = (0, Duration::ZERO);
    for w in writers {
        let s = w.await.unwrap();
        assert!(
            s.unexpected.is_empty(),
            "unexpected answers: {:?}",
            s.unexpected
        );
        refused += s.refused;
        longest = longest.max(s.longest_refusal_gap);
        acknowledged.extend(s.acknowledged);
    }
    let co = co_writer.await.unwrap();
    let ids: Vec<String> = acknowledged.iter().map(|(_, id)| id.clone()).collect();
    let arrived: i64 = session(b.port, "shard1")
        .await
        .query_one(
            "SELECT count(*) FROM bookmarks WHERE id::text = ANY($1)",
            &[&ids],
        )
        .await
        .unwrap()
        .get(0);
    let left = sql(
        a.port,
        "shard0",
        &format!(
            "SELECT count(*) FROM bookmarks WHERE _autumn_slot(tenant_id) BETWEEN {FIRST} AND {LAST}"
        ),
    )
    .await;

    println!();
    println!(
        "range move of slots {FIRST}-{LAST}: {TENANTS} tenants, {} seeded bookmarks (a whale \
         with {WHALE_ROWS}), shard0 -> shard1; 5 writers and a newcomer writer at \
         {}/s each through two servers, a co-tenant outside the range",
        WHALE_ROWS + OTHER_ROWS * (TENANTS - 1),
        writes_per_sec()
    );
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
        "  longest refused-write window (writers):   {} ms ({refused} writes refused with 503)",
        longest.as_millis()
    );
    println!(
        "  repin step start until both servers route the range: {} ms (the step took {} ms)",
        flip_seen.as_millis(),
        repin_took.as_millis()
    );
    println!(
        "  writes acknowledged in the range:         {} (on the destination: {arrived})",
        acknowledged.len()
    );
    println!(
        "  co-tenant: {} acknowledged, {} refused, {} unexpected",
        co.acknowledged.len(),
        co.refused,
        co.unexpected.len()
    );
    println!(
        "  rows of the range left on the source:     {}",
        left[0][0].as_deref().unwrap_or("?")
    );
    assert_eq!(
        arrived,
        acknowledged.len() as i64,
        "every acknowledged write arrived"
    );
    assert_eq!(
        left[0][0].as_deref(),
        Some("0"),
        "nothing of the range left behind"
    );
    for s in [a, b] {
        keep_until_exit(s.container);
    }
}
