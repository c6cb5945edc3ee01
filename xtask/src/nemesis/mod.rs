//! `cargo xtask nemesis`: the nemesis of the fault-injection run (`cargo xtask fault-run`,
//! docs/reliability.md). It breaks the running compose stack on a schedule drawn from a
//! seed, heals it, and writes what it did to a timeline, one JSON line per fault start and
//! end:
//!
//! ```text
//! {"unix_ms":…,"seq":3,"fault":"pause-shard","target":"postgres-shard-1","phase":"start","detail":"paused 9s"}
//! ```
//!
//! The last line is `{"fault":"nemesis","phase":"end",…}`, written once everything is
//! healed: every service running and unpaused, every move it started finished (resumed if a
//! fault stopped it), both web replicas ready. `loadgen --timeline` waits for it before
//! reading back.
//!
//! Plans ([`schedule`]):
//! - `full` (default, 300 s): one fault at a time, in a seeded order, repeated while time
//!   is left: kill -9 of a web replica, of the worker, and of a move_slot mid-move (then
//!   resume or abort, by the seed); a shard primary paused for 5-15 s; a shard primary
//!   stopped and started; the shard replica stopped; the control database stopped and
//!   started; a rolling restart of both web replicas. Beside them, every 15 s, a random
//!   tenant of loadgen's population (tenant-0001 …) moves to the other shard, and once a
//!   512-slot range moves from shard0 to shard1.
//! - `short` (60 s, CI): one web replica killed, one shard primary paused, two tenant moves.
//!
//! `--dry-run` prints the schedule and touches nothing. Otherwise it uses the compose
//! project and files of the environment (COMPOSE_PROJECT_NAME, COMPOSE_FILE), as
//! `docker compose` does; the stack must have two shards (shard0 with its replica, shard1).
//! Every wait is bounded; however it ends (Ctrl-C included), it heals the stack. The stack
//! test and the fault run call it as a library: [`Schedule::draw`], then
//! [`Nemesis::new`]`(…).run()`.

mod moves;
pub mod record;
mod runner;
pub mod schedule;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

pub use runner::{Nemesis, Summary};
pub use schedule::{Plan, Schedule};

use crate::compose::Compose;

/// The exit status of a run stopped by Ctrl-C (as a shell reports SIGINT).
pub const INTERRUPTED: u8 = 130;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to append the timeline (required unless --dry-run).
    #[arg(long, value_name = "FILE", required_unless_present = "dry_run")]
    pub timeline: Option<PathBuf>,
    /// Seed of the schedule: a seed names one run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds to break things for [default: 300 for the full plan, 60 for the short one].
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<u64>,
    /// Which faults: every kind, repeated (full), or the CI minute (short).
    #[arg(long, value_enum, default_value_t = Plan::Full)]
    pub plan: Plan,
    /// loadgen's population (tenant-0001 … tenant-N), from which moved tenants are drawn.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub tenants: u64,
    /// Print the schedule and stop; touches nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub async fn run(args: Args) -> crate::Outcome {
    let tenants = usize::try_from(args.tenants).context("--tenants is too large")?;
    let schedule = Schedule::draw(args.seed, args.plan, args.duration, tenants)?;
    if args.dry_run {
        print!("{}", schedule.describe());
        return Ok(ExitCode::SUCCESS);
    }
    let timeline = args
        .timeline
        .context("--timeline FILE is required (or --dry-run)")?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let stop = interrupt(Arc::clone(&interrupted));
    Nemesis::new(Compose::ambient(), schedule, &timeline)
        .run_until(stop)
        .await?;
    if interrupted.load(Ordering::Relaxed) {
        return Ok(ExitCode::from(INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

/// Completes on the first Ctrl-C (noting it in `interrupted`), so that the run heals and
/// ends; a second Ctrl-C ends the process at once, healed or not.
pub async fn interrupt(interrupted: Arc<AtomicBool>) {
    if tokio::signal::ctrl_c().await.is_err() {
        // No handler could be installed: Ctrl-C keeps its default, nothing to wait for.
        return std::future::pending().await;
    }
    interrupted.store(true, Ordering::Relaxed);
    eprintln!("interrupted: healing the stack (Ctrl-C again to quit at once)");
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(INTERRUPTED));
        }
    });
}
