//! `cargo xtask`: the measuring harnesses (benchmarks, the whale experiment, the nemesis
//! and the fault run). Each task's module says what it runs and prints; this file only
//! parses the command line and calls it. None of them is part of CI: run them by hand on an
//! otherwise idle machine.

use clap::{Parser, Subcommand};
use xtask::{admin_screenshot, bench, fault_run, fault_summary, nemesis, whale};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "The measuring harnesses of bookmarks-sharded (not part of CI)."
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// A benchmark: prints the figures docs/ cites.
    #[command(subcommand)]
    Bench(bench::Bench),
    /// The whale experiment of docs/load-testing.md, on a compose stack of its own.
    Whale(whale::Args),
    /// Breaks the running compose stack on a schedule drawn from a seed, then heals it.
    Nemesis(nemesis::Args),
    /// loadgen --verify under the nemesis, on a compose stack of its own.
    FaultRun(fault_run::Args),
    /// Sums up fault runs' reports as the tables of docs/reliability.md.
    FaultSummary(fault_summary::Args),
    /// Regenerates docs/admin-page.png (the stack test's screenshot of the admin page).
    AdminScreenshot,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let result = match Cli::parse().task {
        Task::Bench(bench) => bench::run(bench).await,
        Task::Whale(args) => whale::run(args).await,
        Task::Nemesis(args) => nemesis::run(args).await,
        Task::FaultRun(args) => fault_run::run(args).await,
        Task::FaultSummary(args) => fault_summary::run(args),
        Task::AdminScreenshot => admin_screenshot::run().await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
