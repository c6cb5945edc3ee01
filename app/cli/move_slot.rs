//! The `move_slot` command line: the mover's operator commands, beside `bookmarks`'s own.
//! `bin/move_slot.rs` only calls [`main`]. It hands the mover the tenant tables, as the
//! other assembled commands hand the app its features.
//!
//! Exit codes: 0 success, 1 a step failed (the move's state says where it stopped),
//! 2 bad arguments or a refused step (nothing was changed). Results are JSON lines on
//! stdout; what each step did goes to stderr.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::configuration::{ConfigPath, Settings};
use crate::content::TENANT_TABLES;
use crate::moves::plan::TenantSelection;
use crate::moves::{DeletePacing, FenceOptions, MoveError, MoveRecord, Mover, Step};
use crate::sharding::SLOT_COUNT;
use crate::sharding::slot_range::SlotRanges;
use crate::tenancy::TenantId;

/// A refused step changed nothing, as bad arguments do.
const EXIT_REFUSED: u8 = super::exit::EXIT_CONFIG;

#[derive(Debug, Parser)]
#[command(
    name = "move_slot",
    version,
    about = "Move tenants between shards while they stay online: copy, verify, re-pin, delete"
)]
pub struct Cli {
    #[command(flatten)]
    pub config: ConfigPath,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what would move (tenants, rows per table on both shards, current routes); changes
    /// nothing.
    Plan(Target),
    /// Step 1: capture the tenants' writes, bulk-copy their rows, catch up. They stay writable.
    Copy(Target),
    /// Step 2: compare both shards, fence the source (writes refused), copy the last
    /// changes, compare what changed.
    Verify {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        fence: Fence,
    },
    /// Step 3: route the tenants to the destination; the source answers stale writers "departed".
    Repin(Target),
    /// Step 4: delete the tenants' rows from the source.
    Delete {
        #[command(flatten)]
        target: Target,
        /// Required: deleting is the one step that cannot be undone.
        #[arg(long, required = true)]
        confirm: bool,
        #[command(flatten)]
        grace: Grace,
    },
    /// All steps in order; without --confirm it stops after the re-pin.
    Run {
        #[command(flatten)]
        target: Target,
        /// Also delete the source rows at the end.
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        grace: Grace,
        #[command(flatten)]
        fence: Fence,
    },
    /// One JSON line per move (or just move ID).
    Status { id: Option<i64> },
    /// Finish a move from wherever it stopped (deleting only if it was started with, or
    /// resumed with, --confirm).
    Resume {
        id: i64,
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        grace: Grace,
        #[command(flatten)]
        fence: Fence,
    },
    /// Undo a move: routing as before, the source writable, the copied rows removed.
    Abort { id: i64 },
}

/// Which tenants, from where, to where.
#[derive(Debug, Args)]
pub struct Target {
    /// The shard the tenants are on (its configured name).
    #[arg(long)]
    pub from: String,
    /// The shard they go to.
    #[arg(long)]
    pub to: String,
    /// A tenant to move (repeatable).
    #[arg(
        long = "tenant",
        value_name = "KEY",
        required_unless_present_any = ["slot", "slots"],
        conflicts_with_all = ["slot", "slots"]
    )]
    pub tenants: Vec<String>,
    /// Move every tenant of this hash slot that has rows on --from (placing each by a
    /// directory row).
    #[arg(
        long,
        conflicts_with = "slots",
        value_parser = clap::value_parser!(u16).range(0..i64::from(SLOT_COUNT))
    )]
    pub slot: Option<u16>,
    /// Move slot ranges, e.g. `0-4095` or `0-99,200-299`: the live slot map gives them to
    /// --to, with every tenant it routes through them (new tenants too).
    #[arg(long, value_name = "A-B[,C-D…]", value_parser = clap::value_parser!(SlotRanges))]
    pub slots: Option<SlotRanges>,
}

/// How the delete step runs.
#[derive(Debug, Args)]
pub struct Grace {
    /// How long after the re-pin to wait before deleting, so every web replica's directory
    /// cache has expired (default: the configured directory_cache_ttl_ms), e.g. `5s`.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub grace: Option<Duration>,
    /// Rows deleted per transaction, with a pause after each three times as long as the
    /// batch took, so that the source's other tenants keep most of it; 0 deletes everything
    /// in one transaction (the fastest on an idle shard).
    #[arg(long, default_value_t = DeletePacing::default().batch_rows, value_name = "ROWS")]
    pub delete_batch: u32,
}

impl Grace {
    fn pacing(&self) -> DeletePacing {
        DeletePacing {
            batch_rows: self.delete_batch,
        }
    }
}

#[derive(Debug, Args)]
pub struct Fence {
    /// The longest the source may refuse the tenants' writes, e.g. `2s`: past it the move
    /// lifts the fence, stays on the source and says why (`resume` tries again).
    #[arg(long, value_parser = positive_duration, default_value = "10s")]
    pub max_fence: Duration,
    /// Compare every row inside the fence (one checksum per table on both shards), not only
    /// the rows changed since the comparison made ahead of it.
    #[arg(long)]
    pub full: bool,
}

/// A duration flag that cannot be used.
#[derive(Debug, thiserror::Error)]
enum DurationArgError {
    #[error("must be longer than 0 (a fence cannot last no time)")]
    Zero,
    #[error(transparent)]
    Syntax(#[from] humantime::DurationError),
}

fn positive_duration(raw: &str) -> Result<Duration, DurationArgError> {
    match humantime::parse_duration(raw)? {
        d if d.is_zero() => Err(DurationArgError::Zero),
        d => Ok(d),
    }
}

impl Fence {
    fn options(&self) -> FenceOptions {
        FenceOptions {
            max: self.max_fence,
            full: self.full,
        }
    }
}

impl Target {
    fn selection(&self) -> Result<TenantSelection, MoveError> {
        if let Some(ranges) = &self.slots {
            return Ok(TenantSelection::Ranges(ranges.clone().into_vec()));
        }
        match self.slot {
            Some(slot) => Ok(TenantSelection::Slot(slot)),
            None => {
                let mut tenants = Vec::with_capacity(self.tenants.len());
                for raw in &self.tenants {
                    let tenant =
                        TenantId::parse(raw).map_err(|reason| MoveError::InvalidTenant {
                            raw: raw.clone(),
                            reason,
                        })?;
                    if !tenants.contains(&tenant.as_str().to_owned()) {
                        tenants.push(tenant.as_str().to_owned());
                    }
                }
                Ok(TenantSelection::Tenants(tenants))
            }
        }
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    super::with_settings(&cli.config.path, |settings| {
        super::block_on(false, async {
            match run(settings, cli.command).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {}", explain(&e));
                    if e.is_refusal() {
                        ExitCode::from(EXIT_REFUSED)
                    } else {
                        ExitCode::FAILURE
                    }
                }
            }
        })
    })
}

/// What went wrong and, for a refusal, what to run instead.
pub fn explain(e: &MoveError) -> String {
    let resume_or_abort = |id: i64| {
        format!(
            "`move_slot status {id}` shows where it stands, `move_slot resume {id}` finishes \
             it, `move_slot abort {id}` undoes it"
        )
    };
    let move_back = |m: &MoveRecord| {
        format!(
            "`move_slot run --from {} --to {} {}`",
            m.to,
            m.from,
            m.selection_args()
        )
    };
    match e {
        MoveError::Busy { move_id, .. } | MoveError::SlotBusy { move_id, .. } => {
            format!("{e}: {}", resume_or_abort(*move_id))
        }
        MoveError::DifferentMove { other } => format!(
            "those tenants are in move {} ({} from {} to {}, state {}), which is a different \
             move: use `move_slot resume {0}` or `move_slot abort {0}`",
            other.id,
            other.tenants.join(", "),
            other.from,
            other.to,
            other.state
        ),
        MoveError::NoMoveFound { from, to } => format!(
            "{e}; start one with `move_slot copy --from {from} --to {to} …` (or `move_slot run`)"
        ),
        MoveError::ClaimedElsewhere { move_id } => {
            format!("{e}; wait for it, or stop it and `move_slot resume {move_id}`")
        }
        MoveError::OutOfOrder { record, step } => {
            let advice = match record.state.next_step() {
                None => format!(
                    "move {} is {}: there is nothing left to do",
                    record.id, record.state
                ),
                Some(next) => format!(
                    "its next step is `move_slot {} --from {} --to {} {}{}` (or `move_slot \
                     resume {}`)",
                    next.command(),
                    record.from,
                    record.to,
                    record.selection_args(),
                    if next == Step::Delete {
                        " --confirm"
                    } else {
                        ""
                    },
                    record.id
                ),
            };
            format!(
                "{e} and {} needs it {}; {advice}",
                step.command(),
                step.needs()
            )
        }
        MoveError::AbortAfterDone { record } => format!(
            "{e}; to undo it, move the tenants back: {}",
            move_back(record)
        ),
        MoveError::AbortAfterWrites { record } => {
            format!("{e}; move them back instead: {}", move_back(record))
        }
        _ => e.to_string(),
    }
}

fn print(record: &MoveRecord) {
    println!("{}", record.to_json());
}

async fn run(settings: &Settings, command: Command) -> Result<(), MoveError> {
    let mut mover = Mover::connect(settings, TENANT_TABLES).await?;
    let default_grace = settings.topology.directory_cache_ttl;
    match command {
        Command::Plan(target) => {
            let plans = mover
                .plan(&target.from, &target.to, &target.selection()?)
                .await?;
            for plan in &plans {
                println!("{}", plan.to_json(&target.from, &target.to));
            }
            let movable = plans.iter().filter(|p| p.blocker.is_none()).count();
            eprintln!(
                "move_slot: plan: {movable} of {} tenant(s) can move from {} to {}; nothing was changed",
                plans.len(),
                target.from,
                target.to
            );
            Ok(())
        }
        Command::Copy(target) => {
            let selection = target.selection()?;
            let mut m = match mover.find(&target.from, &target.to, &selection).await? {
                Some(m) => m,
                None => {
                    mover
                        .start(&target.from, &target.to, &selection, false)
                        .await?
                }
            };
            mover.claim(&m).await?;
            let result = mover.step(&mut m, Step::Copy, default_grace).await;
            finish(&mover, &m, result).await
        }
        Command::Verify { target, fence } => {
            mover.set_fence(fence.options());
            step(&mut mover, &target, Step::Verify, default_grace).await
        }
        Command::Repin(target) => step(&mut mover, &target, Step::Repin, default_grace).await,
        Command::Delete { target, grace, .. } => {
            mover.set_delete_pacing(grace.pacing());
            let grace = grace.grace.unwrap_or(default_grace);
            step(&mut mover, &target, Step::Delete, grace).await
        }
        Command::Run {
            target,
            confirm,
            grace,
            fence,
        } => {
            mover.set_fence(fence.options());
            mover.set_delete_pacing(grace.pacing());
            let selection = target.selection()?;
            let mut m = mover
                .start(&target.from, &target.to, &selection, confirm)
                .await?;
            mover.claim(&m).await?;
            let result = mover
                .drive(&mut m, confirm, grace.grace.unwrap_or(default_grace))
                .await;
            finish(&mover, &m, result).await
        }
        Command::Status { id } => {
            let records = match id {
                Some(id) => vec![mover.load(id).await?],
                None => mover.list().await?,
            };
            records.iter().for_each(print);
            Ok(())
        }
        Command::Resume {
            id,
            confirm,
            grace,
            fence,
        } => {
            mover.set_fence(fence.options());
            mover.set_delete_pacing(grace.pacing());
            let mut m = mover.load(id).await?;
            mover.claim(&m).await?;
            let confirm = confirm || m.confirm;
            let result = mover
                .drive(&mut m, confirm, grace.grace.unwrap_or(default_grace))
                .await;
            finish(&mover, &m, result).await
        }
        Command::Abort { id } => {
            let mut m = mover.load(id).await?;
            mover.claim(&m).await?;
            let result = mover.abort(&mut m).await;
            finish(&mover, &m, result).await
        }
    }
}

/// A step command on an existing move (only `copy` starts one).
async fn step(
    mover: &mut Mover,
    target: &Target,
    step: Step,
    grace: Duration,
) -> Result<(), MoveError> {
    let selection = target.selection()?;
    let Some(mut m) = mover.find(&target.from, &target.to, &selection).await? else {
        return Err(MoveError::NoMoveFound {
            from: target.from.clone(),
            to: target.to.clone(),
        });
    };
    mover.claim(&m).await?;
    let result = mover.step(&mut m, step, grace).await;
    finish(mover, &m, result).await
}

/// Prints the move as it now stands (and, after a slot move, the slot map advice).
async fn finish(
    mover: &Mover,
    m: &MoveRecord,
    result: Result<(), MoveError>,
) -> Result<(), MoveError> {
    print(m);
    if result.is_ok()
        && let Some(advice) = mover.slot_advice(m).await?
    {
        eprintln!("move_slot: {advice}");
    }
    result
}
