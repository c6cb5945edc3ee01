//! The `bookmarks` command line (`bin/bookmarks.rs` only calls [`main`]), and `move_slot`'s
//! ([`move_slot::main`]).
//!
//! Every subcommand takes `--config PATH` (else `AUTUMN_CONFIG`, else `./autumn.toml`).
//! Exit codes: 0 success, 1 runtime failure, 2 bad configuration or arguments.

mod admin_token;
mod check_config;
mod control;
mod exit;
mod jobs;
mod keys;
mod members;
mod migrate;
pub mod move_slot;
pub mod openapi;
mod placement;
mod route;
mod serve;
mod slots;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::configuration::{ConfigError, ConfigPath, Settings};

#[derive(Debug, Parser)]
#[command(
    name = "bookmarks",
    version,
    about = "A sharded multi-tenant bookmarks service"
)]
pub struct Cli {
    #[command(flatten)]
    pub config: ConfigPath,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print where keys route: one JSON object per key. Reads the directory when directory
    /// routing is on (needs the control database; `--no-directory` does not).
    Route(route::RouteArgs),
    /// List directory rows and config pins, one JSON object per line.
    Pins,
    /// Place a tenant on a shard in the directory. Places, does not move: refuses when the
    /// tenant's rows would stay behind (see move_slot) unless --force.
    Pin(placement::PinArgs),
    /// Remove a tenant's directory row (config pin or hash decide again).
    Unpin(placement::UnpinArgs),
    /// Validate the topology and print the slot map and connection budget (and, when the
    /// control database answers, how the live slot map differs from the file).
    CheckConfig,
    /// Print the effective slot map (autumn.toml plus the live overrides range moves leave)
    /// and the autumn.toml edit that folds the overrides in; `compact` removes overrides
    /// that change nothing.
    Slots(slots::SlotsArgs),
    /// Run the HTTP server.
    Serve(serve::ServeArgs),
    /// Apply migrations: control first, then every shard in declaration order.
    Migrate(migrate::MigrateArgs),
    /// Run the background work without HTTP: a reindexer per shard and a job worker.
    Worker(jobs::WorkerArgs),
    /// Inspect and drive the job queue on the control database.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// Create, list and revoke tenants' API keys.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// List and add a tenant's members (each key acts for one, with its role).
    #[command(subcommand)]
    Members(members::MembersCommand),
    /// Print the admin token the control migrations generated for this deployment (what
    /// `ADMIN_TOKEN=generated` uses).
    AdminToken,
    /// Write the API's OpenAPI document (what `/api/openapi.json` serves). Needs no
    /// configuration.
    Openapi(openapi::OpenApiArgs),
}

pub use exit::EXIT_CONFIG;

/// Parses arguments and runs the chosen command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Route(args) => with_settings(&cli.config.path, |s| {
            // Quiet: route's own messages say what went wrong.
            block_on(false, route::run(s, &args))
        }),
        Command::Pins => with_settings(&cli.config.path, |s| block_on(false, placement::pins(s))),
        Command::Pin(args) => with_settings(&cli.config.path, |s| {
            block_on(false, placement::pin(s, args))
        }),
        Command::Unpin(args) => with_settings(&cli.config.path, |s| {
            block_on(false, placement::unpin(s, args))
        }),
        Command::CheckConfig => {
            with_settings(&cli.config.path, |s| block_on(false, check_config::run(s)))
        }
        Command::Slots(args) => {
            with_settings(&cli.config.path, |s| block_on(false, slots::run(s, args)))
        }
        Command::Serve(args) => with_settings(&cli.config.path, |s| {
            block_on(true, serve::run(s.clone(), args))
        }),
        Command::Migrate(args) => with_settings(&cli.config.path, |s| {
            block_on(true, migrate::run(s.clone(), args))
        }),
        Command::Worker(args) => with_settings(&cli.config.path, |s| {
            block_on(true, jobs::worker(s.clone(), args))
        }),
        Command::Jobs(command) => {
            with_settings(&cli.config.path, |s| block_on(false, jobs::run(s, command)))
        }
        Command::Keys(command) => {
            with_settings(&cli.config.path, |s| block_on(false, keys::run(s, command)))
        }
        Command::Members(command) => with_settings(&cli.config.path, |s| {
            block_on(false, members::run(s, command))
        }),
        Command::AdminToken => {
            with_settings(&cli.config.path, |s| block_on(false, admin_token::run(s)))
        }
        Command::Openapi(args) => openapi::run(&args),
    }
}

/// Commands that talk to databases run on a multi-threaded runtime (diesel's migration
/// harness blocks a thread while it works). `logs` turns on log output (servers and
/// migrations log; one-shot commands print their own results and errors).
fn block_on(logs: bool, work: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    if logs {
        crate::telemetry::init();
    }
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(work),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

fn with_settings(path: &std::path::Path, run: impl FnOnce(&Settings) -> ExitCode) -> ExitCode {
    match Settings::load(path) {
        Ok(settings) => run(&settings),
        Err(e) => report_config_error(&e),
    }
}

fn report_config_error(e: &ConfigError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(EXIT_CONFIG)
}
