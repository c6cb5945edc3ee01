//! Replica reads on the compose stack (docs/replica-reads.md, "Results"): the same 90/10
//! read/write load twice on a stack of its own with a streaming replica per shard.
//!
//!   1. with-replicas:  loadgen sends each tenant's latest consistency token with its reads,
//!      so a replica that has replayed the tenant's last write serves them;
//!   2. primaries-only: the same load without tokens (`--no-tokens`); the stack's
//!      reads_without_token is `primary`, so every read goes to the shard primary, as
//!      before replica reads existed.
//!
//! Each Postgres server (primaries and replicas) is held to `--shard-cpus` cores (`docker
//! update --cpus`), standing in for a server of its own: on one machine an unbounded replica
//! would only take cores from its own primary. Prints the replicas' share of reads and the
//! read (list, get) p50/p99 of both runs; reports go to docs/results/replica-reads/ (or
//! `--out`). Offline machines: build the stand-ins first (scripts/build-offline-images.sh
//! and scripts/build-offline-app-image.sh); they are used when present.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use loadgen::{Mix, Report};

use crate::bench::load::{self, File, ms, row};
use crate::compose::Stack;
use crate::process;

/// 90 % reads, 10 % writes.
const MIX: &str = "list=45,get=45,create=8,update=2";
const SERVERS: [&str; 4] = [
    "postgres-shard-0",
    "postgres-shard-0-replica",
    "postgres-shard-1",
    "postgres-shard-1-replica",
];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Requests per second of both runs (open loop).
    #[arg(long, env = "RATE", default_value_t = 400.0)]
    pub rate: f64,
    /// How long each recorded run sends load (e.g. 30s, 2m).
    #[arg(long, env = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Tenant population.
    #[arg(long, env = "TENANTS", default_value_t = 50)]
    pub tenants: usize,
    /// Bookmarks per tenant created during the warm-up.
    #[arg(long, env = "PREFILL", default_value_t = 20)]
    pub prefill: usize,
    /// Cores each Postgres server (primary or replica) is held to.
    #[arg(long, env = "SHARD_CPUS", default_value_t = 0.2)]
    pub shard_cpus: f64,
    /// Where the reports and JSON go.
    #[arg(long, env = "OUT", default_value = "docs/results/replica-reads")]
    pub out: PathBuf,
    /// The port the stack's nginx is published on.
    #[arg(long, env = "BOOKMARKS_HTTP_PORT", default_value_t = 18082)]
    pub http_port: u16,
}

pub async fn run(args: Args) -> crate::Outcome {
    let out = process::root().join(&args.out);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let stack = Stack::new("bookmarks-replica-reads", args.http_port).await?;
    load::interruptible(measure(&stack, &args, &out)).await?;
    Ok(ExitCode::SUCCESS)
}

async fn measure(stack: &Stack, args: &Args, out: &Path) -> Result<()> {
    stack.up().await?;
    stack.limit_cpus(&SERVERS, args.shard_cpus).await?;
    let mix: Mix = MIX.parse().with_context(|| format!("the mix {MIX}"))?;
    let config = |duration, prefill, send_tokens| loadgen::Config {
        tenants: args.tenants,
        seed: 7,
        mix: mix.clone(),
        load: load::open(args.rate),
        duration,
        prefill,
        send_tokens,
        ..stack.load()
    };

    println!("== warm-up (prefill and 10 s, unrecorded)");
    load::run(&config(Duration::from_secs(10), args.prefill, true)).await?;
    let mut reports = Vec::new();
    for (name, send_tokens) in [("with-replicas", true), ("primaries-only", false)] {
        println!("== {name}");
        let report = load::run(&config(args.duration, 0, send_tokens)).await?;
        print!("{}", report.table());
        load::save(&report, out, name, &[File::Table, File::Json])?;
        reports.push((name, report));
    }

    println!(
        "== summary (RATE={} DURATION={} TENANTS={} SHARD_CPUS={}, mix {MIX})",
        args.rate,
        humantime::format_duration(args.duration),
        args.tenants,
        args.shard_cpus
    );
    print!("{}", summary(&reports));
    Ok(())
}

/// The table of docs/replica-reads.md: the replicas' share of reads, the reads' latency,
/// the slower of the writes' p99 and the errors of each run.
fn summary(reports: &[(&str, Report)]) -> String {
    let mut out = "| run | reads on replicas | list p50 / p99 ms | get p50 / p99 ms | writes p99 ms | errors |\n\
                   |---|---|---|---|---|---|\n"
        .to_owned();
    for (name, report) in reports {
        let from = &report.reads_from;
        let reads = from.replica + from.primary;
        let share = if reads == 0 {
            0.0
        } else {
            100.0 * from.replica as f64 / reads as f64
        };
        let ops = &report.operations;
        let writes = ["create", "update"]
            .iter()
            .filter_map(|op| row(ops, op))
            .map(|r| r.p99_ms.unwrap_or(0.0))
            .reduce(f64::max);
        let errors: u64 = report.total.errors.values().sum();
        let (list, get) = (row(ops, "list"), row(ops, "get"));
        out += &format!(
            "| {name} | {share:.1} % | {} / {} | {} / {} | {} | {errors} |\n",
            ms(list.and_then(|r| r.p50_ms)),
            ms(list.and_then(|r| r.p99_ms)),
            ms(get.and_then(|r| r.p50_ms)),
            ms(get.and_then(|r| r.p99_ms)),
            ms(writes),
        );
    }
    out
}
