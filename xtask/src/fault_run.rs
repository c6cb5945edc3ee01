//! `cargo xtask fault-run`: the fault-injection run (docs/reliability.md). On a compose
//! stack of its own, loadgen sends a fixed rate of requests over a few hundred tenants with
//! `--verify` while the nemesis (`cargo xtask nemesis`, run in this process) kills, pauses,
//! stops and moves things on a schedule drawn from a seed. Once the nemesis has healed the
//! stack, loadgen reads every tenant back, through nginx and straight from each shard
//! primary, and reports what each fault window cost the clients (requests, errors by kind,
//! p99) and whether any acknowledged write was lost, any refused one appeared, or any row
//! sits on the wrong shard.
//!
//! Defaults: seed 1, 300 s, 150 requests/s, 300 tenants, the nemesis's full plan (its short
//! plan is the stack test's minute). The figures land in a new temporary directory unless
//! `--out` names one: report.txt (printed too), report.json, run.svg, timeline.jsonl,
//! events.jsonl (every request), schedule.txt, nemesis.log and compose.log (every
//! service's log, to explain an error the run saw). Exit status: 3 when the checker found
//! anything (as loadgen's), 2 when the load could not run, 1 when the nemesis failed, 130
//! after Ctrl-C (the stack is healed, its logs kept and it is taken down first). Offline
//! machines: build the stand-in images first (docs/running.md). Not part of CI: the stack
//! test runs a one-minute version (the short plan) and fails on any finding.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use loadgen::{Config, Load, VerifyConfig};

use crate::compose::Stack;
use crate::nemesis::{self, Nemesis, Plan, Schedule};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seed of the nemesis's schedule and of the load.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds of load (and of faults).
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub duration: u64,
    /// Requests per second, open loop.
    #[arg(long, default_value_t = 150.0, value_name = "R")]
    pub rate: f64,
    /// loadgen's population (tenant-0001 … tenant-N).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub tenants: u64,
    /// Where the figures go [default: a new temporary directory].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The nemesis's plan: every kind of fault (full) or the CI minute (short).
    #[arg(long, value_enum, default_value_t = Plan::Full)]
    pub plan: Plan,
    /// nginx's port on the host.
    #[arg(long, env = "BOOKMARKS_HTTP_PORT", default_value_t = 18084)]
    pub http_port: u16,
    /// Where shard0's primary is published on loopback (for the direct read-back).
    #[arg(long, env = "BOOKMARKS_SHARD0_PORT", default_value_t = 18432)]
    pub shard0_port: u16,
    /// Where shard1's primary is published on loopback.
    #[arg(long, env = "BOOKMARKS_SHARD1_PORT", default_value_t = 18433)]
    pub shard1_port: u16,
}

/// The compose project of the run's stack.
const PROJECT: &str = "bookmarks-fault-run";

pub async fn run(args: Args) -> crate::Outcome {
    let tenants = usize::try_from(args.tenants).context("--tenants is too large")?;
    // Bad values are refused before anything starts.
    let schedule = Schedule::draw(args.seed, args.plan, Some(args.duration), tenants)?;
    let load = Config {
        tenants,
        seed: args.seed,
        load: Load::Open {
            rate: args.rate,
            max_in_flight: loadgen::cli::DEFAULT_MAX_IN_FLIGHT,
        },
        duration: Duration::from_secs(args.duration),
        ..Config::default()
    };
    load.validate().context("the load's settings")?;
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => tempfile::Builder::new()
            .prefix("fault-run.")
            .tempdir()
            .context("cannot make a temporary directory")?
            .keep(),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("--out {}", out.display()))?;
    let timeline = out.join("timeline.jsonl");
    if timeline.exists() {
        std::fs::remove_file(&timeline)
            .with_context(|| format!("cannot remove {}", timeline.display()))?;
    }
    write(&out.join("schedule.txt"), &schedule.describe())?;

    let mut stack = Stack::new(PROJECT, args.http_port).await?;
    stack.compose.add_file("compose/verify.yml");
    stack
        .compose
        .set("BOOKMARKS_SHARD0_PORT", args.shard0_port.to_string());
    stack
        .compose
        .set("BOOKMARKS_SHARD1_PORT", args.shard1_port.to_string());
    // Ctrl-C stops the load and the nemesis, which heals; the logs are kept either way.
    let interrupted = Arc::new(AtomicBool::new(false));
    let halt = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn({
        let (interrupted, halt) = (Arc::clone(&interrupted), Arc::clone(&halt));
        async move {
            nemesis::interrupt(interrupted).await;
            halt.store(true, Ordering::Relaxed);
        }
    });
    let run = Run {
        args: &args,
        out: &out,
        schedule,
        load,
        halt,
    };
    let status = run.on(&stack).await;
    watcher.abort();
    if let Err(e) = keep_logs(&stack, &out.join("compose.log")).await {
        eprintln!("fault-run: {e:#}");
    }
    drop(stack);
    let status = status?;
    println!("fault-run: figures in {}", out.display());
    if interrupted.load(Ordering::Relaxed) {
        return Ok(ExitCode::from(nemesis::INTERRUPTED));
    }
    Ok(ExitCode::from(status))
}

/// One run's settings, before its stack is up.
struct Run<'a> {
    args: &'a Args,
    out: &'a Path,
    schedule: Schedule,
    load: Config,
    /// Set by Ctrl-C or a load that could not run: the load and the nemesis stop.
    halt: Arc<AtomicBool>,
}

impl Run<'_> {
    /// Starts the stack, warms up, then the nemesis beside the verified load; the exit
    /// status.
    async fn on(self, stack: &Stack) -> Result<u8> {
        let Run {
            args,
            out,
            schedule,
            load,
            halt,
        } = self;
        tokio::select! {
            up = stack.up() => up?,
            () = halted(&halt) => bail!("interrupted while the stack started"),
        }
        // The rows are read as the schema's owner (no tenant policy holds it), whose
        // password the stack makes on its first start.
        let owner = stack.owner_password().await?;
        let shard = |name: &str, port: u16| {
            (
                name.to_owned(),
                format!("postgres://bookmarks:{owner}@127.0.0.1:{port}/bookmarks_shard"),
            )
        };
        println!(
            "fault-run: seed {}, {}s at {} requests/s over {} tenants; figures in {}",
            args.seed,
            args.duration,
            args.rate,
            args.tenants,
            out.display()
        );
        let ours = stack.load();
        let load = Config {
            base_url: ours.base_url,
            admin_token: ours.admin_token,
            stop: Some(Arc::clone(&halt)),
            ..load
        };
        // Keys first (loadgen makes one per tenant), so that the nemesis's schedule and the
        // load start together.
        let warm_up = Config {
            prefill: 2,
            duration: Duration::from_secs(5),
            ..load.clone()
        };
        loadgen::run(&warm_up)
            .await
            .context("the warm-up (keys and prefill)")?;
        if halt.load(Ordering::Relaxed) {
            bail!("interrupted during the warm-up");
        }

        let timeline = out.join("timeline.jsonl");
        let nemesis_log = create(&out.join("nemesis.log"))?;
        let nemesis = Nemesis::new(stack.compose.clone(), schedule, &timeline).log_to(nemesis_log);
        let nemesis = tokio::spawn({
            let halt = Arc::clone(&halt);
            async move { nemesis.run_until(async move { halted(&halt).await }).await }
        });
        let config = Config {
            verify: Some(VerifyConfig {
                shards: vec![
                    shard("shard0", args.shard0_port),
                    shard("shard1", args.shard1_port),
                ],
                ..VerifyConfig::default()
            }),
            timeline: Some(timeline),
            ..load
        };
        let events = create(&out.join("events.jsonl"))?;
        let report = loadgen::run_with_events(&config, Some(events)).await;
        if report.is_err() {
            // Nothing to measure any more: the nemesis heals and ends early.
            halt.store(true, Ordering::Relaxed);
        }
        let mut status = match report {
            Ok(report) => {
                write(&out.join("report.txt"), &report.table())?;
                write(&out.join("report.json"), &report.to_json())?;
                write(&out.join("run.svg"), &loadgen::plot::svg(&report))?;
                if report.total.requests > 0 && report.total.ok == 0 {
                    eprintln!(
                        "fault-run: no request succeeded; is the stack at {} up?",
                        stack.base
                    );
                }
                if report.verdict.as_ref().is_some_and(|v| !v.passed()) {
                    3
                } else {
                    0
                }
            }
            Err(e) => {
                eprintln!("fault-run: loadgen: {e}");
                2
            }
        };
        let failed = match nemesis.await {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("{e:#}")),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            eprintln!(
                "fault-run: the nemesis failed (see {}): {why}",
                out.join("nemesis.log").display()
            );
            if status == 0 {
                status = 1;
            }
        }
        if let Ok(table) = std::fs::read_to_string(out.join("report.txt")) {
            print!("{table}");
        }
        Ok(status)
    }
}

/// Completes once `flag` is set.
async fn halted(flag: &AtomicBool) {
    while !flag.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn create(path: &Path) -> Result<File> {
    File::create(path).with_context(|| format!("cannot create {}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Every service's log, with timestamps, before the stack goes.
async fn keep_logs(stack: &Stack, path: &Path) -> Result<()> {
    let file = create(path)?;
    let errors = file
        .try_clone()
        .with_context(|| format!("{}", path.display()))?;
    let mut logs = stack.compose.cmd(&["logs", "--no-color", "--timestamps"]);
    let status = logs
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(errors)
        .status()
        .await
        .context("docker compose logs")?;
    if !status.success() {
        bail!(
            "docker compose logs failed ({status}); see {}",
            path.display()
        );
    }
    Ok(())
}
