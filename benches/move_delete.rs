//! What a move's delete costs the source shard's other tenants, and where it goes.
//!
//! Two Postgres servers in containers (control and shard0 on one, shard1, the source, on
//! the other), the real server in-process with its reindexers, and per variant a tenant of
//! `BENCH_ROWS` bookmarks (default 100 000, indexed already) on shard1 beside
//! `BENCH_COTENANTS` small tenants (default 20, 20 bookmarks each). The small tenants get
//! an open-loop load of lists and creates at `BENCH_RATE` requests/s (default 200) while the
//! big tenant moves to shard0 (`Mover`, what `move_slot run --confirm` runs, with no grace),
//! and a sampler notes every 200 ms what the source is busy with (`pg_stat_activity`: the
//! delete, the reindexer, autovacuum), its search backlog and its dead rows.
//!
//! Variants (`BENCH_VARIANTS`, default `before,after`):
//! - `before`: the delete in one transaction (`--delete-batch 0`) and a reindexer that
//!   indexes back to back (duty 1.0), as before they were paced;
//! - `after`: the defaults, batches of 500 rows (`BENCH_DELETE_BATCH`) each followed by a
//!   pause three times as long,
//!   and a reindexer that indexes half of the time at most.
//!
//! Prints per variant the small tenants' p50/p99/max before the move, during its copy,
//! during the delete and in the 30 s after, and a line per 5 s from the delete's start with
//! what the source was doing. `cargo xtask bench move-delete` runs it.

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bookmarks_sharded::content::TENANT_TABLES;
use bookmarks_sharded::moves::plan::TenantSelection;
use bookmarks_sharded::moves::{DeletePacing, Mover, Step};
use bookmarks_sharded::search::reindexer::ReindexOptions;
use hdrhistogram::Histogram;
use serde_json::json;
use support::*;

/// One request of the small tenants: when it was due (since the bench began), its latency
/// (µs) and whether it succeeded.
struct Sample {
    at: Duration,
    micros: u64,
    ok: bool,
}

/// One look at the source.
#[derive(Default, Clone)]
struct Busy {
    at: Duration,
    deleting: u32,
    reindexing: u32,
    vacuuming: u32,
    pending: i64,
    dead_rows: i64,
    /// The reindexer's wait (`type:event`) and how long its statement has run, if active.
    reindexer: String,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

/// Open loop over `tenants`: request `i` due at `i / rate`, 4 lists for each create.
async fn load(
    app: Arc<TestApp>,
    tenants: Vec<String>,
    rate: f64,
    began: Instant,
    until: Arc<Mutex<Option<Instant>>>,
    samples: Arc<Mutex<Vec<Sample>>>,
) {
    let mut auth = Vec::new();
    for t in &tenants {
        auth.push(app.tenant(t).await);
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0u64.. {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if until.lock().unwrap().is_some_and(|u| due >= u) {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        let headers = auth[i as usize % auth.len()].clone();
        let request = if i % 5 == 4 {
            app.post("/api/bookmarks")
                .json(&json!({"url": format!("https://cotenant.example/{i}")}))
        } else {
            app.get("/api/bookmarks?limit=20")
        }
        .headers(headers);
        let samples = samples.clone();
        tasks.push(tokio::spawn(async move {
            let ok = request.send().await.is_ok_and(|r| r.status().is_success());
            samples.lock().unwrap().push(Sample {
                at: due - began,
                micros: due.elapsed().as_micros() as u64,
                ok,
            });
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Notes every 200 ms what the source (`port`, database `db`) is busy with, until `stop`.
async fn sampler(
    port: u16,
    db: String,
    began: Instant,
    stop: Arc<Mutex<bool>>,
    out: Arc<Mutex<Vec<Busy>>>,
) {
    let client = session(port, &db).await;
    while !*stop.lock().unwrap() {
        let at = began.elapsed();
        let rows = client
            .query_one(
                "SELECT \
                 count(*) FILTER (WHERE query LIKE 'DELETE FROM \"bookmarks\" %' AND state = 'active')::int4, \
                 count(*) FILTER (WHERE application_name LIKE 'bookmarks-reindexer%' AND state = 'active' \
                                  AND query LIKE '%search_index_batch%')::int4, \
                 count(*) FILTER (WHERE backend_type = 'autovacuum worker')::int4, \
                 (SELECT count(*) FROM search_pending), \
                 (SELECT coalesce(sum(n_dead_tup), 0)::int8 FROM pg_stat_user_tables), \
                 (SELECT string_agg(coalesce(wait_event_type || ':' || wait_event, 'cpu') || ' for ' \
                         || (extract(epoch FROM now() - query_start) * 1000)::int8 || ' ms', ', ') \
                  FROM pg_stat_activity WHERE application_name LIKE 'bookmarks-reindexer%' \
                  AND state = 'active' AND datname = current_database()) \
                 FROM pg_stat_activity WHERE datname = current_database()",
                &[],
            )
            .await;
        if let Ok(r) = rows {
            out.lock().unwrap().push(Busy {
                at,
                deleting: r.get::<_, i32>(0) as u32,
                reindexing: r.get::<_, i32>(1) as u32,
                vacuuming: r.get::<_, i32>(2) as u32,
                pending: r.get(3),
                dead_rows: r.get(4),
                reindexer: r.get::<_, Option<String>>(5).unwrap_or_default(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// p50, p99 and max (ms) and failures of the samples due in `[from, to)`.
fn figures(samples: &[Sample], from: Duration, to: Duration) -> String {
    let mut h = Histogram::<u64>::new(3).unwrap();
    let mut failed = 0;
    for s in samples.iter().filter(|s| s.at >= from && s.at < to) {
        h.record(s.micros.max(1)).unwrap();
        failed += usize::from(!s.ok);
    }
    if h.is_empty() {
        return "no requests".to_owned();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "{:>6} requests, p50 {:>6.1} ms, p99 {:>7.1} ms, max {:>7.1} ms, {failed} failed",
        h.len(),
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max())
    )
}

async fn bench() {
    let (a, b, mut layout) = split_servers("bookmarks-bench-net").await;
    layout.extra = "[sharding]\ndirectory_router = true\n".to_owned();
    let rows: usize = env_or("BENCH_ROWS", 100_000);
    let rate: f64 = env_or("BENCH_RATE", 200.0);
    let cotenant_count: usize = env_or("BENCH_COTENANTS", 20);
    let after = Duration::from_secs(env_or("BENCH_AFTER", 30));
    let variants = std::env::var("BENCH_VARIANTS").unwrap_or_else(|_| "before,after".to_owned());

    let mut report = Vec::new();
    for (round, variant) in variants.split(',').map(str::trim).enumerate() {
        let (pacing, duty) = match variant {
            "before" => (DeletePacing { batch_rows: 0 }, 1.0),
            "after" => (
                DeletePacing {
                    batch_rows: env_or("BENCH_DELETE_BATCH", DeletePacing::default().batch_rows),
                },
                ReindexOptions::default().duty,
            ),
            other => panic!("BENCH_VARIANTS: {other} is neither before nor after"),
        };
        let mut options = test_options(&format!("bench-{round}-{variant}"));
        options.reindex = ReindexOptions {
            duty,
            ..ReindexOptions::default()
        };
        let app = Arc::new(TestApp::spawn_with(layout.settings(), options).await);
        // Tenants the hash puts on shard1, the source.
        let on_source = |prefix: &str, n: usize| -> Vec<String> {
            (0..)
                .map(|i| format!("{prefix}-{round}-{variant}-{i}"))
                .filter(|t| hash_shard(&app.settings, t) == "shard1")
                .take(n)
                .collect()
        };
        let whale = on_source("whale", 1).remove(0);
        let cotenants = on_source("cotenant", cotenant_count);
        // Tenants that have been in use for a while: their rows are indexed already (built
        // here in one statement with the triggers off, not by the reindexer).
        let owners: Vec<(String, usize)> = std::iter::once((whale.clone(), rows))
            .chain(cotenants.iter().map(|t| (t.clone(), 20)))
            .collect();
        for (tenant, n) in &owners {
            sql(
                b.port,
                "shard1",
                &format!(
                    "SET session_replication_role = replica; \
                     INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
                     SELECT '{tenant}', gen_random_uuid(), 'https://bench.example/seed/' || i, \
                     'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
                     ARRAY['bench', 'tag' || (i % 10)] FROM generate_series(1, {n}) i; \
                     INSERT INTO bookmark_search (tenant_id, bookmark_id, document, tags) \
                     SELECT tenant_id, id, bookmark_document(title, url, notes, tags), tags \
                     FROM bookmarks WHERE tenant_id = '{tenant}'; \
                     INSERT INTO tenant_tags (tenant_id, tag, count) \
                     SELECT tenant_id, tag, count(*) FROM bookmarks, unnest(tags) AS tag \
                     WHERE tenant_id = '{tenant}' GROUP BY tenant_id, tag; \
                     RESET session_replication_role"
                ),
            )
            .await;
        }
        sql(b.port, "shard1", "VACUUM ANALYZE").await;

        let began = Instant::now();
        let until = Arc::new(Mutex::new(None));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let busy = Arc::new(Mutex::new(Vec::new()));
        let stop_sampling = Arc::new(Mutex::new(false));
        let sampling = tokio::spawn(sampler(
            b.port,
            "shard1".to_owned(),
            began,
            stop_sampling.clone(),
            busy.clone(),
        ));
        let loading = tokio::spawn(load(
            app.clone(),
            cotenants.clone(),
            rate,
            began,
            until.clone(),
            samples.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(15)).await;

        let move_started = began.elapsed();
        let mut mover = Mover::connect(&app.settings, TENANT_TABLES).await.unwrap();
        mover.set_delete_pacing(pacing);
        let selection = TenantSelection::Tenants(vec![whale.clone()]);
        let mut m = mover
            .start("shard1", "shard0", &selection, true)
            .await
            .unwrap();
        mover.claim(&m).await.unwrap();
        for step in [Step::Copy, Step::Verify, Step::Repin] {
            mover.step(&mut m, step, Duration::ZERO).await.unwrap();
        }
        let delete_started = began.elapsed();
        mover
            .step(&mut m, Step::Delete, Duration::ZERO)
            .await
            .unwrap();
        let delete_ended = began.elapsed();
        *until.lock().unwrap() = Some(Instant::now() + after);
        loading.await.unwrap();
        *stop_sampling.lock().unwrap() = true;
        sampling.await.unwrap();
        let end = began.elapsed();

        let samples = std::mem::take(&mut *samples.lock().unwrap());
        let busy = std::mem::take(&mut *busy.lock().unwrap());
        let mut out = format!(
            "{variant}: delete batches of {} rows ({}), reindexer duty {duty}: {} rows deleted in {:.1} s\n",
            pacing.batch_rows,
            if pacing.batch_rows == 0 {
                "one transaction"
            } else {
                "each followed by a pause three times as long"
            },
            m.rows_deleted,
            (delete_ended - delete_started).as_secs_f64(),
        );
        for (name, from, to) in [
            ("before the move", Duration::ZERO, move_started),
            ("copy, verify, re-pin", move_started, delete_started),
            ("the delete", delete_started, delete_ended),
            ("30 s after it", delete_ended, end),
        ] {
            out += &format!(
                "  small tenants, {name:<21} {}\n",
                figures(&samples, from, to)
            );
        }
        out += "  from the delete's start, per 5 s: the small tenants' p99, then what the source was \
                doing (share of 200 ms looks: deleting / reindexing / autovacuum; search backlog; dead rows)\n";
        let mut from = delete_started;
        while from < end {
            let to = from + Duration::from_secs(5);
            let looks: Vec<&Busy> = busy.iter().filter(|b| b.at >= from && b.at < to).collect();
            let share = |f: fn(&Busy) -> u32| {
                let n = looks.iter().filter(|b| f(b) > 0).count();
                n as f64 / looks.len().max(1) as f64 * 100.0
            };
            let last = looks.last().map(|b| (*b).clone()).unwrap_or_default();
            out += &format!(
                "    +{:>3} s  {}  | delete {:>3.0} %, reindex {:>3.0} %, vacuum {:>3.0} %, backlog {:>6}, dead rows {:>7} {}\n",
                (from - delete_started).as_secs(),
                figures(&samples, from, to),
                share(|b| b.deleting),
                share(|b| b.reindexing),
                share(|b| b.vacuuming),
                last.pending,
                last.dead_rows,
                last.reindexer,
            );
            from = to;
        }
        report.push(out);
        Arc::try_unwrap(app).ok().unwrap().stop().await;
    }
    println!();
    for r in report {
        println!("{r}");
    }
    for s in [a, b] {
        keep_until_exit(s.container);
    }
}
