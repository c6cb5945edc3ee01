//! Deploys and a third shard under load, on a compose stack of its own: loadgen drives nginx
//! open-loop at `--rate` requests/s over `--tenants` tenants (spread over every slot) through
//! six phases, and the figures of each are printed (requests, errors by kind, p50/p99 per
//! shard, and what the checker found when it read every tenant back after the phase):
//!
//!   1. before: the steady load alone;
//!   2. worker: only the worker restarted: docker's work for one restart on these cores,
//!      with no replica of the request path touched (the floor for phase 3);
//!   3. roll:   scripts/rolling-restart.sh restarts web1, web2 and the worker;
//!   4. add:    docs/deploys.md's "Adding a shard": shard2 started and migrated, then a
//!      rolling restart with shard2 (drained) in every replica's topology;
//!   5. move:   `move_slot run --slots 3072-8191`, about a third of all tenants, onto shard2;
//!   6. after:  the steady load again, with three shards.
//!
//! Then every 5xx that nginx logged, with the upstream it tried.
//!
//! Each phase is one loadgen run while the phase's action runs beside it; the action's own
//! time is printed too. tests/stack/ runs the same steps under a lighter load and asserts
//! no request fails. Offline machines: build the stand-ins first
//! (scripts/build-offline-images.sh and scripts/build-offline-app-image.sh).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use loadgen::{Report, VerifyConfig};
use tokio::process::Command;

use crate::bench::load::{self, errors, ms, row};
use crate::compose::Stack;
use crate::process::{self, describe};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Requests per second of every phase (open loop).
    #[arg(long, env = "RATE", default_value_t = 300.0)]
    pub rate: f64,
    /// Tenant population.
    #[arg(long, env = "TENANTS", default_value_t = 300)]
    pub tenants: usize,
    /// Seconds of phases 1 and 6 (the steady load alone).
    #[arg(long, env = "STEADY", default_value_t = 20)]
    pub steady: u64,
    /// Seconds of phases 2-5: longer than their action.
    #[arg(long, env = "WINDOW", default_value_t = 60)]
    pub window: u64,
    /// Where the reports and the actions' logs go (default: a new temporary directory, kept).
    #[arg(long, env = "OUT")]
    pub out: Option<PathBuf>,
    /// The port the stack's nginx is published on.
    #[arg(long, env = "BOOKMARKS_HTTP_PORT", default_value_t = 18082)]
    pub http_port: u16,
}

pub async fn run(args: Args) -> crate::Outcome {
    let out = match &args.out {
        Some(out) => process::root().join(out),
        None => tempfile::Builder::new()
            .prefix("bench-rolling.")
            .tempdir()
            .context("creating a directory for the reports")?
            .keep(),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut stack = Stack::new("bookmarks-bench-rolling", args.http_port).await?;
    load::interruptible(measure(&mut stack, &args, &out)).await?;
    Ok(ExitCode::SUCCESS)
}

/// The phases with their actions, what was left behind, nginx's 5xx, the summary.
async fn measure(stack: &mut Stack, args: &Args, out: &Path) -> Result<()> {
    stack.up().await?;
    println!("== warm-up (tenants, prefill, 10 s unrecorded)");
    let warm_up = loadgen::Config {
        prefill: 5,
        verify: None,
        ..config(stack, args, Duration::from_secs(10))
    };
    load::run(&warm_up).await?;

    let mut reports = vec![(
        "1-before",
        recorded(stack, args, out, "1-before", args.steady).await?,
    )];
    let restart = |services: &[&str]| {
        let mut command = stack.compose.command("scripts/rolling-restart.sh");
        command.args(services);
        command
    };
    let worker = vec![restart(&["worker"])];
    reports.push((
        "2-worker",
        phase(stack, args, out, "2-worker", worker).await?,
    ));
    let roll = vec![restart(&[])];
    reports.push(("3-roll", phase(stack, args, out, "3-roll", roll).await?));

    stack.compose.add_file("compose/shard2.yml");
    let compose = &stack.compose;
    let add_shard = vec![
        compose.cmd(&[
            "up",
            "-d",
            "--wait",
            "postgres-shard-2",
            "postgres-shard-2-replica",
        ]),
        compose.cmd(&[
            "run", "--rm", "-T", "migrate", "migrate", "--shard", "shard2",
        ]),
        compose.command("scripts/rolling-restart.sh"),
    ];
    reports.push(("4-add", phase(stack, args, out, "4-add", add_shard).await?));
    let slots = "3072-8191";
    let move_slots = vec![compose.cmd(&[
        "run",
        "--rm",
        "-T",
        "move_slot",
        "run",
        "--from",
        "shard0",
        "--to",
        "shard2",
        "--slots",
        slots,
        "--confirm",
        "--grace",
        "5s",
    ])];
    reports.push((
        "5-move",
        phase(stack, args, out, "5-move", move_slots).await?,
    ));
    reports.push((
        "6-after",
        recorded(stack, args, out, "6-after", args.steady).await?,
    ));

    let left = compose
        .run(&[
            "exec",
            "-T",
            "postgres-shard-0",
            "psql",
            "-U",
            "bookmarks",
            "-d",
            "bookmarks_shard",
            "-tAc",
            "select count(*) from bookmarks where _autumn_slot(tenant_id) between 3072 and 8191",
        ])
        .await?;
    println!("left on shard0: {}", left.trim());
    let move_log = std::fs::read_to_string(out.join("5-move.log")).unwrap_or_default();
    println!("{}", move_log.trim_end().lines().last().unwrap_or_default());
    println!("nginx's 5xx answers and upstream errors, if any:");
    let nginx = compose
        .run(&["logs", "--no-log-prefix", "nginx"])
        .await
        .unwrap_or_default();
    let failures: Vec<&str> = nginx
        .lines()
        .filter(|line| is_failure(line) && !line.contains("no live upstreams"))
        .collect();
    for line in &failures[failures.len().saturating_sub(20)..] {
        println!("{line}");
    }
    let no_live = nginx
        .lines()
        .filter(|line| line.contains("no live upstreams"))
        .count();
    println!("(no live upstreams: {no_live})");

    println!(
        "== summary (RATE={} TENANTS={}, reports in {})",
        args.rate,
        args.tenants,
        out.display()
    );
    print!("{}", summary(&reports));
    Ok(())
}

/// The phases' load: `--tenants`, seed 11, `--rate`, every write checked afterwards.
fn config(stack: &Stack, args: &Args, duration: Duration) -> loadgen::Config {
    loadgen::Config {
        tenants: args.tenants,
        seed: 11,
        load: load::open(args.rate),
        duration,
        verify: Some(VerifyConfig::default()),
        ..stack.load()
    }
}

/// One recorded run of `seconds`, its report written to NAME.json.
async fn recorded(
    stack: &Stack,
    args: &Args,
    out: &Path,
    name: &str,
    seconds: u64,
) -> Result<Report> {
    let report = load::run(&config(stack, args, Duration::from_secs(seconds))).await?;
    load::save(&report, out, name, &[load::File::Json])?;
    if report.verdict.as_ref().is_some_and(|v| !v.passed()) {
        println!(
            "{name}: the checker found a lost, phantom or misplaced write (or could not read one back)"
        );
    }
    Ok(report)
}

/// The load for `--window` seconds, the action's steps starting 2 s into it.
async fn phase(
    stack: &Stack,
    args: &Args,
    out: &Path,
    name: &str,
    steps: Vec<Command>,
) -> Result<Report> {
    let action = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        timed(out, name, steps).await
    };
    let (report, ()) = tokio::try_join!(recorded(stack, args, out, name, args.window), action)?;
    Ok(report)
}

/// Runs `steps` one after the other, their output in NAME.log; prints how long they took,
/// or what they printed when one failed.
async fn timed(out: &Path, name: &str, steps: Vec<Command>) -> Result<()> {
    let path = out.join(format!("{name}.log"));
    let log = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let started = Instant::now();
    for mut step in steps {
        let status = step
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .status()
            .await
            .with_context(|| format!("cannot run {}", describe(&step)))?;
        if !status.success() {
            println!("{name} failed:");
            print!("{}", std::fs::read_to_string(&path).unwrap_or_default());
            bail!("{name}: {} exited with {status}", describe(&step));
        }
    }
    println!("{name}: {} s", started.elapsed().as_secs());
    Ok(())
}

/// Whether nginx's log line is a 5xx answer (`" 5xx ` in the access log) or an
/// `[error]`/`[crit]` of the error log.
fn is_failure(line: &str) -> bool {
    if line.contains("[error]") || line.contains("[crit]") {
        return true;
    }
    line.match_indices("\" 5").any(|(at, _)| {
        let status = line.as_bytes().get(at + 2..at + 6);
        status.is_some_and(|s| s[1].is_ascii_digit() && s[2].is_ascii_digit() && s[3] == b' ')
    })
}

/// The table of docs/deploys.md: each phase's requests, errors, latency overall and per
/// shard, and the checker's findings.
fn summary(reports: &[(&str, Report)]) -> String {
    let mut out = "| phase | requests | errors | p50 / p99 ms | shard0 p50 / p99 | shard1 p50 / p99 | shard2 p50 / p99 | writes acked | lost / phantom / misplaced |\n\
                   |---|---|---|---|---|---|---|---|---|\n"
        .to_owned();
    for (name, report) in reports {
        let total = &report.total;
        let shards: Vec<String> = ["shard0", "shard1", "shard2"]
            .iter()
            .map(|shard| {
                let r = row(&report.shards, shard);
                format!(
                    "{} / {}",
                    ms(r.and_then(|r| r.p50_ms)),
                    ms(r.and_then(|r| r.p99_ms))
                )
            })
            .collect();
        let (acked, checked) = match &report.verdict {
            Some(v) => (
                v.writes.get("acked").copied().unwrap_or(0).to_string(),
                format!("{} / {} / {}", v.lost, v.phantom, v.misplaced),
            ),
            None => ("-".to_owned(), "-".to_owned()),
        };
        out += &format!(
            "| {name} | {} | {} | {} / {} | {} | {acked} | {checked} |\n",
            total.requests,
            errors(Some(&total.errors)),
            ms(total.p50_ms),
            ms(total.p99_ms),
            shards.join(" | ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::is_failure;

    #[test]
    fn nginx_failures_are_5xx_answers_and_errors() {
        assert!(is_failure(
            r#"172.18.0.1 - - [07/Dec/2026] "GET /api/bookmarks HTTP/1.1" 502 157 "-""#
        ));
        assert!(is_failure(
            "2026/12/07 10:00:00 [error] 22#22: *1 connect() failed"
        ));
        assert!(!is_failure(
            r#"172.18.0.1 - - [07/Dec/2026] "GET /api/bookmarks HTTP/1.1" 200 57 "-""#
        ));
        assert!(!is_failure(r#""GET /x HTTP/1.1" 5"#));
    }
}
