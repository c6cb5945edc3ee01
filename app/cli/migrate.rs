//! `bookmarks migrate [--shard NAME | --control-only]` and `bookmarks migrate status`.

use std::process::ExitCode;

use crate::configuration::Settings;
use crate::migrate::{self, TargetFilter};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MigrateArgs {
    #[command(subcommand)]
    pub action: Option<MigrateAction>,
    /// Only this shard.
    #[arg(long, conflicts_with = "control_only")]
    pub shard: Option<String>,
    /// Only the control database.
    #[arg(long)]
    pub control_only: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum MigrateAction {
    /// Print a per-target table of applied and pending migrations.
    Status {
        #[arg(long, conflicts_with = "control_only")]
        shard: Option<String>,
        #[arg(long)]
        control_only: bool,
    },
}

pub async fn run(settings: Settings, args: MigrateArgs) -> ExitCode {
    let (selection, status) = match args.action {
        Some(MigrateAction::Status {
            shard,
            control_only,
        }) => (
            TargetFilter {
                shard,
                control_only,
            },
            true,
        ),
        None => (
            TargetFilter {
                shard: args.shard,
                control_only: args.control_only,
            },
            false,
        ),
    };
    let targets = match migrate::targets(&settings.topology, &selection) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::exit::EXIT_CONFIG);
        }
    };
    if status {
        match migrate::status(&targets).await {
            Ok(rows) => {
                println!(
                    "{:<16} {:>7} {:>7}  pending",
                    "target", "applied", "pending"
                );
                for r in rows {
                    println!(
                        "{:<16} {:>7} {:>7}  {}",
                        r.target,
                        r.applied.len(),
                        r.pending.len(),
                        r.pending.join(", ")
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    } else {
        match migrate::run(&targets).await {
            Ok(report) => {
                if targets.iter().any(|t| t.kind == migrate::Kind::Control)
                    && let Err(e) = migrate::record_known_shards(&settings.topology).await
                {
                    tracing::warn!(target = "control", error = %e, "could not record known shards");
                }
                for (target, applied) in report {
                    println!("{target}: {} applied", applied.len());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
