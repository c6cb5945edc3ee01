//! The loads: wrk at saturation on each server and endpoint (requests/s, p99, the server's
//! CPU time per request), and loadgen's open loop at shares of the app's saturation.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tokio::process::Command;

use super::setup::{SMALL_TENANT, Served, Setup, TENANT};
use crate::process::{self, output};
use crate::wrk;

/// What wrk measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Endpoint {
    /// `GET /api/bookmarks`, the newest 20 of the big tenant.
    List,
    /// `GET /api/bookmarks/{id}`.
    Get,
    /// `POST /api/bookmarks`, a new URL every time.
    Create,
    /// The small tenant's list.
    ListSmall,
}

impl Endpoint {
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::List => "list",
            Endpoint::Get => "get",
            Endpoint::Create => "create",
            Endpoint::ListSmall => "list-small",
        }
    }
}

impl FromStr for Endpoint {
    type Err = anyhow::Error;

    fn from_str(word: &str) -> Result<Self> {
        [
            Endpoint::List,
            Endpoint::Get,
            Endpoint::Create,
            Endpoint::ListSmall,
        ]
        .into_iter()
        .find(|e| e.name() == word)
        .ok_or_else(|| anyhow!("not list, get, create or list-small"))
    }
}

/// A list on the command line or in the environment, separated by spaces or commas
/// (`"get create"`, `"0.5,0.8"`), as the scripts' variables were.
#[derive(Clone, Debug)]
pub struct List<T>(pub Vec<T>);

impl<T: FromStr<Err: std::fmt::Display>> FromStr for List<T> {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Self> {
        let items = text
            .split([' ', ','])
            .filter(|word| !word.is_empty())
            .map(|word| word.parse::<T>().map_err(|e| anyhow!("{word:?}: {e}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(List(items))
    }
}

/// The three servers, in the order each endpoint measures them.
pub const SERVERS: [&str; 3] = ["bare", "trusted", "app"];

pub fn served<'a>(setup: &'a Setup, server: &str) -> &'a Served {
    match server {
        "bare" => &setup.bare,
        "trusted" => &setup.trusted,
        _ => &setup.app,
    }
}

/// The closed-loop knobs.
pub struct Knobs {
    pub conns: u32,
    pub threads: u32,
    pub duration: Duration,
    pub warmup: Duration,
    /// Record the app with `perf` during each of its runs (kept in the temporary directory).
    pub perf: bool,
}

/// One server's saturation on one endpoint.
pub struct Closed {
    pub rps: f64,
    pub p99_ms: Option<f64>,
    /// The server process's CPU time per request (user + system), µs.
    pub cpu_us: Option<f64>,
}

const CREATE_LUA: &str = r#"-- POST /api/bookmarks with a URL no other request of any run uses.
local threads = {}
function setup(thread)
    table.insert(threads, thread)
    thread:set("tid", #threads)
end
function init(args)
    prefix = args[1]
    tenant = args[2]
    auth = args[3]
    counter = 0
end
function request()
    counter = counter + 1
    local body = string.format(
        '{"url":"https://example.com/%s/%d/%d","title":"wrk %d","tags":["bench","wrk"]}',
        prefix, tid, counter, counter)
    return wrk.format("POST", "/api/bookmarks",
        {["Content-Type"] = "application/json", ["X-Tenant-Id"] = tenant,
         ["Authorization"] = auth}, body)
end
"#;

/// wrk's whole seconds (it takes no fractions).
fn wrk_duration(duration: Duration) -> String {
    format!("{}s", duration.as_secs().max(1))
}

/// One wrk run of `endpoint` on `server`; its output is kept as `wrk-NAME.txt`.
async fn wrk_run(
    setup: &Setup,
    server: &Served,
    endpoint: Endpoint,
    duration: Duration,
    name: &str,
    knobs: &Knobs,
) -> Result<wrk::Wrk> {
    let (path, tenant, key) = match endpoint {
        Endpoint::List | Endpoint::Create => ("/api/bookmarks".to_owned(), TENANT, &setup.key),
        Endpoint::ListSmall => ("/api/bookmarks".to_owned(), SMALL_TENANT, &setup.small_key),
        Endpoint::Get => (
            format!("/api/bookmarks/{}", setup.get_id),
            TENANT,
            &setup.key,
        ),
    };
    let script = setup.work.join("create.lua");
    if endpoint == Endpoint::Create && !script.exists() {
        std::fs::write(&script, CREATE_LUA)
            .with_context(|| format!("cannot write {}", script.display()))?;
    }
    let mut args: Vec<String> = vec![
        format!("-t{}", knobs.threads),
        format!("-c{}", knobs.conns),
        format!("-d{}", wrk_duration(duration)),
        "--latency".into(),
        "-H".into(),
        format!("X-Tenant-Id: {tenant}"),
        "-H".into(),
        format!("Authorization: Bearer {key}"),
    ];
    if endpoint == Endpoint::Create {
        args.extend(["-s".into(), script.display().to_string()]);
    }
    args.push(format!("{}{path}", server.url));
    if endpoint == Endpoint::Create {
        // A prefix no other run uses, so that every created URL is new.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let prefix = format!("{name}-{}-{nanos}", std::process::id());
        args.extend([
            "--".into(),
            prefix,
            TENANT.into(),
            format!("Bearer {}", setup.key),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = wrk::run(&args).await?;
    let _ = std::fs::write(setup.work.join(format!("wrk-{name}.txt")), &run.output);
    let trouble: Vec<String> = run
        .output
        .lines()
        .filter(|line| line.contains("Non-2xx") || line.contains("Socket errors"))
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    if !trouble.is_empty() {
        eprintln!("== warning: {name}: {}", trouble.join("; "));
    }
    Ok(run)
}

/// The load average, as the log shows it before each measurement.
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "load average {}",
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Clock ticks per second of /proc's CPU times.
async fn clock_ticks() -> f64 {
    let text = output(Command::new("getconf").arg("CLK_TCK"))
        .await
        .unwrap_or_default();
    text.trim().parse().unwrap_or(100.0)
}

/// Every endpoint on the bare handler, the trusted-header app and the app, each after a
/// warm-up and with the search backlog empty.
pub async fn saturation(
    setup: &Setup,
    endpoints: &[Endpoint],
    knobs: &Knobs,
) -> Result<BTreeMap<(&'static str, Endpoint), Closed>> {
    let hz = clock_ticks().await;
    let mut results = BTreeMap::new();
    for &endpoint in endpoints {
        for server in SERVERS {
            let served = served(setup, server);
            let name = format!("{server}-{}", endpoint.name());
            setup.wait_backlog().await?;
            wrk_run(
                setup,
                served,
                endpoint,
                knobs.warmup,
                &format!("{name}-warmup"),
                knobs,
            )
            .await?;
            setup.wait_backlog().await?;
            eprintln!(
                "== {server} {} ({}, {})",
                endpoint.name(),
                humantime::format_duration(knobs.duration),
                load_average()
            );
            let perf = if knobs.perf && server == "app" {
                let data = setup
                    .work
                    .join(format!("perf-app-{}.data", endpoint.name()));
                let mut record = process::command("perf");
                record
                    .args([
                        "record",
                        "-q",
                        "-e",
                        "cpu-clock",
                        "-F",
                        "999",
                        "-g",
                        "-p",
                        &served.pid.to_string(),
                        "-o",
                    ])
                    .arg(data)
                    .args(["--", "sleep", &knobs.duration.as_secs().max(1).to_string()])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null());
                Some(record.spawn().context("cannot start perf record")?)
            } else {
                None
            };
            let before = served.cpu_ticks()?;
            let run = wrk_run(setup, served, endpoint, knobs.duration, &name, knobs).await?;
            let ticks = served.cpu_ticks()?.saturating_sub(before);
            if let Some(mut perf) = perf {
                let _ = perf.wait().await;
            }
            let cpu_us = (run.requests > 0).then(|| ticks as f64 * 1e6 / hz / run.requests as f64);
            results.insert(
                (server, endpoint),
                Closed {
                    rps: run.requests_per_sec,
                    p99_ms: run.p99_ms,
                    cpu_us,
                },
            );
        }
    }
    Ok(results)
}

/// What loadgen's open loop measured on one server: p50, p99 and p99.9 in ms, and the
/// requests that failed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub failed: u64,
}

/// One row of the open loop: an endpoint (or the mix) at a share of the app's saturation.
pub struct Open {
    pub endpoint: &'static str,
    pub share: f64,
    pub rate: f64,
    pub app: Latency,
    pub bare: Latency,
}

/// The open loop's knobs.
pub struct OpenKnobs {
    pub warmup: Duration,
    pub duration: Duration,
    pub shares: Vec<f64>,
}

/// loadgen at each share of each endpoint's saturation (and of the mix's, when list, get
/// and create were all measured), against the app and the bare handler at the same rates.
pub async fn open_loop(
    setup: &Setup,
    closed: &BTreeMap<(&'static str, Endpoint), Closed>,
    knobs: &OpenKnobs,
) -> Result<Vec<Open>> {
    let mut saturations: Vec<(&'static str, &'static str, f64)> = Vec::new();
    for (endpoint, mix) in [
        (Endpoint::List, "list=1"),
        (Endpoint::Get, "get=1"),
        (Endpoint::Create, "create=1"),
    ] {
        if let Some(c) = closed.get(&("app", endpoint)) {
            saturations.push((endpoint.name(), mix, c.rps));
        }
    }
    // The mix saturates where its parts' times per request add up.
    if let [(_, _, list), (_, _, get), (_, _, create)] = saturations[..] {
        let rate = (1.0 / (0.6 / list + 0.3 / get + 0.1 / create)).round();
        saturations.push(("mix", "list=6,get=3,create=1", rate));
    }
    // Which server goes first alternates, and each measurement starts from a checkpoint, so
    // that the aftermath of what ran before (dirty pages, vacuum) lands on neither alone.
    let mut order = ["app", "bare"];
    let mut rows = Vec::new();
    for (endpoint, mix, saturation) in saturations {
        for &share in &knobs.shares {
            let rate = (saturation * share).round().max(1.0);
            order.swap(0, 1);
            let mut row = Open {
                endpoint,
                share,
                rate,
                app: Latency::default(),
                bare: Latency::default(),
            };
            for server in order {
                setup.wait_backlog().await?;
                setup
                    .postgres
                    .execute("postgres", "postgres", "CHECKPOINT")
                    .await?;
                eprintln!(
                    "== open loop: {server} {endpoint} at {rate}/s ({share} of the app's saturation, {})",
                    load_average()
                );
                let name = format!("{server}-{endpoint}-{share}");
                let latency = loadgen_run(setup, server, mix, rate, &name, knobs).await?;
                if server == "app" {
                    row.app = latency;
                } else {
                    row.bare = latency;
                }
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// A warm-up at the same rate first (connections, caches, the planner), then the measured
/// run; its report is kept as `loadgen-NAME.json`.
async fn loadgen_run(
    setup: &Setup,
    server: &str,
    mix: &str,
    rate: f64,
    name: &str,
    knobs: &OpenKnobs,
) -> Result<Latency> {
    let base = loadgen::Config {
        base_url: served(setup, server).url.clone(),
        // The app checks keys; loadgen makes its tenant's through the admin API.
        admin_token: (server == "app").then(|| setup.admin_token.clone()),
        tenants: 1,
        seed: 5,
        mix: mix.parse().with_context(|| format!("mix {mix}"))?,
        load: loadgen::Load::Open {
            rate,
            max_in_flight: loadgen::cli::DEFAULT_MAX_IN_FLIGHT,
        },
        progress: false,
        ..loadgen::Config::default()
    };
    let warmup = loadgen::Config {
        duration: knobs.warmup,
        ..base.clone()
    };
    loadgen::run(&warmup)
        .await
        .with_context(|| format!("loadgen {name} (warm-up)"))?;
    let measured = loadgen::Config {
        duration: knobs.duration,
        ..base
    };
    let report = loadgen::run(&measured)
        .await
        .with_context(|| format!("loadgen {name}"))?;
    let json = setup.work.join(format!("loadgen-{name}.json"));
    std::fs::write(&json, report.to_json())
        .with_context(|| format!("cannot write {}", json.display()))?;
    let total = &report.total;
    Ok(Latency {
        p50: total.p50_ms.unwrap_or(f64::NAN),
        p99: total.p99_ms.unwrap_or(f64::NAN),
        p999: total.p999_ms.unwrap_or(f64::NAN),
        failed: total.requests.saturating_sub(total.ok),
    })
}
