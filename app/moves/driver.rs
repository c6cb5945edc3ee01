//! The driver: which step runs next, whether a step or an abort may run at all, and what
//! runs it. Generic over [`MoveIo`], so the same logic drives real shards (`Mover`) and
//! the in-memory world of the unit tests.

use std::time::Duration;

use super::context::StepContext;
use super::error::MoveError;
use super::io::MoveIo;
use super::progress::MoveProgress;
use super::record::{MoveRecord, MoveState, Set};
use super::state::{AbortCheck, Step, StepCheck};
use super::steps;

/// Whether `step` may run on `m` now (see [`MoveState::check`]): `Ok(false)` when it has
/// already run (said on `progress`), an error when it is out of order.
pub fn cleared(progress: &MoveProgress, m: &MoveRecord, step: Step) -> Result<bool, MoveError> {
    match m.state.check(step) {
        StepCheck::Run => Ok(true),
        StepCheck::AlreadyDone => {
            progress.step(step.already());
            Ok(false)
        }
        StepCheck::OutOfOrder => Err(MoveError::OutOfOrder {
            record: Box::new(m.clone()),
            step,
        }),
    }
}

/// Runs one step of `m`, if its state allows it. `grace` is how long `delete` waits after
/// the re-pin.
pub async fn step<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
    step: Step,
    grace: Duration,
) -> Result<(), MoveError> {
    if !cleared(cx.progress, m, step)? {
        return Ok(());
    }
    match step {
        Step::Copy => steps::copy::run(cx, m).await,
        Step::Verify => steps::verify::run(cx, m).await,
        Step::Repin => steps::repin::run(cx, m).await,
        Step::Delete => steps::delete::run(cx, m, grace).await,
    }
}

/// Undoes `m` (see `steps::abort`), or refuses to.
pub async fn abort<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
) -> Result<(), MoveError> {
    match m.state.abort_check() {
        AbortCheck::AlreadyAborted => {
            cx.progress.step("already aborted");
            Ok(())
        }
        AbortCheck::Refused => Err(MoveError::AbortAfterDone {
            record: Box::new(m.clone()),
        }),
        // Nothing on the shards to undo.
        AbortCheck::RecordOnly => {
            cx.advance(m, MoveState::Aborted, &[Set::Now("finished_at")])
                .await?;
            cx.progress
                .step("aborted: routing and data are as before the move");
            Ok(())
        }
        AbortCheck::Undo => steps::abort::run(cx, m).await,
    }
}

/// Runs the remaining steps in order: copy, verify, re-pin and, when `confirm`, delete.
pub async fn drive<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
    confirm: bool,
    grace: Duration,
) -> Result<(), MoveError> {
    while let Some(next) = m.state.next_step() {
        if next == Step::Delete && !confirm {
            cx.progress.step(&format!(
                "stopped after the re-pin; the source rows stay until you run `move_slot \
                 delete --from {} --to {} {} --confirm`",
                m.from,
                m.to,
                m.selection_args()
            ));
            return Ok(());
        }
        step(cx, m, next, grace).await?;
    }
    Ok(())
}
