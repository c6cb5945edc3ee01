//! Export of a whale: `GET /api/export` of one tenant of `BENCH_ROWS` bookmarks (default
//! 1 000 000, in 200 collections five deep) from a `bookmarks serve` process of its own,
//! in both formats. Prints per format the time to the first byte, the rows per second and
//! how much the server's resident memory grew while it streamed (sampled from
//! `/proc/<pid>/status` every 10 ms, against the server's RSS after a small warm-up
//! export). Issue 39's targets: first byte ≤ 200 ms, growth ≤ 16 MiB.
//!
//! Not part of CI: run it by hand on an otherwise idle machine,
//! `BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15 cargo bench --bench export`
//! (without the variable it pulls `postgres:15`).

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// The server's resident memory now, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One export, read to the end: (first byte, whole, bookmarks seen, peak RSS KiB).
async fn export(
    client: &reqwest::Client,
    base: &str,
    tenant: &str,
    format: &str,
    pid: u32,
) -> (Duration, Duration, usize, u64) {
    let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let marker: &[u8] = if format == "json" {
        b"\"url\":\""
    } else {
        b"<DT><A "
    };
    let started = Instant::now();
    let mut res = client
        .get(format!("{base}/api/export?format={format}"))
        .header("X-Tenant-Id", tenant)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut first = None;
    let (mut rows, mut carry) = (0, Vec::new());
    while let Some(chunk) = res.chunk().await.unwrap() {
        first.get_or_insert_with(|| started.elapsed());
        carry.extend_from_slice(&chunk);
        rows += carry.windows(marker.len()).filter(|w| *w == marker).count();
        // Keep a marker's length minus one, which cannot hold a whole marker.
        let keep = carry.len().min(marker.len() - 1);
        carry.drain(..carry.len() - keep);
    }
    let whole = started.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
    (first.unwrap(), whole, rows, peak.load(Ordering::Relaxed))
}

async fn bench() {
    let rows: usize = env_or("BENCH_ROWS", 1_000_000);
    let mut layout = layout("").await;
    layout.extra = "[tenancy]\nauth = \"trusted_header\"\n".to_owned();
    // Migrates the databases; the measured server is a process of its own.
    let app = TestApp::spawn(layout.settings(), "export-bench").await;
    app.stop().await;
    let tenant = format!("whale-{rows}");
    let shard = hash_shard(&layout.settings(), &tenant);
    let (port, db) = port_of(&layout, &shard);
    let seeding = Instant::now();
    // Written with the triggers off (no feed entries, no search markers): an export reads
    // only the rows.
    sql(
        port,
        &db,
        &format!(
            "SET session_replication_role = replica; \
             INSERT INTO collections (tenant_id, id, name, parent_id) \
             SELECT '{tenant}', md5('{tenant}:c' || i)::uuid, 'c' || i, \
             CASE WHEN i = 0 THEN NULL WHEN i < 5 THEN md5('{tenant}:c' || (i - 1))::uuid \
             ELSE md5('{tenant}:c' || ((i - 5) % 4))::uuid END FROM generate_series(0, 199) i; \
             INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, collection_id) \
             SELECT '{tenant}', gen_random_uuid(), 'https://export.example/' || i, \
             'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
             ARRAY['bench', 'tag' || (i % 10)], \
             CASE WHEN i % 10 = 0 THEN NULL ELSE md5('{tenant}:c' || (i % 200))::uuid END \
             FROM generate_series(1, {rows}) i; \
             RESET session_replication_role"
        ),
    )
    .await;
    sql(port, &db, "ANALYZE bookmarks").await;
    println!(
        "seeded {rows} bookmarks on {shard} in {} s",
        seeding.elapsed().as_secs()
    );

    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), layout.toml()).unwrap();
    let listen = free_port();
    let base = format!("http://127.0.0.1:{listen}");
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_bookmarks"))
            .arg("--config")
            .arg(config.path())
            .args(["serve", "--bind", &format!("127.0.0.1:{listen}")])
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let pid = server.0.id();
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
    // Warm-up: a small tenant's export, so that the baseline holds the pools and buffers
    // every request uses.
    let small = "export-warm-up";
    client
        .post(format!("{base}/api/bookmarks"))
        .header("X-Tenant-Id", small)
        .json(&serde_json::json!({"url": "https://export.example/warm"}))
        .send()
        .await
        .unwrap();
    for format in ["json", "netscape"] {
        export(&client, &base, small, format, pid).await;
    }
    for format in ["json", "netscape"] {
        let before = rss_kib(pid);
        let (first, whole, seen, peak) = export(&client, &base, &tenant, format, pid).await;
        assert_eq!(seen, rows, "every bookmark in the {format} export");
        println!(
            "{format:>8}: first byte {} ms, {rows} bookmarks in {:.1} s = {:.0} rows/s, \
             server RSS {} -> peak {} MiB (+{:.1} MiB)",
            first.as_millis(),
            whole.as_secs_f64(),
            rows as f64 / whole.as_secs_f64(),
            before / 1024,
            peak / 1024,
            (peak.saturating_sub(before)) as f64 / 1024.0
        );
    }
    drop(server);
}
