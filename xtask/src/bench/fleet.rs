//! `cargo xtask bench fleet`: what a fleet of logical shards costs. The same service and
//! the same load at 2, 16 and 64 shards, in one run on one machine. Not a test and not in
//! CI: run it by hand on an otherwise idle machine; docs/load-testing.md ("A fleet of
//! shards") keeps its figures.
//!
//! For each shard count N it starts fresh Postgres 15 servers ([`crate::postgres`]: the
//! default max_connections of 100): 2 of them for N=2, `--servers` (4) otherwise, each
//! holding its share of the N shard databases round robin (shard i on server i mod S), and
//! the control database on the first. Shards own even slot ranges in order; none has a
//! replica. Then, for that topology, it prints one `n=N key=value …` line per figure:
//!   migrate   `bookmarks migrate` of the fresh databases, timed;
//!   floor     (the last shard count, unless `--skip-floor`) the first shard count's
//!             topology and load, on databases of its own beside the N migrated ones on
//!             the same servers, with no other app running: `n=B@N load_…` lines, the p99
//!             that the servers alone give, without the app's N shards;
//!   ready     `bookmarks serve` from its start to the first 200 of /ready;
//!   idle      the app's CPU over 10 s of doing nothing;
//!   follower  a `bookmarks worker` beside it, which leads no shard: its reindexer
//!             sessions on each server and its CPU over 10 s of doing nothing;
//!   4 shards  `--load4` (60 s) of load on 4 tenants, which live on at most 4 shards, then
//!             the connections the app holds on each server (pg_stat_activity);
//!   load      loadgen, open loop, `--rate` requests/s for `--duration` on `--tenants`
//!             tenants with `--prefill` bookmarks each, `--rounds` times (pools cold on
//!             most shards, then warm): list, get and create p99 (and their ratio to the
//!             first shard count's), the CPU per request of the app and of the whole
//!             machine; then the warm rounds' median p99 and its ratio;
//!   rss       the app's resident memory after the load, and its peak;
//!   /ready    wrk flooding /ready for 10 s: requests/s and the probes they caused;
//!   fan-out   the admin page and /api/stats, each asked 5 times (the slowest is printed),
//!             then again with the last server stopped (a partial answer);
//!   moves     (N ≥ 2 × servers) a 16-slot range move between two shards on one server
//!             and the next 16 slots between two servers, `move_slot run --slots …
//!             --confirm`, timed (with the tenants the load wrote in them).
//! At the end it prints every line again on stdout (and keeps them in results.txt).
//!
//! The app runs with `[database] processes = 1` and `--pool` (2) connections per shard
//! primary: at 16 shards a server, the connection budget (app/sharding/budget.rs) refuses
//! the default pool of 8 on a server that allows 100 connections, which is the first thing
//! a fleet meets.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

mod app;
mod follower;
mod moves;
mod probes;
mod procfs;
mod topology;

use self::procfs::{clock_ticks, cpu_ticks, machine_busy_ticks, status_kib};
use self::topology::app_connections;
use super::load;
use crate::postgres::{Server, free_port};
use crate::process::{self, release_binary};

/// The benchmark's knobs; each also reads the script's old environment variable.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Shard counts to measure, in order; the first is the base of the p99 ratios.
    #[arg(long, env = "SHARDS", default_value = "2 16 64")]
    shards: String,
    /// Postgres servers the shards share (fewer when there are fewer shards).
    #[arg(long, env = "SERVERS", default_value_t = 4)]
    servers: usize,
    /// Connections per shard primary (`[database] primary_pool_size`).
    #[arg(long, env = "POOL", default_value_t = 2)]
    pool: usize,
    /// Tenants of the two measured loads.
    #[arg(long, env = "TENANTS", default_value_t = 100)]
    tenants: usize,
    /// Bookmarks created per tenant before each measured load.
    #[arg(long, env = "PREFILL", default_value_t = 5)]
    prefill: usize,
    /// Requests per second of the measured loads.
    #[arg(long, env = "RATE", default_value_t = 200.0)]
    rate: f64,
    /// How long each measured load runs.
    #[arg(long, env = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Measured loads per shard count: the first meets cold pools, the rest (`warm1`, …)
    /// the steady state, whose median p99 is printed too.
    #[arg(long, env = "ROUNDS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..))]
    rounds: u32,
    /// How long the load on 4 tenants runs before the connections are counted.
    #[arg(long, env = "LOAD4", default_value = "60s", value_parser = humantime::parse_duration)]
    load4: Duration,
    /// Keep the temporary folder with the logs and loadgen's reports.
    #[arg(long, env = "KEEP", value_parser = clap::builder::FalseyValueParser::new())]
    keep: bool,
    /// Leave out the floor (the first shard count's topology on the last one's servers).
    #[arg(long, env = "SKIP_FLOOR", value_parser = clap::builder::FalseyValueParser::new())]
    skip_floor: bool,
    /// Use the release binaries as they are instead of building them first.
    #[arg(long, env = "SKIP_BUILD", value_parser = clap::builder::FalseyValueParser::new())]
    skip_build: bool,
}

/// The measured operations, in the order the lines print them.
const OPERATIONS: [&str; 3] = ["list", "get", "create"];

fn log(message: impl std::fmt::Display) {
    eprintln!("== {message}");
}

pub async fn run(args: Args) -> crate::Outcome {
    let shard_counts = args
        .shards
        .split_whitespace()
        .map(|n| n.parse::<usize>().ok().filter(|n| *n > 0))
        .collect::<Option<Vec<_>>>()
        .filter(|counts| !counts.is_empty())
        .with_context(|| {
            format!(
                "--shards {:?}: shard counts above 0, e.g. \"2 16 64\"",
                args.shards
            )
        })?;
    if args.servers == 0 {
        bail!("--servers must be at least 1");
    }
    crate::postgres::require_binaries().await?;
    process::require(&[("wrk", "wrk")]).await?;
    if !args.skip_build {
        log("building (release)");
        process::build_release(&["--bin", "bookmarks", "--bin", "move_slot"]).await?;
    }
    for binary in ["bookmarks", "move_slot"] {
        if !release_binary(binary).is_file() {
            bail!("build first: cargo build --release --bin {binary}");
        }
    }
    let work = tempfile::Builder::new()
        .prefix("bench-fleet.")
        .tempdir()
        .context("cannot create a temporary folder")?;
    // The servers run as `postgres` when this runs as root: they must reach their folders.
    set_mode_755(work.path())?;
    let mut fleet = Fleet {
        work: work.path().to_owned(),
        admin_token: process::random_token(),
        clock_ticks: clock_ticks().await?,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(0)
            .build()?,
        results: Vec::new(),
        base_p99: HashMap::new(),
        keep: args.keep,
        args,
    };
    let base = shard_counts[0];
    let last = *shard_counts.last().unwrap_or(&base);
    let floor_of = (!fleet.args.skip_floor && last > base).then_some((base, last));
    let measured = load::interruptible(async {
        for n in shard_counts {
            fleet
                .measure(n, floor_of.filter(|(_, of)| *of == n))
                .await?;
        }
        Ok(())
    })
    .await;
    if fleet.keep {
        log(format!("kept {}", work.keep().display()));
    }
    measured?;
    log("results");
    for line in &fleet.results {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One run's state: where its files go, the base p99 of each load and operation, the lines.
struct Fleet {
    args: Args,
    work: PathBuf,
    admin_token: String,
    clock_ticks: f64,
    http: reqwest::Client,
    results: Vec<String>,
    /// The first shard count's p99 per (load, operation), None without one.
    base_p99: HashMap<(String, &'static str), Option<f64>>,
    keep: bool,
}

impl Fleet {
    /// Prints a result line and keeps it (for the summary and results.txt).
    fn result(&mut self, line: String) -> Result<()> {
        eprintln!("{line}");
        let path = self.work.join("results.txt");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        writeln!(file, "{line}")?;
        self.results.push(line);
        Ok(())
    }

    /// Every figure of one shard count, on servers and an app of its own; with `floor`
    /// (the first shard count, this one), the floor's lines first.
    async fn measure(&mut self, n: usize, floor: Option<(usize, usize)>) -> Result<()> {
        let server_count = self.args.servers.min(n);
        log(format!("{n} shards on {server_count} servers"));
        let dir = self.work.join(format!("n{n}"));
        let mut servers = Vec::new();
        let base = free_port(26432)?;
        for s in 0..server_count {
            let port = free_port(base.saturating_add(s as u16))?;
            servers.push(Server::start(&dir.join(format!("pg{s}")), port, 100).await?);
        }
        let config = topology::write_config(n, self.args.pool, &servers, &dir, "").await?;
        let took = self.migrate(&config, &dir).await?;
        self.result(format!(
            "n={n} servers={server_count} migrate_s={:.2}",
            took.as_secs_f64()
        ))?;
        if let Some((base, of)) = floor {
            self.floor(base, of, &servers, &dir).await?;
        }

        let started = Instant::now();
        let (mut served, app) = self.serve(&config, &dir).await?;
        let pid = served.pid;
        self.result(format!(
            "n={n} ready_s={:.2}",
            started.elapsed().as_secs_f64()
        ))?;

        // What the process costs doing nothing: its background loops (per shard: the
        // reindexer, the liveness monitor; per process: the listener, the job worker).
        let before = cpu_ticks(pid)?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle = (cpu_ticks(pid)? - before) / self.clock_ticks * 10.0;
        self.result(format!("n={n} idle_cpu_pct={idle:.1}"))?;
        self.follower(n, &servers, &config, &dir).await?;

        let config4 = loadgen::Config {
            tenants: 4,
            prefill: 1,
            load: load::open(40.0),
            duration: self.args.load4,
            ..self.load_config(&app)?
        };
        let report = load::run(&config4).await?;
        load::save(&report, &dir, "load4", &[load::File::Json])?;
        let shards_touched = report.shards.iter().filter(|s| s.name != "none").count();
        let held = app_connections(&servers).await?;
        self.result(format!(
            "n={n} load_4_tenants shards_touched={shards_touched} connections_per_server={held}"
        ))?;

        self.measured_loads(&n.to_string(), pid, &app, &dir).await?;
        let rss = status_kib(pid, "VmRSS")? / 1024;
        let peak = status_kib(pid, "VmHWM")? / 1024;
        let held = app_connections(&servers).await?;
        self.result(format!(
            "n={n} rss_mib={rss} peak_mib={peak} connections_per_server={held}"
        ))?;

        let before = probes::ready_probes(&self.http, &app).await?;
        let flood = crate::wrk::run(&["-t2", "-c4", "-d10s", &format!("{app}/ready")]).await?;
        let probes_per_s = (probes::ready_probes(&self.http, &app).await? - before) / 10.0;
        self.result(format!(
            "n={n} ready_flood rps={:.2} probes_per_s={probes_per_s:.1}",
            flood.requests_per_sec
        ))?;

        let fanout = probes::fanout(&self.http, &self.admin_token, &app).await;
        self.result(format!("n={n} fanout {fanout}"))?;

        if n >= 2 * server_count {
            self.moves(n, server_count, &config, &dir).await?;
        }

        if let Some(last) = servers.last() {
            last.stop().await?;
        }
        // /api/stats answers from a result up to 1 s old: let it lapse.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let fanout = probes::fanout(&self.http, &self.admin_token, &app).await;
        self.result(format!("n={n} fanout_server_down {fanout}"))?;

        served
            .child
            .kill()
            .await
            .context("cannot stop bookmarks serve")?;
        drop(servers);
        Ok(())
    }

    /// The first shard count's (`base`) topology and measured loads on `of`'s servers,
    /// beside its migrated databases: what the servers give without the app's shards.
    async fn floor(
        &mut self,
        base: usize,
        of: usize,
        servers: &[Server],
        dir: &Path,
    ) -> Result<()> {
        log(format!(
            "the floor: {base} shards beside the {of} on their servers"
        ));
        let dir = dir.join("floor");
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let own = &servers[..self.args.servers.min(base).min(servers.len())];
        let config = topology::write_config(base, self.args.pool, own, &dir, "floor_").await?;
        self.migrate(&config, &dir).await?;
        let (mut app, url) = self.serve(&config, &dir).await?;
        self.measured_loads(&format!("{base}@{of}"), app.pid, &url, &dir)
            .await?;
        app.child
            .kill()
            .await
            .context("cannot stop the floor's app")
    }

    /// loadgen against the app, with an API key per tenant, list 60 / get 20 / create 20.
    fn load_config(&self, app: &str) -> Result<loadgen::Config> {
        Ok(loadgen::Config {
            base_url: app.to_owned(),
            admin_token: Some(self.admin_token.clone()),
            mix: "list=60,get=20,create=20"
                .parse()
                .context("the load's mix")?,
            ..loadgen::Config::default()
        })
    }

    /// `--rounds` measured loads: the first meets pools that are not open yet on most
    /// shards, the others the steady state; then the warm rounds' median p99.
    async fn measured_loads(&mut self, n: &str, pid: u32, app: &str, dir: &Path) -> Result<()> {
        let mut warm: Vec<[Option<f64>; 3]> = Vec::new();
        for round in 0..self.args.rounds {
            let run = match round {
                0 => "first".to_owned(),
                r => format!("warm{r}"),
            };
            let p99 = self.measured_load(n, &run, pid, app, dir).await?;
            if round > 0 {
                warm.push(p99);
            }
        }
        let mut line = format!("n={n} warm_median");
        for (i, op) in OPERATIONS.iter().enumerate() {
            let mut values: Vec<f64> = warm.iter().filter_map(|p| p[i]).collect();
            values.sort_by(f64::total_cmp);
            let median = match values.len() {
                0 => None,
                len if len % 2 == 1 => Some(values[len / 2]),
                len => Some((values[len / 2 - 1] + values[len / 2]) / 2.0),
            };
            let ratio = self.ratio("warm_median", op, median);
            let shown = median.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"));
            write!(line, " {op}_p99_ms={shown} (x{ratio})")?;
        }
        self.result(line)
    }

    /// `value`'s ratio to the first shard count's for the same run and operation (the first
    /// value seen for it is that base).
    fn ratio(&mut self, run: &str, op: &'static str, value: Option<f64>) -> String {
        let base = *self.base_p99.entry((run.to_owned(), op)).or_insert(value);
        match (value, base) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
            _ => "n/a".to_owned(),
        }
    }

    /// One measured load: errors, p99 per operation (and ratio to the first shard
    /// count's), and CPU per request. Returns the p99s, in [`OPERATIONS`]' order.
    async fn measured_load(
        &mut self,
        n: &str,
        run: &str,
        pid: u32,
        app: &str,
        dir: &Path,
    ) -> Result<[Option<f64>; 3]> {
        let config = loadgen::Config {
            tenants: self.args.tenants,
            prefill: self.args.prefill,
            load: load::open(self.args.rate),
            duration: self.args.duration,
            seed: 7,
            ..self.load_config(app)?
        };
        let app_before = cpu_ticks(pid)?;
        let busy_before = machine_busy_ticks()?;
        let report = load::run(&config).await?;
        load::save(&report, dir, &format!("load-{run}"), &[load::File::Json])?;
        let errors: u64 = report.total.errors.values().sum();
        let mut line = format!(
            "n={n} load_{run} rate={} tenants={} errors={errors}",
            self.args.rate, self.args.tenants
        );
        let mut p99s = [None; 3];
        for (i, op) in OPERATIONS.iter().enumerate() {
            let p99 = load::row(&report.operations, op).and_then(|row| row.p99_ms);
            p99s[i] = p99;
            let ratio = self.ratio(run, op, p99);
            let shown = p99.map_or_else(|| "n/a".to_owned(), |v| v.to_string());
            write!(line, " {op}_p99_ms={shown} (x{ratio})")?;
        }
        self.result(line)?;
        // CPU per request: the app's own, and the whole machine's (the app, Postgres and
        // the load generator, prefill included): which side grows with the shard count.
        let requests = (report.total.requests + report.prefill.requests) as f64;
        let per_request = |ticks: f64| {
            if requests > 0.0 {
                format!("{:.0}", ticks * 1e6 / self.clock_ticks / requests)
            } else {
                "n/a".to_owned()
            }
        };
        let app_cpu = per_request(cpu_ticks(pid)? - app_before);
        let machine_cpu = per_request(machine_busy_ticks()? - busy_before);
        self.result(format!(
            "n={n} load_{run} cpu_us_per_request app={app_cpu} machine={machine_cpu}"
        ))?;
        Ok(p99s)
    }
}

fn set_mode_755(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot chmod {}", path.display()))
}
