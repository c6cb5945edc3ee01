//! The driver on the in-memory world (`io::memory`): every state × step, a crash before
//! every I/O call and at every pause point followed by a resume or an abort, and each
//! refusal, with a client writing between calls throughout (crashes in `crashes`, the
//! state table and refusals in `refusals`). What must hold is what the
//! end-to-end tests check on real Postgres: no acknowledged write is lost, a finished move
//! leaves its tenants on the destination only, an aborted one on the source only.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::context::{FenceOptions, StepContext};
use super::driver;
use super::error::MoveError;
use super::io::memory::{MemoryIo, World, configured_owner, slot_of};
use super::pause::PausePoint;
use super::progress::MoveProgress;
use super::record::MoveRecord;
use super::state::{MoveState, Step, StepCheck};
use crate::sharding::SlotRange;

mod crashes;
mod refusals;

const MOVERS: usize = 3;

/// Tenants the configuration puts on shard0: the movers, then a bystander.
fn tenants() -> Vec<String> {
    (0..)
        .map(|i| format!("tenant-{i}"))
        .filter(|t| configured_owner(slot_of(t)) == "shard0")
        .take(MOVERS + 1)
        .collect()
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Tenants,
    Range,
}

pub(super) struct Case {
    pub(super) world: Rc<RefCell<World>>,
    pub(super) m: MoveRecord,
    pub(super) movers: Vec<String>,
    pub(super) bystander: String,
}

impl Case {
    /// A move of the first tenants from shard0 to shard1 (named, or their slots as ranges),
    /// with a client writing for movers and bystander between the mover's calls.
    pub(super) fn new(kind: Kind) -> Self {
        let all = tenants();
        let names: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut world = World::new(&names, 4);
        world.keep_writing(&names);
        let movers: Vec<String> = all[..MOVERS].to_vec();
        let slots = match kind {
            Kind::Tenants => None,
            Kind::Range => Some(
                movers
                    .iter()
                    .map(|t| SlotRange::new(slot_of(t), slot_of(t)).unwrap())
                    .collect(),
            ),
        };
        let now = Utc::now();
        let m = MoveRecord {
            id: 7,
            tenants: match kind {
                Kind::Tenants => movers.clone(),
                Kind::Range => Vec::new(),
            },
            from: "shard0".to_owned(),
            to: "shard1".to_owned(),
            slot: None,
            slots,
            state: MoveState::Planned,
            confirm: true,
            previous: movers.iter().map(|t| (t.clone(), None)).collect(),
            rows_copied: 0,
            changes_applied: 0,
            rows_verified: 0,
            rows_deleted: 0,
            checksums: None,
            fence_ms: None,
            last_error: None,
            created_at: now,
            repinned_at: None,
            updated_at: now,
        };
        world.records.insert(m.id, m.clone());
        Case {
            world: Rc::new(RefCell::new(world)),
            m,
            movers,
            bystander: all[MOVERS].clone(),
        }
    }

    /// The move as the control database has it: what a restarted process starts from.
    pub(super) fn reload(&mut self) {
        self.m = self.world.borrow().records[&self.m.id].clone();
    }

    pub(super) fn io(&self) -> MemoryIo {
        MemoryIo::new(&self.world, &self.m)
    }

    /// Runs `work` as one process would, with `io`; the number of I/O calls it made.
    pub(super) async fn run(
        &mut self,
        mut io: MemoryIo,
        fence: FenceOptions,
        fenced_since: Option<Instant>,
        work: impl AsyncFnOnce(&mut StepContext<'_, MemoryIo>, &mut MoveRecord) -> Result<(), MoveError>,
    ) -> (Result<(), MoveError>, usize) {
        let progress = MoveProgress::new(format!("move {}", self.m.id));
        let mut fenced_since = fenced_since;
        let mut cx = StepContext {
            fence,
            progress: &progress,
            io: &mut io,
            fenced_since: &mut fenced_since,
        };
        let result = work(&mut cx, &mut self.m).await;
        (result, io.calls())
    }

    pub(super) async fn drive(&mut self, io: MemoryIo) -> (Result<(), MoveError>, usize) {
        self.run(io, FenceOptions::default(), None, async |cx, m| {
            driver::drive(cx, m, true, Duration::ZERO).await
        })
        .await
    }

    pub(super) async fn step(&mut self, step: Step) -> Result<(), MoveError> {
        let io = self.io();
        self.run(io, FenceOptions::default(), None, async |cx, m| {
            driver::step(cx, m, step, Duration::ZERO).await
        })
        .await
        .0
    }

    pub(super) async fn abort(&mut self) -> Result<(), MoveError> {
        let io = self.io();
        self.run(io, FenceOptions::default(), None, async |cx, m| {
            driver::abort(cx, m).await
        })
        .await
        .0
    }

    /// Finished: the movers' rows as acknowledged, on the destination only, routed there.
    pub(super) fn assert_moved(&self) {
        let w = self.world.borrow();
        for t in &self.movers {
            assert_eq!(w.route(t), "shard1", "{t} routes to the destination");
            assert_eq!(w.shard("shard1").rows_of(t), w.truth_of(t), "{t} on shard1");
            assert!(w.shard("shard0").rows_of(t).is_empty(), "{t} left shard0");
        }
        self.assert_bystander_untouched(&w);
        assert_eq!(
            w.shard("shard0").logged_changes(),
            0,
            "the change log is cleared"
        );
        assert_eq!(self.m.state, MoveState::Done);
    }

    /// Undone: the movers' rows as acknowledged, on the source only, routed there, and the
    /// source takes their writes unguarded.
    pub(super) fn assert_aborted(&self) {
        let w = self.world.borrow();
        for t in &self.movers {
            assert_eq!(w.route(t), "shard0", "{t} routes to the source again");
            assert_eq!(w.shard("shard0").rows_of(t), w.truth_of(t), "{t} on shard0");
            assert!(
                w.shard("shard1").rows_of(t).is_empty(),
                "{t} not left on shard1"
            );
        }
        assert!(!w.shard("shard0").is_guarded(), "the source is unguarded");
        assert_eq!(
            w.shard("shard0").logged_changes(),
            0,
            "the change log is cleared"
        );
        self.assert_bystander_untouched(&w);
        assert_eq!(self.m.state, MoveState::Aborted);
    }

    pub(super) fn assert_bystander_untouched(&self, w: &World) {
        let b = &self.bystander;
        assert_eq!(w.route(b), "shard0");
        assert_eq!(
            w.shard("shard0").rows_of(b),
            w.truth_of(b),
            "the bystander's rows"
        );
        assert!(w.shard("shard1").rows_of(b).is_empty());
    }

    /// Movers' rows exactly as acknowledged on the shard routing sends them to.
    pub(super) fn assert_nothing_lost(&self) {
        let w = self.world.borrow();
        for t in self.movers.iter().chain([&self.bystander]) {
            let shard = w.route(t);
            assert_eq!(w.shard(&shard).rows_of(t), w.truth_of(t), "{t} on {shard}");
        }
    }
}

pub(super) const KINDS: [Kind; 2] = [Kind::Tenants, Kind::Range];

/// A move brought to `state` the way a real one gets there.
pub(super) async fn case_in(kind: Kind, state: MoveState) -> Case {
    bring(Case::new(kind), state).await
}

/// `case` brought to `state`.
pub(super) async fn bring(mut case: Case, state: MoveState) -> Case {
    let kind = if case.m.slots.is_some() {
        Kind::Range
    } else {
        Kind::Tenants
    };
    let upto: &[Step] = match state {
        MoveState::Planned | MoveState::Copying | MoveState::Aborted => &[],
        MoveState::Copied | MoveState::Fenced => &[Step::Copy],
        MoveState::Verified => &[Step::Copy, Step::Verify],
        MoveState::Repinned => &[Step::Copy, Step::Verify, Step::Repin],
        MoveState::Done => &Step::ALL,
    };
    for &step in upto {
        case.step(step).await.unwrap();
    }
    let crash_at = match state {
        MoveState::Copying => Some(PausePoint::DuringCopy),
        MoveState::Fenced => Some(PausePoint::AfterFence),
        _ => None,
    };
    if let Some(point) = crash_at {
        let (result, _) = case.drive(case.io().crashing_at(point)).await;
        assert!(result.is_err(), "{kind:?} move crashed at {point:?}");
        case.reload();
    }
    if state == MoveState::Aborted {
        case.abort().await.unwrap();
    }
    assert_eq!(case.m.state, state);
    case
}

pub(super) fn target(step: Step) -> MoveState {
    match step {
        Step::Copy => MoveState::Copied,
        Step::Verify => MoveState::Verified,
        Step::Repin => MoveState::Repinned,
        Step::Delete => MoveState::Done,
    }
}
