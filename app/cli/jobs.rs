//! `bookmarks worker` (the background work without HTTP) and `bookmarks jobs …` (the
//! operator's view of the job queue on the control database).

use std::process::ExitCode;

use super::control;
use super::exit::EXIT_CONFIG;
use crate::configuration::Settings;
use crate::jobs::{Job, queue};
use crate::startup::{Application, ServeOptions};
use crate::tenancy::{TenantId, TenantIdError};

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Name of this worker in logs, job rows and reindexer sessions.
    #[arg(long, env = "INSTANCE_NAME", default_value = "worker")]
    pub instance_name: String,
}

#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// Enqueue a job: `reindex_tenant TENANT` or `reindex_shard SHARD`.
    Enqueue(EnqueueArgs),
    /// The newest jobs, one JSON object per line.
    List {
        /// Only jobs in this state (queued, running, done, dead).
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Dead jobs (attempts used up), with their last error.
    Dead,
    /// Put a dead job back in the queue with fresh attempts.
    Retry { id: i64 },
}

#[derive(Debug, clap::Args)]
pub struct EnqueueArgs {
    /// reindex_tenant or reindex_shard.
    pub kind: String,
    /// The tenant (reindex_tenant) or the shard (reindex_shard).
    pub target: String,
    /// Enqueueing the same key again returns the existing job.
    #[arg(long)]
    pub key: Option<String>,
    /// Attempts before the job is dead.
    #[arg(long, default_value_t = crate::jobs::DEFAULT_MAX_ATTEMPTS, value_parser = clap::value_parser!(i32).range(1..=100))]
    pub max_attempts: i32,
}

pub async fn worker(settings: Settings, args: WorkerArgs) -> ExitCode {
    let options = ServeOptions {
        // The worker serves no HTTP; the listener only satisfies the shared constructor.
        bind: ([127, 0, 0, 1], 0).into(),
        instance_name: args.instance_name,
        ..ServeOptions::default()
    };
    match Application::build(settings, options).await {
        Ok(app) => {
            app.run_background_until(super::serve::shutdown_signal())
                .await;
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "worker startup failed");
            ExitCode::FAILURE
        }
    }
}

pub async fn run(settings: &Settings, command: JobsCommand) -> ExitCode {
    let job = match &command {
        JobsCommand::Enqueue(args) => match parse_job(settings, args) {
            Ok(job) => Some(job),
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(EXIT_CONFIG);
            }
        },
        _ => None,
    };
    let mut conn = match control::connect(&settings.topology).await {
        Ok(conn) => conn,
        Err(e) => {
            eprintln!(
                "error: cannot reach the job queue on the control database ({}): {e}",
                settings.topology.control_url
            );
            return ExitCode::FAILURE;
        }
    };
    let outcome = match command {
        JobsCommand::Enqueue(args) => {
            let job = job.expect("parsed above");
            let new = queue::NewJob {
                job: &job,
                idempotency_key: args.key.as_deref(),
                max_attempts: args.max_attempts,
            };
            queue::enqueue(&mut conn, &new).await.map(|(row, created)| {
                if !created {
                    eprintln!("note: a job with key {:?} exists already", args.key);
                }
                print_json(&row);
            })
        }
        JobsCommand::List { state, limit } => queue::list(&mut conn, state.as_deref(), limit)
            .await
            .map(|rows| rows.iter().for_each(print_json)),
        JobsCommand::Dead => queue::list(&mut conn, Some("dead"), 1000)
            .await
            .map(|rows| rows.iter().for_each(print_json)),
        JobsCommand::Retry { id } => match queue::retry(&mut conn, id).await {
            Ok(true) => {
                println!("{{\"id\":{id},\"state\":\"queued\"}}");
                Ok(())
            }
            Ok(false) => {
                eprintln!(
                    "error: job {id} is not dead (or does not exist); only dead jobs are retried"
                );
                return ExitCode::from(EXIT_CONFIG);
            }
            Err(e) => Err(e),
        },
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: the job queue query failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Checks the job's target before anything is written.
fn parse_job(settings: &Settings, args: &EnqueueArgs) -> Result<Job, EnqueueError> {
    match args.kind.as_str() {
        crate::jobs::REINDEX_TENANT => TenantId::parse(&args.target)
            .map(|tenant| Job::ReindexTenant { tenant })
            .map_err(|source| EnqueueError::Tenant {
                target: args.target.clone(),
                source,
            }),
        crate::jobs::REINDEX_SHARD => match settings.topology.shard_named(&args.target) {
            Some(_) => Ok(Job::ReindexShard {
                shard: args.target.clone(),
            }),
            None => Err(EnqueueError::NoShard {
                target: args.target.clone(),
                known: settings.topology.shard_names(),
            }),
        },
        other => Err(EnqueueError::Kind(other.to_owned())),
    }
}

/// An `enqueue` refused before anything is written; each names the argument to fix.
#[derive(Debug, thiserror::Error)]
enum EnqueueError {
    #[error("TARGET {target:?}: {source}")]
    Tenant {
        target: String,
        source: TenantIdError,
    },
    #[error("TARGET: no shard is named {target:?} (shards: {known})")]
    NoShard { target: String, known: String },
    #[error("KIND: unknown job kind {0:?} (known: reindex_tenant, reindex_shard)")]
    Kind(String),
}

fn print_json(row: &queue::JobRow) {
    println!(
        "{}",
        serde_json::to_string(row).expect("a job row serializes")
    );
}
