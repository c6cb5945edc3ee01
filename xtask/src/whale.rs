//! The whale experiment of docs/load-testing.md, rerunnable: on a compose stack of its own,
//! loadgen sends the same open-loop load five times and writes each run's report, JSON and
//! plot under docs/results/load-testing/ (or `--out`), then prints the summary table the
//! document shows.
//!
//!   1. baseline: uniform tenants, no whale;
//!   2. whale:    one tenant (whale-corp) takes half of all requests, on a shard it shares;
//!   3. bulkhead: the same, with MAX_IN_FLIGHT_PER_TENANT=4 (of a shard pool of 8);
//!   4. moved:    the same as 2 after `move_slot` moved whale-corp to the other shard and
//!      `--settle` seconds of unrecorded load (the source shard's aftermath);
//!   5. own shard: the same after a third shard (postgres-shard-2, capped like the others)
//!      joined as in docs/deploys.md's "Adding a shard" and whale-corp moved onto it by
//!      itself while the load ran (recorded as 5-moving), then `--settle` seconds.
//!
//! On one machine every container shares the same cores, so a busy shard would slow the
//! other one down as much as itself, which is not what separate shard servers do. Each shard
//! primary is therefore held to `--shard-cpus` cores (`docker update --cpus`), standing in
//! for a server of its own with a fixed capacity; the web replicas, nginx and loadgen share
//! the rest. Offline machines: build the stand-ins first (scripts/build-offline-images.sh
//! and scripts/build-offline-app-image.sh); they are used when present.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use loadgen::report::{OTHERS, WHALES};
use loadgen::{Report, Whale};

use crate::bench::load::{self, File, errors, ms, row};
use crate::compose::Stack;
use crate::process::{self, output};

/// The tenant that takes half of all requests.
const WHALE: &str = "whale-corp";
/// The shard pool is 8: 16 is no limit, 4 is the bulkhead.
const NO_BULKHEAD: u32 = 16;
const BULKHEAD: u32 = 4;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Requests per second of every run (open loop).
    #[arg(long, env = "RATE", default_value_t = 700.0)]
    pub rate: f64,
    /// How long each recorded run sends load (e.g. 30s, 2m).
    #[arg(long, env = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Tenant population besides the whale.
    #[arg(long, env = "TENANTS", default_value_t = 100)]
    pub tenants: usize,
    /// Bookmarks per tenant created before each recorded run.
    #[arg(long, env = "PREFILL", default_value_t = 20)]
    pub prefill: usize,
    /// Cores each shard primary is held to.
    #[arg(long, env = "SHARD_CPUS", default_value_t = 0.2)]
    pub shard_cpus: f64,
    /// Seconds of unrecorded load after each move before measuring (0: right after it).
    #[arg(long, env = "SETTLE", default_value_t = 20)]
    pub settle: u64,
    /// Seconds of the load during which the whale moves onto shard2 (5-moving).
    #[arg(long, env = "MOVE_WINDOW", default_value_t = 40)]
    pub move_window: u64,
    /// Where the reports, JSON and plots go.
    #[arg(long, env = "OUT", default_value = "docs/results/load-testing")]
    pub out: PathBuf,
    /// The port the stack's nginx is published on.
    #[arg(long, env = "BOOKMARKS_HTTP_PORT", default_value_t = 18081)]
    pub http_port: u16,
}

pub async fn run(args: Args) -> crate::Outcome {
    let out = process::root().join(&args.out);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut stack = Stack::new("bookmarks-whale", args.http_port).await?;
    load::interruptible(experiment(&mut stack, &args, &out)).await?;
    Ok(ExitCode::SUCCESS)
}

/// The five runs and the summary; the stack goes down when the caller drops it.
async fn experiment(stack: &mut Stack, args: &Args, out: &Path) -> Result<()> {
    let mut runs = Runs { stack, args, out };
    runs.up(NO_BULKHEAD).await?;
    // Prefill and a short unrecorded run first, so that the baseline does not pay for cold
    // pools, caches and the first writes.
    println!("== warm-up (prefill and 10 s)");
    load::run(&runs.config(Duration::from_secs(10), true, args.prefill)).await?;
    let baseline = runs.record("1-baseline", false).await?;
    let whale = runs.record("2-whale", true).await?;
    runs.up(BULKHEAD).await?;
    let bulkhead = runs.record("3-bulkhead", true).await?;
    runs.up(NO_BULKHEAD).await?;

    let from = runs.stack.shard_of(WHALE).await?;
    let to = if from == "shard0" { "shard1" } else { "shard0" };
    println!("== moving {WHALE} from {from} to {to}");
    let moved = runs.move_whale(&from, to).await?;
    println!("{}", last_lines(&moved, 3));
    // The move ends by deleting the whale's rows from the source; the source shard then
    // spends a while on dead rows and the reindexer's backlog. Measure the settled state
    // after an unrecorded run, and report the transient separately (--settle 0 to see it
    // in the table).
    if args.settle != 0 {
        println!(
            "== settling ({}s of the same load, unrecorded)",
            args.settle
        );
        let settling = load::run(&runs.config(Duration::from_secs(args.settle), true, 0)).await?;
        load::save(&settling, out, "4-moved-settling", &[File::Json])?;
        println!("{}", home_shard_rows(&settling.table()));
    }
    let moved_away = runs.record("4-moved", true).await?;

    println!("== adding shard2 (drained; docs/deploys.md, \"Adding a shard\")");
    let moving = runs.add_shard_and_move(to).await?;
    if args.settle != 0 {
        println!(
            "== settling ({}s of the same load, unrecorded)",
            args.settle
        );
        load::run(&runs.config(Duration::from_secs(args.settle), true, 0)).await?;
    }
    let own = runs.record("5-own-shard", true).await?;

    println!(
        "== summary (RATE={} DURATION={} TENANTS={} SHARD_CPUS={}, whale on {from}, then moved to {to}, then to shard2)",
        args.rate,
        humantime::format_duration(args.duration),
        args.tenants,
        args.shard_cpus
    );
    let recorded = [
        ("1-baseline", &baseline),
        ("2-whale", &whale),
        ("3-bulkhead", &bulkhead),
        ("4-moved", &moved_away),
        ("5-own-shard", &own),
    ];
    print!("{}", summary(&recorded, &from, &moving));
    Ok(())
}

/// What every step needs: the stack, the knobs, where reports go.
struct Runs<'a> {
    stack: &'a mut Stack,
    args: &'a Args,
    out: &'a Path,
}

impl Runs<'_> {
    /// The experiment's load: its tenants, seed 7, `--rate`, with or without the whale.
    fn config(&self, duration: Duration, whale: bool, prefill: usize) -> loadgen::Config {
        let whales = if whale {
            vec![Whale {
                name: WHALE.to_owned(),
                share: 0.5,
            }]
        } else {
            Vec::new()
        };
        loadgen::Config {
            tenants: self.args.tenants,
            seed: 7,
            prefill,
            whales,
            load: load::open(self.args.rate),
            duration,
            ..self.stack.load()
        }
    }

    /// (Re)starts the stack with a bulkhead limit, waits until nginx serves, caps the shards.
    async fn up(&self, max_in_flight_per_tenant: u32) -> Result<()> {
        let mut compose = self.stack.compose.clone();
        compose.set(
            "MAX_IN_FLIGHT_PER_TENANT",
            max_in_flight_per_tenant.to_string(),
        );
        if !compose.try_run(&["up", "-d", "--wait"]).await {
            compose.run(&["up", "-d"]).await?;
        }
        self.stack.wait_served(Duration::from_secs(300)).await?;
        // The app containers were all recreated at once and may have swapped addresses;
        // nginx resolves the replicas' names only when it starts (or reloads).
        let _ = compose
            .try_run(&["exec", "-T", "nginx", "nginx", "-s", "reload"])
            .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.stack
            .limit_cpus(
                &["postgres-shard-0", "postgres-shard-1"],
                self.args.shard_cpus,
            )
            .await
    }

    /// One measured run: prints loadgen's table and writes NAME.txt, .json and .svg.
    async fn record(&self, name: &str, whale: bool) -> Result<Report> {
        println!("== {name}");
        let report = load::run(&self.config(self.args.duration, whale, self.args.prefill)).await?;
        print!("{}", report.table());
        load::save(
            &report,
            self.out,
            name,
            &[File::Table, File::Json, File::Plot],
        )?;
        Ok(report)
    }

    /// `move_slot run` of the whale, to its end: what it printed.
    async fn move_whale(&self, from: &str, to: &str) -> Result<String> {
        let args = [
            "run",
            "--rm",
            "-T",
            "move_slot",
            "run",
            "--from",
            from,
            "--to",
            to,
            "--tenant",
            WHALE,
            "--confirm",
        ];
        self.stack.compose.run(&args).await
    }

    /// docs/deploys.md's "Adding a shard", then the whale moved from `from` onto shard2
    /// while the load runs for `--move-window` seconds (5-moving, not printed).
    async fn add_shard_and_move(&mut self, from: &str) -> Result<Report> {
        // From here on every step (migrate, the restarts, move_slot) sees shard2.
        self.stack.compose.add_file("compose/shard2.yml");
        let compose = &self.stack.compose;
        compose
            .run(&[
                "up",
                "-d",
                "--wait",
                "postgres-shard-2",
                "postgres-shard-2-replica",
            ])
            .await?;
        self.stack
            .limit_cpus(&["postgres-shard-2"], self.args.shard_cpus)
            .await?;
        compose
            .run(&[
                "run", "--rm", "-T", "migrate", "migrate", "--shard", "shard2",
            ])
            .await?;
        output(&mut compose.command("scripts/rolling-restart.sh")).await?;

        println!("== moving {WHALE} from {from} to shard2 while the load runs");
        let config = self.config(Duration::from_secs(self.args.move_window), true, 0);
        let moving = async {
            let report = load::run(&config).await?;
            load::save(&report, self.out, "5-moving", &[File::Json, File::Table])?;
            anyhow::Ok(report)
        };
        let mover = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            self.move_whale(from, "shard2").await
        };
        let (report, moved) = tokio::try_join!(moving, mover)?;
        println!("{}", last_lines(&moved, 1));
        Ok(report)
    }
}

/// The last `n` lines of a command's output.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The "by class, home shard" block of loadgen's table: its header and four rows.
fn home_shard_rows(table: &str) -> String {
    let lines: Vec<&str> = table.lines().collect();
    match lines
        .iter()
        .position(|l| l.starts_with("by class, home shard"))
    {
        Some(at) => lines[at..(at + 5).min(lines.len())].join("\n"),
        None => String::new(),
    }
}

/// The table of docs/load-testing.md, then how the own shard compares with the baseline
/// and what the move onto shard2 cost.
fn summary(recorded: &[(&str, &Report)], whale_shard: &str, moving: &Report) -> String {
    let other = if whale_shard == "shard0" {
        "shard1"
    } else {
        "shard0"
    };
    let near_name = format!("{OTHERS} on {whale_shard}");
    let far_name = format!("{OTHERS} on {other}");
    let mut out = format!(
        "| run | minnows on {whale_shard}: p50 / p99 ms | minnows on {other}: p50 / p99 ms | whale p99 ms | whale errors | total req/s |\n\
         |---|---|---|---|---|---|\n"
    );
    for (name, report) in recorded {
        let near = row(&report.class_shards, &near_name);
        let far = row(&report.class_shards, &far_name);
        let whale = row(&report.classes, WHALES);
        out += &format!(
            "| {name} | {} / {} | {} / {} | {} | {} | {:.0} |\n",
            ms(near.and_then(|r| r.p50_ms)),
            ms(near.and_then(|r| r.p99_ms)),
            ms(far.and_then(|r| r.p50_ms)),
            ms(far.and_then(|r| r.p99_ms)),
            ms(whale.and_then(|r| r.p99_ms)),
            errors(whale.map(|r| &r.errors)),
            report.total.rate
        );
    }
    let (baseline, own) = (recorded[0].1, recorded[recorded.len() - 1].1);
    for shard in [whale_shard, other] {
        let name = format!("{OTHERS} on {shard}");
        let before = row(&baseline.class_shards, &name).and_then(|r| r.p99_ms);
        let after = row(&own.class_shards, &name).and_then(|r| r.p99_ms);
        let ratio = match (after, before) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".to_owned(),
        };
        out += &format!(
            "own shard: minnows on {shard} p99 {} ms = {ratio} the baseline's {} (target <= 1.3x)\n",
            ms(after),
            ms(before)
        );
    }
    let minnows = row(&moving.classes, OTHERS);
    out += &format!(
        "during the move to shard2: minnows {} requests, errors {}, p99 {} ms; whale errors {}\n",
        minnows.map_or(0, |r| r.requests),
        errors(minnows.map(|r| &r.errors)),
        ms(minnows.and_then(|r| r.p99_ms)),
        errors(row(&moving.classes, WHALES).map(|r| &r.errors))
    );
    out
}
