//! Where a move stands and which step may run next: the pure state machine every step,
//! `run`, `resume` and `abort` ask. No I/O here; the record's SQL is in [`super::record`].

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// Where a move stands. The happy path runs top to bottom; `Aborted` ends it anywhere
/// before `Done`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveState {
    /// Recorded; nothing touched on the shards yet.
    Planned,
    /// Capture is on and the bulk copy is running (or was killed).
    Copying,
    /// Bulk copy and catch-up done; the tenant is still written on the source.
    Copied,
    /// The source refuses the tenant's writes; the final copy and verification run.
    Fenced,
    /// Both shards hold the same rows; still fenced.
    Verified,
    /// The directory routes to the destination; the source says "departed".
    Repinned,
    /// The source rows are deleted.
    Done,
    Aborted,
}

/// The steps of a move, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    Copy,
    Verify,
    Repin,
    Delete,
}

/// Whether a step may run on a move in a given state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepCheck {
    /// The step is what the move needs next.
    Run,
    /// The move is past this step already; running it again changes nothing.
    AlreadyDone,
    /// The move is not ready for this step, or has ended without it.
    OutOfOrder,
}

impl MoveState {
    pub const ALL: [MoveState; 8] = [
        MoveState::Planned,
        MoveState::Copying,
        MoveState::Copied,
        MoveState::Fenced,
        MoveState::Verified,
        MoveState::Repinned,
        MoveState::Done,
        MoveState::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MoveState::Planned => "planned",
            MoveState::Copying => "copying",
            MoveState::Copied => "copied",
            MoveState::Fenced => "fenced",
            MoveState::Verified => "verified",
            MoveState::Repinned => "repinned",
            MoveState::Done => "done",
            MoveState::Aborted => "aborted",
        }
    }

    pub fn is_finished(self) -> bool {
        matches!(self, MoveState::Done | MoveState::Aborted)
    }

    /// The step a move in this state needs next; `None` once it has ended. This is the one
    /// place that says which step follows which: the steps, their refusals and `run` /
    /// `resume` all ask it.
    pub fn next_step(self) -> Option<Step> {
        match self {
            MoveState::Planned | MoveState::Copying => Some(Step::Copy),
            MoveState::Copied | MoveState::Fenced => Some(Step::Verify),
            MoveState::Verified => Some(Step::Repin),
            MoveState::Repinned => Some(Step::Delete),
            MoveState::Done | MoveState::Aborted => None,
        }
    }

    /// Whether `step` may run now: it is the next step, or one the move is already past
    /// (deleting a done move counts as past), or neither.
    pub fn check(self, step: Step) -> StepCheck {
        match self.next_step() {
            Some(next) if next == step => StepCheck::Run,
            Some(next) if next > step => StepCheck::AlreadyDone,
            None if self == MoveState::Done && step == Step::Delete => StepCheck::AlreadyDone,
            _ => StepCheck::OutOfOrder,
        }
    }
}

impl Step {
    pub const ALL: [Step; 4] = [Step::Copy, Step::Verify, Step::Repin, Step::Delete];

    /// The `move_slot` subcommand that runs it.
    pub fn command(self) -> &'static str {
        match self {
            Step::Copy => "copy",
            Step::Verify => "verify",
            Step::Repin => "repin",
            Step::Delete => "delete",
        }
    }

    /// The states in which it runs, in words (see [`MoveState::next_step`]).
    pub fn needs(self) -> &'static str {
        match self {
            Step::Copy => "planned or copying",
            Step::Verify => "copied",
            Step::Repin => "verified",
            Step::Delete => "re-pinned",
        }
    }

    /// What running it again on a move already past it says.
    pub fn already(self) -> &'static str {
        match self {
            Step::Copy => "already copied",
            Step::Verify => "already verified",
            Step::Repin => "already re-pinned",
            Step::Delete => "already deleted",
        }
    }
}

impl fmt::Display for MoveState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `tenant_moves.state` this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown move state {0:?}")]
pub struct UnknownMoveState(String);

impl FromStr for MoveState {
    type Err = UnknownMoveState;
    fn from_str(s: &str) -> Result<Self, UnknownMoveState> {
        MoveState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownMoveState(s.to_owned()))
    }
}

/// Whether an abort has anything to undo on the shards, or can only be refused or noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortCheck {
    AlreadyAborted,
    Refused,
    /// Nothing was touched on the shards yet.
    RecordOnly,
    /// The shards must be put back (`run`).
    Undo,
}

impl MoveState {
    /// What an abort of a move in this state must do.
    pub fn abort_check(self) -> AbortCheck {
        match self {
            MoveState::Aborted => AbortCheck::AlreadyAborted,
            MoveState::Done => AbortCheck::Refused,
            MoveState::Planned => AbortCheck::RecordOnly,
            MoveState::Copying
            | MoveState::Copied
            | MoveState::Fenced
            | MoveState::Verified
            | MoveState::Repinned => AbortCheck::Undo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_exactly_the_next_step_of_the_happy_path() {
        let expected = [
            (MoveState::Planned, Some(Step::Copy)),
            (MoveState::Copying, Some(Step::Copy)),
            (MoveState::Copied, Some(Step::Verify)),
            (MoveState::Fenced, Some(Step::Verify)),
            (MoveState::Verified, Some(Step::Repin)),
            (MoveState::Repinned, Some(Step::Delete)),
            (MoveState::Done, None),
            (MoveState::Aborted, None),
        ];
        for (state, next) in expected {
            assert_eq!(state.next_step(), next, "{state}");
        }
    }

    #[test]
    fn every_step_in_every_state_runs_is_already_done_or_is_out_of_order() {
        use StepCheck::{AlreadyDone as Past, OutOfOrder as No, Run};
        // Rows: states in order; columns: copy, verify, repin, delete.
        let table = [
            (MoveState::Planned, [Run, No, No, No]),
            (MoveState::Copying, [Run, No, No, No]),
            (MoveState::Copied, [Past, Run, No, No]),
            (MoveState::Fenced, [Past, Run, No, No]),
            (MoveState::Verified, [Past, Past, Run, No]),
            (MoveState::Repinned, [Past, Past, Past, Run]),
            (MoveState::Done, [No, No, No, Past]),
            (MoveState::Aborted, [No, No, No, No]),
        ];
        assert_eq!(table.len(), MoveState::ALL.len());
        for (state, row) in table {
            for (step, expected) in Step::ALL.into_iter().zip(row) {
                assert_eq!(state.check(step), expected, "{step:?} on a {state} move");
            }
        }
    }

    #[test]
    fn each_steps_wording_names_a_state_in_which_it_runs() {
        for step in Step::ALL {
            let runs_in: Vec<MoveState> = MoveState::ALL
                .into_iter()
                .filter(|s| s.check(step) == StepCheck::Run)
                .collect();
            let named = runs_in
                .iter()
                .any(|s| step.needs().replace('-', "").contains(s.as_str()));
            assert!(
                named,
                "{step:?} needs {:?}, runs in {runs_in:?}",
                step.needs()
            );
        }
    }

    #[test]
    fn states_read_back_from_their_names() {
        for state in MoveState::ALL {
            assert_eq!(state.as_str().parse::<MoveState>(), Ok(state));
        }
        assert!("paused".parse::<MoveState>().is_err());
    }

    #[test]
    fn an_abort_undoes_whatever_touched_the_shards_and_nothing_once_done() {
        use AbortCheck::{AlreadyAborted, RecordOnly, Refused, Undo};
        let table = [
            (MoveState::Planned, RecordOnly),
            (MoveState::Copying, Undo),
            (MoveState::Copied, Undo),
            (MoveState::Fenced, Undo),
            (MoveState::Verified, Undo),
            (MoveState::Repinned, Undo),
            (MoveState::Done, Refused),
            (MoveState::Aborted, AlreadyAborted),
        ];
        assert_eq!(table.len(), MoveState::ALL.len());
        for (state, expected) in table {
            assert_eq!(state.abort_check(), expected, "abort of a {state} move");
        }
    }

    /// What an operator or a crash can do to a move, as the driver sees it.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        /// Run this step to its end.
        Run(Step),
        /// Run this step and kill the process inside it: it leaves the state it had
        /// reached (the first of the states it passes through, or none).
        Crash(Step, bool),
        Abort,
    }

    /// The states a step records on its way, in order: copy marks `copying` first, verify
    /// marks `fenced` before `verified`.
    fn states_of(step: Step) -> &'static [MoveState] {
        match step {
            Step::Copy => &[MoveState::Copying, MoveState::Copied],
            Step::Verify => &[MoveState::Fenced, MoveState::Verified],
            Step::Repin => &[MoveState::Repinned],
            Step::Delete => &[MoveState::Done],
        }
    }

    /// The state after `op`, by the machine's own answers (check, next_step, abort_check).
    fn apply(state: MoveState, op: Op) -> MoveState {
        match op {
            Op::Run(step) | Op::Crash(step, _) if state.check(step) != StepCheck::Run => state,
            Op::Run(step) => *states_of(step).last().unwrap(),
            Op::Crash(step, reached_first) => {
                let first = states_of(step)[0];
                // A step never records a state behind the one it started from.
                if reached_first && first > state {
                    first
                } else {
                    state
                }
            }
            Op::Abort => match state.abort_check() {
                AbortCheck::Refused | AbortCheck::AlreadyAborted => state,
                AbortCheck::RecordOnly | AbortCheck::Undo => MoveState::Aborted,
            },
        }
    }

    fn any_op() -> impl Strategy<Value = Op> {
        let step = proptest::sample::select(Step::ALL.to_vec());
        prop_oneof![
            step.clone().prop_map(Op::Run),
            (step, any::<bool>()).prop_map(|(s, r)| Op::Crash(s, r)),
            Just(Op::Abort),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn under_any_sequence_of_steps_crashes_and_aborts_a_move_only_moves_forward_or_ends(
            ops in proptest::collection::vec(any_op(), 0..40)
        ) {
            let mut state = MoveState::Planned;
            for op in ops {
                let next = apply(state, op);
                // Done and Aborted are final; otherwise forward along the happy path, or
                // to Aborted, never back.
                if state.is_finished() {
                    prop_assert_eq!(next, state, "{:?} changed a finished move", op);
                } else if next != MoveState::Aborted {
                    prop_assert!(next >= state, "{:?} took {} back to {}", op, state, next);
                }
                // An abort is refused exactly when the move is done.
                if matches!(op, Op::Abort) && state == MoveState::Done {
                    prop_assert_eq!(next, MoveState::Done);
                }
                state = next;
            }
            // Resuming (running next_step until none) finishes any unfinished move, in at
            // most one run of each step.
            let mut runs = 0;
            while let Some(step) = state.next_step() {
                prop_assert_eq!(state.check(step), StepCheck::Run);
                state = apply(state, Op::Run(step));
                runs += 1;
                prop_assert!(runs <= Step::ALL.len(), "resume does not converge");
            }
            prop_assert!(state.is_finished());
        }

        #[test]
        fn a_step_the_move_is_past_or_not_ready_for_changes_nothing(
            state in proptest::sample::select(MoveState::ALL.to_vec()),
            step in proptest::sample::select(Step::ALL.to_vec()),
        ) {
            if state.check(step) != StepCheck::Run {
                prop_assert_eq!(apply(state, Op::Run(step)), state);
            } else {
                prop_assert_eq!(state.next_step(), Some(step));
            }
        }
    }
}
