//! Import of a whale beside its neighbours: one tenant imports a Netscape file of
//! `BENCH_ROWS` bookmarks (default 200 000) through `POST /api/imports` on a `bookmarks
//! serve` process of its own, while `BENCH_NEIGHBOURS` other tenants of the same shard
//! (default 20) send an open-loop load of `BENCH_RATE` requests per second (default 100:
//! lists, and one create in four). Prints the import's rows per second and the neighbours'
//! p50 and p99 before, during and after the import, for each `[imports] rest` in
//! `BENCH_RESTS` (default `1`, the shipped pacing; e.g. `1,0,4`), each beside its floor: the
//! same rows written straight to the shard by SQL in transactions of 1 000 at the same pace.
//! Issue 39's target: the neighbours' p99 during the import within 1.5× of before.
//!
//! Not part of CI: run it by hand on an otherwise idle machine,
//! `BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15 cargo bench --bench import`.

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use support::*;

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

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The whale's file: `n` bookmarks in 20 folders, with tags and a description each.
fn file(n: usize) -> Vec<u8> {
    let mut out = String::with_capacity(n * 160);
    out.push_str("<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n");
    for folder in 0..20 {
        out.push_str(&format!("<DT><H3>Folder {folder}</H3>\n<DL><p>\n"));
        for i in (folder..n).step_by(20) {
            out.push_str(&format!(
                "<DT><A HREF=\"https://import.example/{i}\" ADD_DATE=\"{}\" TAGS=\"bench,t{}\">\
                 An imported bookmark {i}</A>\n<DD>Notes of bookmark {i}\n",
                1_600_000_000 + i,
                i % 10
            ));
        }
        out.push_str("</DL><p>\n");
    }
    out.push_str("</DL><p>\n");
    out.into_bytes()
}

/// Which phase a neighbour's request was sent in.
#[derive(Clone, Copy)]
enum Phase {
    Before,
    During,
    After,
}

struct Latencies {
    phase: Mutex<Phase>,
    /// By phase; lists, then creates.
    by_phase: Mutex<[[Histogram<u64>; 2]; 3]>,
    errors: Mutex<Vec<String>>,
}

impl Latencies {
    fn new() -> Self {
        let h = || Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
        Self {
            phase: Mutex::new(Phase::Before),
            by_phase: Mutex::new([[h(), h()], [h(), h()], [h(), h()]]),
            errors: Mutex::new(Vec::new()),
        }
    }

    fn set(&self, phase: Phase) {
        *self.phase.lock().unwrap() = phase;
    }

    fn record(&self, phase: Phase, create: bool, took: Duration) {
        self.by_phase.lock().unwrap()[phase as usize][usize::from(create)]
            .record(took.as_micros() as u64)
            .unwrap();
    }
}

/// Open loop: `rate` requests a second to the neighbours until `stop`, each timed from
/// when it was due.
async fn neighbours(
    run: String,
    base: String,
    tenants: Vec<String>,
    rate: f64,
    stop: Arc<AtomicBool>,
    seen: Arc<Latencies>,
) {
    let client = reqwest::Client::new();
    let every = Duration::from_secs_f64(1.0 / rate);
    let start = tokio::time::Instant::now();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let due = start + every * n as u32;
        tokio::time::sleep_until(due).await;
        let phase = *seen.phase.lock().unwrap();
        let tenant = tenants[n as usize % tenants.len()].clone();
        let (client, base, seen, run) = (client.clone(), base.clone(), seen.clone(), run.clone());
        let create = n.is_multiple_of(4);
        tokio::spawn(async move {
            let request = if create {
                client
                    .post(format!("{base}/api/bookmarks"))
                    .json(&json!({"url": format!("https://neighbour.example/{run}/{n}")}))
            } else {
                client.get(format!("{base}/api/bookmarks?limit=20"))
            };
            match request.header("X-Tenant-Id", &tenant).send().await {
                Ok(r) if r.status().is_success() => seen.record(phase, create, due.elapsed()),
                Ok(r) => seen.errors.lock().unwrap().push(format!("{}", r.status())),
                Err(e) => seen.errors.lock().unwrap().push(e.to_string()),
            }
        });
        n += 1;
    }
}

async fn run(
    layout: &Layout,
    floor: bool,
    rest: f64,
    rows: usize,
    neighbour_count: usize,
    rate: f64,
) {
    let whale = format!("import-whale-{}", unique("w"));
    let shard = hash_shard(&layout.settings(), &whale);
    let tenants: Vec<String> = (0..)
        .map(|i| format!("neighbour-{i}"))
        .filter(|t| hash_shard(&layout.settings(), t) == shard)
        .take(neighbour_count)
        .collect();
    let (port, db) = port_of(layout, &shard);
    for t in &tenants {
        sql(
            port,
            &db,
            &format!(
                "INSERT INTO bookmarks (tenant_id, id, url, title) \
                 SELECT '{t}', gen_random_uuid(), 'https://seed.example/' || i, 'Seeded ' || i \
                 FROM generate_series(1, 200) i ON CONFLICT DO NOTHING"
            ),
        )
        .await;
    }
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!("{}\n[imports]\nrest = {rest}\n", layout.toml()),
    )
    .unwrap();
    let listen = free_port();
    let base = format!("http://127.0.0.1:{listen}");
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_bookmarks"))
            .arg("--config")
            .arg(config.path())
            .args(["serve", "--bind", &format!("127.0.0.1:{listen}")])
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let client = reqwest::Client::new();
    let up = eventually(Duration::from_secs(60), || async {
        client
            .get(format!("{base}/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    assert!(up, "the server came up");

    let body = file(rows);
    let seen = Arc::new(Latencies::new());
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(neighbours(
        whale.clone(),
        base.clone(),
        tenants,
        rate,
        stop.clone(),
        seen.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(15)).await;

    seen.set(Phase::During);
    let posted = Instant::now();
    let (accepted, rows_per_second) = if floor {
        // The floor: the same rows written straight to the shard by SQL, 1 000 a
        // transaction with every trigger on, resting as the import rests. What any importer
        // that writes such transactions at this pace costs the shard's other tenants.
        for chunk in 0..rows.div_ceil(1000) {
            let started = Instant::now();
            let first = chunk * 1000;
            let last = (first + 1000).min(rows) - 1;
            sql(
                port,
                &db,
                &format!(
                    "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags) \
                     SELECT '{whale}', gen_random_uuid(), 'https://import.example/' || i, \
                     'An imported bookmark ' || i, 'Notes of bookmark ' || i, \
                     ARRAY['bench', 't' || (i % 10)] FROM generate_series({first}, {last}) i"
                ),
            )
            .await;
            let took = started.elapsed();
            tokio::time::sleep(took.mul_f64(rest)).await;
        }
        let whole = posted.elapsed();
        (Duration::ZERO, rows as f64 / whole.as_secs_f64())
    } else {
        let res = client
            .post(format!("{base}/api/imports"))
            .header("X-Tenant-Id", &whale)
            .header("content-type", "text/html")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 202);
        let import: Value = res.json().await.unwrap();
        let accepted = posted.elapsed();
        let path = format!("{base}/api/imports/{}", import["id"].as_str().unwrap());
        let done = loop {
            let now: Value = client
                .get(&path)
                .header("X-Tenant-Id", &whale)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if matches!(now["state"].as_str(), Some("done" | "failed")) {
                break now;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert_eq!(done["state"], "done", "{done}");
        assert_eq!(done["counts"]["created"], rows, "{done}");
        (
            accepted,
            done["rows_per_second"].as_f64().unwrap_or_default(),
        )
    };
    seen.set(Phase::After);
    tokio::time::sleep(Duration::from_secs(15)).await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let by_phase = seen.by_phase.lock().unwrap();
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let mut all: Vec<Histogram<u64>> = Vec::new();
    for phase in by_phase.iter() {
        let mut h = phase[0].clone();
        h.add(&phase[1]).unwrap();
        all.push(h);
    }
    println!(
        "{} rest {rest}: {rows} bookmarks accepted in {:.1} s, applied at {:.0} rows/s, {} neighbour errors",
        if floor { "SQL floor," } else { "import," },
        accepted.as_secs_f64(),
        rows_per_second,
        seen.errors.lock().unwrap().len(),
    );
    for (what, pick) in [("all", None), ("lists", Some(0)), ("creates", Some(1))] {
        let h = |phase: usize| match pick {
            None => &all[phase],
            Some(i) => &by_phase[phase][i],
        };
        println!(
            "  {what:>8}: p50 {:.1} / {:.1} / {:.1} ms, p99 {:.1} / {:.1} / {:.1} ms \
             (before / during / after, {} / {} / {} requests); p99 during/before {:.2}x",
            ms(h(0), 0.5),
            ms(h(1), 0.5),
            ms(h(2), 0.5),
            ms(h(0), 0.99),
            ms(h(1), 0.99),
            ms(h(2), 0.99),
            h(0).len(),
            h(1).len(),
            h(2).len(),
            ms(h(1), 0.99) / ms(h(0), 0.99),
        );
    }
}

async fn bench() {
    let rows: usize = env_or("BENCH_ROWS", 200_000);
    let neighbour_count: usize = env_or("BENCH_NEIGHBOURS", 20);
    let rate: f64 = env_or("BENCH_RATE", 100.0);
    let rests: Vec<f64> = std::env::var("BENCH_RESTS")
        .unwrap_or_else(|_| "1".to_owned())
        .split(',')
        .map(|r| r.trim().parse().unwrap())
        .collect();
    let mut layout = layout("").await;
    layout.extra = "[tenancy]\nauth = \"trusted_header\"\n".to_owned();
    // Migrates the databases; the measured server is a process of its own.
    let app = TestApp::spawn(layout.settings(), "import-bench").await;
    app.stop().await;
    for rest in rests {
        run(&layout, false, rest, rows, neighbour_count, rate).await;
        run(&layout, true, rest, rows, neighbour_count, rate).await;
    }
}
