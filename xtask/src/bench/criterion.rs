//! The data-moving benchmarks are harnesses under benches/ (they link the app's mover and
//! start Postgres in Docker with testcontainers); this runs one with `cargo bench`, on the
//! stand-in Postgres image when the machine has no registry. Their knobs are environment
//! variables (`BENCH_ROWS`, …), documented at the top of each file.

use std::process::ExitCode;

use crate::process::{self, succeeds};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Passed on to the harness (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// `cargo bench --bench NAME`, its exit status passed on.
pub async fn run(name: &str, args: Args) -> crate::Outcome {
    let mut command = process::command(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.args(["bench", "--locked", "--bench", name]);
    if !args.rest.is_empty() {
        command.arg("--").args(&args.rest);
    }
    if std::env::var_os("BOOKMARKS_POSTGRES_IMAGE").is_none()
        && succeeds(process::command("docker").args([
            "image",
            "inspect",
            "bookmarks-offline/postgres:15",
        ]))
        .await
    {
        command.env("BOOKMARKS_POSTGRES_IMAGE", "bookmarks-offline/postgres:15");
    }
    let status = command.status().await?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
