//! The request-path benchmark's tables: saturation per endpoint and server with the ratios,
//! pgbench's ceiling, peak RSS, and the open loop's latencies against their targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::load::{Closed, Endpoint, Open};

/// pgbench's figures (zero when it was skipped).
#[derive(Default)]
pub struct Ceiling {
    pub rps: f64,
    pub p99_ms: Option<f64>,
    pub small_rps: f64,
}

/// Memory of the servers after the load, MiB.
pub struct Memory {
    pub app_hwm: f64,
    pub app_rss: f64,
    pub bare_hwm: f64,
}

/// What the report says the run was.
pub struct Header {
    pub threads: u32,
    pub conns: u32,
    pub duration: Duration,
    pub open_duration: Duration,
    pub pool_size: u32,
    pub rows: u64,
    pub small_rows: u64,
}

/// `100 * a / b` as `12.3%`, `-` without a `b`.
fn pct(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.1}%", 100.0 * a / b)
    } else {
        "-".to_owned()
    }
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}ms"))
}

fn cpu(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

/// The whole report, as printed on stdout.
pub fn render(
    header: &Header,
    endpoints: &[Endpoint],
    closed: &BTreeMap<(&'static str, Endpoint), Closed>,
    ceiling: &Ceiling,
    memory: &Memory,
    open: &[Open],
) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let duration = humantime::format_duration(header.duration);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "request path: wrk -t{} -c{} -d{duration} on loopback, {cores} cores, pool {}, {} bookmarks",
        header.threads, header.conns, header.pool_size, header.rows
    );
    let _ = writeln!(
        out,
        "(bare: the bare handler; no key: the app with auth = \"trusted_header\"; app: the app checking the request's API key)"
    );
    let _ = writeln!(
        out,
        "{:<8} {:>11} {:>9} {:>8} {:>11} {:>9} {:>8} {:>11} {:>9} {:>8} {:>9} {:>9} {:>9}",
        "endpoint",
        "bare req/s",
        "bare p99",
        "bare cpu",
        "nokey req/s",
        "nokey p99",
        "nokey cpu",
        "app req/s",
        "app p99",
        "app cpu",
        "app/bare",
        "app/nokey",
        "key cpu"
    );
    let rps = |server: &'static str, endpoint: Endpoint| {
        closed.get(&(server, endpoint)).map_or(0.0, |c| c.rps)
    };
    for &endpoint in endpoints {
        let [Some(bare), Some(trusted), Some(app)] =
            ["bare", "trusted", "app"].map(|server| closed.get(&(server, endpoint)))
        else {
            continue;
        };
        let key_cpu = match (app.cpu_us, trusted.cpu_us) {
            (Some(a), Some(t)) => format!("{:+}", a.round() as i64 - t.round() as i64),
            _ => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<8} {:>11.2} {:>9} {:>6}us {:>11.2} {:>9} {:>6}us {:>11.2} {:>9} {:>6}us {:>9} {:>9} {:>7}us",
            endpoint.name(),
            bare.rps,
            ms(bare.p99_ms),
            cpu(bare.cpu_us),
            trusted.rps,
            ms(trusted.p99_ms),
            cpu(trusted.cpu_us),
            app.rps,
            ms(app.p99_ms),
            cpu(app.cpu_us),
            pct(app.rps, bare.rps),
            pct(app.rps, trusted.rps),
            key_cpu
        );
    }
    let _ = writeln!(
        out,
        "(cpu: the server process's CPU time per request, user + system)"
    );
    let _ = writeln!(
        out,
        "{:<8} {:>12.2} {:>10}   (pgbench -M prepared, the list SQL)",
        "pgbench",
        ceiling.rps,
        ms(ceiling.p99_ms)
    );
    if closed.contains_key(&("app", Endpoint::List)) {
        let _ = writeln!(
            out,
            "app list / pgbench: {}; bare list / pgbench: {}",
            pct(rps("app", Endpoint::List), ceiling.rps),
            pct(rps("bare", Endpoint::List), ceiling.rps)
        );
    }
    if closed.contains_key(&("app", Endpoint::ListSmall)) {
        let _ = writeln!(
            out,
            "small tenant ({} bookmarks) list: app {} of bare, app {} of pgbench ({:.2}/s)",
            header.small_rows,
            pct(
                rps("app", Endpoint::ListSmall),
                rps("bare", Endpoint::ListSmall)
            ),
            pct(rps("app", Endpoint::ListSmall), ceiling.small_rps),
            ceiling.small_rps
        );
    }
    let _ = writeln!(
        out,
        "app peak RSS (VmHWM): {:.1} MiB (RSS now {:.1} MiB); bare peak RSS: {:.1} MiB",
        memory.app_hwm, memory.app_rss, memory.bare_hwm
    );
    if !open.is_empty() {
        render_open(&mut out, header, open);
    }
    out
}

fn render_open(out: &mut String, header: &Header, open: &[Open]) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "open loop (loadgen, {} each, latency from each request's intended send time; reindexer and job worker running):",
        humantime::format_duration(header.open_duration)
    );
    let _ = writeln!(
        out,
        "{:<7} {:>5} {:>7}  {:>8} {:>8} {:>8}  {:>8} {:>8} {:>8}  {:>9}  targets",
        "endpoint",
        "share",
        "req/s",
        "app p50",
        "app p99",
        "p99.9",
        "bare p50",
        "bare p99",
        "p99.9",
        "app/bare"
    );
    for row in open {
        let (a, b) = (row.app, row.bare);
        let ratio = a.p99 / b.p99;
        let shown_ratio = if ratio.is_finite() {
            format!("{ratio:.2}")
        } else {
            "-".to_owned()
        };
        let met = |ok: bool| if ok { "met" } else { "MISSED" };
        // Compared as printed, so that the verdict agrees with the figure shown.
        let mut verdict = format!(
            "app/bare {}",
            met(shown_ratio.parse::<f64>().is_ok_and(|r| r <= 1.5))
        );
        // The targets at half of saturation: p99 ≤ 5 ms for list and get, ≤ 10 ms for create.
        let limit = match row.endpoint {
            "create" => Some(10.0),
            "mix" => None,
            _ => Some(5.0),
        };
        if row.share == 0.5
            && let Some(limit) = limit
        {
            verdict = format!("p99 ≤ {limit} ms {}, {verdict}", met(a.p99 <= limit));
        }
        if a.failed + b.failed > 0 {
            let _ = write!(verdict, "; failed: app {}, bare {}", a.failed, b.failed);
        }
        let _ = writeln!(
            out,
            "{:<7} {:>5} {:>7}  {:>8.2} {:>8.2} {:>8.2}  {:>8.2} {:>8.2} {:>8.2}  {:>9}  {verdict}",
            row.endpoint,
            row.share,
            row.rate,
            a.p50,
            a.p99,
            a.p999,
            b.p50,
            b.p99,
            b.p999,
            shown_ratio
        );
    }
}
