//! The nemesis's schedule, drawn from a seed before anything runs, so that a seed names one
//! run (`cargo xtask nemesis --dry-run` prints it). Pure: nothing here touches the stack.
//!
//! The draws come from ChaCha8 seeded with the seed, whose stream does not change between
//! versions of the crate; they are made in a fixed order (faults, then tenant moves, then
//! the range move, then the gaps between faults), so adding a draw at the end leaves the
//! earlier ones alone.

use std::fmt::Write as _;

use anyhow::{Result, bail};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A fault starts only with at least this many seconds of the run left, so that it ends
/// before the run does (a roll takes the longest).
pub const LAST_START: u64 = 25;
/// The first fault starts this many seconds in, once the load has settled.
pub const FIRST_FAULT: u64 = 8;
/// Slots in the range move (one of the 15 aligned ranges from shard0's part of the map).
pub const RANGE_SLOTS: u32 = 512;

/// Which faults, how many and how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Plan {
    /// One fault at a time, in a seeded order, repeated while time is left; a tenant move
    /// every 15 s and one 512-slot range move (300 s by default).
    Full,
    /// One web replica killed, one shard primary paused, two tenant moves (60 s, CI).
    Short,
}

impl Plan {
    pub fn name(self) -> &'static str {
        match self {
            Plan::Full => "full",
            Plan::Short => "short",
        }
    }

    /// How long the plan runs when no duration is given.
    pub fn default_duration(self) -> u64 {
        match self {
            Plan::Full => 300,
            Plan::Short => 60,
        }
    }
}

/// What one fault breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `kill -9` of a web replica, started again after a few seconds.
    KillWeb,
    /// `kill -9` of the worker, started again after a few seconds.
    KillWorker,
    /// A tenant's `move_slot run` killed a few seconds in, then resumed or aborted.
    KillMove,
    /// A shard primary paused (`docker compose pause`).
    PauseShard,
    /// A shard primary stopped and started again.
    RestartShard,
    /// shard0's streaming replica stopped and started again.
    StopReplica,
    /// The control database stopped and started again.
    RestartControl,
    /// `scripts/rolling-restart.sh web1 web2`.
    Roll,
}

impl FaultKind {
    /// Every kind, in the order the full plan shuffles.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::KillWeb,
        FaultKind::KillWorker,
        FaultKind::KillMove,
        FaultKind::PauseShard,
        FaultKind::RestartShard,
        FaultKind::StopReplica,
        FaultKind::RestartControl,
        FaultKind::Roll,
    ];

    /// The name in the timeline (loadgen's fault windows are named by it).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillWeb => "kill-web",
            FaultKind::KillWorker => "kill-worker",
            FaultKind::KillMove => "kill-move",
            FaultKind::PauseShard => "pause-shard",
            FaultKind::RestartShard => "restart-shard",
            FaultKind::StopReplica => "stop-replica",
            FaultKind::RestartControl => "restart-control",
            FaultKind::Roll => "roll",
        }
    }
}

/// What follows a killed move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterKill {
    Resume,
    Abort,
}

impl AfterKill {
    pub fn name(self) -> &'static str {
        match self {
            AfterKill::Resume => "resume",
            AfterKill::Abort => "abort",
        }
    }
}

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    /// A service (`web1`, `postgres-shard-0`), a tenant (a killed move) or `web1,web2`.
    pub target: String,
    /// How long the target is down, paused or stopped; a killed move's time before the
    /// kill; 0 for a roll.
    pub seconds: u64,
    /// A killed move's fate (`None` for the other kinds).
    pub then: Option<AfterKill>,
    /// Seconds after this fault ends before the next may start.
    pub gap: u64,
}

impl Fault {
    /// The schedule's third column: seconds, `DELAY:ACTION` for a killed move.
    pub fn param(&self) -> String {
        match self.then {
            Some(action) => format!("{}:{}", self.seconds, action.name()),
            None => self.seconds.to_string(),
        }
    }

    /// The timeline's detail of the fault's start (`down 3s`, `paused 9s`).
    pub fn what(&self) -> String {
        let s = self.seconds;
        match self.kind {
            FaultKind::KillWeb | FaultKind::KillWorker => format!("down {s}s"),
            FaultKind::PauseShard => format!("paused {s}s"),
            FaultKind::RestartShard | FaultKind::StopReplica | FaultKind::RestartControl => {
                format!("stopped {s}s")
            }
            FaultKind::KillMove => format!(
                "killed {s}s in, then {}",
                self.then.unwrap_or(AfterKill::Resume).name()
            ),
            FaultKind::Roll => "web1, then web2".to_owned(),
        }
    }
}

/// A tenant moved to the other shard, `at` seconds into the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantMove {
    pub at: u64,
    pub tenant: String,
}

/// A range of [`RANGE_SLOTS`] slots moved from shard0 to shard1, `at` seconds in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeMove {
    pub at: u64,
    pub first: u32,
}

impl RangeMove {
    /// `FIRST-LAST`, as `move_slot --slots` takes it.
    pub fn slots(&self) -> String {
        format!("{}-{}", self.first, self.first + RANGE_SLOTS - 1)
    }
}

/// Everything the nemesis will do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub seed: u64,
    pub plan: Plan,
    /// Seconds; no fault starts later than [`LAST_START`] before the end.
    pub duration: u64,
    /// loadgen's population (`tenant-0001` …), from which moved tenants are drawn.
    pub tenants: usize,
    /// In the order they run; those that do not fit the time are left out.
    pub faults: Vec<Fault>,
    pub moves: Vec<TenantMove>,
    pub range_move: Option<RangeMove>,
    /// `move_slot --grace` (the short plan's moves may not wait the default 30 s).
    pub move_grace: Option<&'static str>,
}

/// The seeded draws, named as the schedule uses them.
struct Draw(ChaCha8Rng);

impl Draw {
    /// 0 … n-1.
    fn pick(&mut self, n: usize) -> usize {
        self.0.random_range(0..n)
    }

    /// a … b.
    fn between(&mut self, a: u64, b: u64) -> u64 {
        self.0.random_range(a..=b)
    }

    /// One of loadgen's tenants.
    fn tenant(&mut self, tenants: usize) -> String {
        format!("tenant-{:04}", self.pick(tenants) + 1)
    }

    fn fault(&mut self, kind: FaultKind, target: String, seconds: u64) -> Fault {
        Fault {
            kind,
            target,
            seconds,
            then: None,
            gap: 0,
        }
    }
}

impl Schedule {
    /// The schedule of `seed`: `duration` defaults to the plan's.
    pub fn draw(seed: u64, plan: Plan, duration: Option<u64>, tenants: usize) -> Result<Schedule> {
        if tenants == 0 {
            bail!("--tenants must be at least 1");
        }
        let duration = duration.unwrap_or(plan.default_duration());
        let mut draw = Draw(ChaCha8Rng::seed_from_u64(seed));
        let mut faults = Vec::new();
        let mut moves = Vec::new();
        let mut range_move = None;
        let (gap_min, gap_max, move_grace) = match plan {
            Plan::Short => {
                let web = format!("web{}", draw.pick(2) + 1);
                faults.push(draw.fault(FaultKind::KillWeb, web, 3));
                let shard = format!("postgres-shard-{}", draw.pick(2));
                faults.push(draw.fault(FaultKind::PauseShard, shard, 6));
                for at in [12, 30] {
                    let tenant = draw.tenant(tenants);
                    moves.push(TenantMove { at, tenant });
                }
                (6, 10, Some("5s"))
            }
            Plan::Full => {
                // A seeded shuffle (Fisher-Yates), then the kinds again in the same order
                // while time lasts.
                let mut kinds = FaultKind::ALL;
                for i in (1..kinds.len()).rev() {
                    let j = draw.pick(i + 1);
                    kinds.swap(i, j);
                }
                for _ in 0..3 {
                    for kind in kinds {
                        faults.push(full_fault(&mut draw, kind, tenants));
                    }
                }
                let mut at = 15;
                while at + 20 <= duration {
                    let tenant = draw.tenant(tenants);
                    moves.push(TenantMove { at, tenant });
                    at += 15;
                }
                let first = RANGE_SLOTS * draw.pick(15) as u32;
                let at = draw.between(duration / 3, duration / 2);
                range_move = Some(RangeMove { at, first });
                (5, 12, None)
            }
        };
        for fault in &mut faults {
            fault.gap = draw.between(gap_min, gap_max);
        }
        Ok(Schedule {
            seed,
            plan,
            duration,
            tenants,
            faults,
            moves,
            range_move,
            move_grace,
        })
    }

    /// The schedule as `--dry-run` prints it, one line per fault and move.
    pub fn describe(&self) -> String {
        let mut text = format!("{}\n", self.headline());
        for f in &self.faults {
            let _ = writeln!(
                text,
                "fault: {} {} {} (then {}s)",
                f.kind.name(),
                f.target,
                f.param(),
                f.gap
            );
        }
        for m in &self.moves {
            let _ = writeln!(text, "move at {}s: {}", m.at, m.tenant);
        }
        if let Some(r) = &self.range_move {
            let _ = writeln!(text, "range move at {}s: slots {}", r.at, r.slots());
        }
        text
    }

    /// `seed 1, plan full, 300s`: the timeline's first line and the log's.
    pub fn headline(&self) -> String {
        format!(
            "seed {}, plan {}, {}s",
            self.seed,
            self.plan.name(),
            self.duration
        )
    }
}

/// One fault of the full plan, its target and length drawn in the order of the kind.
fn full_fault(draw: &mut Draw, kind: FaultKind, tenants: usize) -> Fault {
    match kind {
        FaultKind::KillWeb => {
            let web = format!("web{}", draw.pick(2) + 1);
            let down = draw.between(2, 5);
            draw.fault(kind, web, down)
        }
        FaultKind::KillWorker => {
            let down = draw.between(2, 5);
            draw.fault(kind, "worker".into(), down)
        }
        FaultKind::KillMove => {
            let then = if draw.pick(2) == 1 {
                AfterKill::Abort
            } else {
                AfterKill::Resume
            };
            let tenant = draw.tenant(tenants);
            let delay = draw.between(1, 4);
            Fault {
                then: Some(then),
                ..draw.fault(kind, tenant, delay)
            }
        }
        FaultKind::PauseShard => {
            let shard = format!("postgres-shard-{}", draw.pick(2));
            let paused = draw.between(5, 15);
            draw.fault(kind, shard, paused)
        }
        FaultKind::RestartShard => {
            let shard = format!("postgres-shard-{}", draw.pick(2));
            let stopped = draw.between(5, 10);
            draw.fault(kind, shard, stopped)
        }
        FaultKind::StopReplica => {
            let stopped = draw.between(10, 20);
            draw.fault(kind, "postgres-shard-0-replica".into(), stopped)
        }
        FaultKind::RestartControl => {
            let stopped = draw.between(5, 10);
            draw.fault(kind, "postgres-control".into(), stopped)
        }
        FaultKind::Roll => draw.fault(kind, "web1,web2".into(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(seed: u64, plan: Plan) -> Schedule {
        Schedule::draw(seed, plan, None, 300).unwrap()
    }

    #[test]
    fn the_same_seed_draws_the_same_schedule() {
        for plan in [Plan::Full, Plan::Short] {
            assert_eq!(draw(7, plan), draw(7, plan));
            assert_eq!(draw(7, plan).describe(), draw(7, plan).describe());
        }
        assert_ne!(draw(1, Plan::Full), draw(2, Plan::Full));
    }

    #[test]
    fn the_short_plan_kills_a_web_replica_pauses_a_shard_and_moves_two_tenants() {
        for seed in 0..50 {
            let s = Schedule::draw(seed, Plan::Short, None, 60).unwrap();
            assert_eq!(s.duration, 60);
            let kinds: Vec<_> = s.faults.iter().map(|f| (f.kind, f.seconds)).collect();
            assert_eq!(kinds, [(FaultKind::KillWeb, 3), (FaultKind::PauseShard, 6)]);
            assert!(["web1", "web2"].contains(&s.faults[0].target.as_str()));
            assert!(
                ["postgres-shard-0", "postgres-shard-1"].contains(&s.faults[1].target.as_str())
            );
            assert!(s.faults.iter().all(|f| (6..=10).contains(&f.gap)));
            let at: Vec<u64> = s.moves.iter().map(|m| m.at).collect();
            assert_eq!(at, [12, 30]);
            assert_eq!(s.range_move, None);
            assert_eq!(s.move_grace, Some("5s"));
        }
    }

    #[test]
    fn the_full_plan_repeats_one_shuffled_order_of_every_kind() {
        let s = draw(3, Plan::Full);
        assert_eq!(s.faults.len(), 3 * FaultKind::ALL.len());
        let round: Vec<_> = s.faults[..8].iter().map(|f| f.kind).collect();
        for kind in FaultKind::ALL {
            assert!(round.contains(&kind), "{kind:?} in {round:?}");
        }
        for (i, fault) in s.faults.iter().enumerate() {
            assert_eq!(fault.kind, round[i % 8]);
            assert!((5..=12).contains(&fault.gap));
        }
        let at: Vec<u64> = s.moves.iter().map(|m| m.at).collect();
        assert_eq!(at, (1..=18).map(|i| 15 * i).collect::<Vec<_>>());
        let range = s.range_move.unwrap();
        assert!((100..=150).contains(&range.at));
        assert_eq!(range.first % RANGE_SLOTS, 0);
        assert!(range.first < 15 * RANGE_SLOTS);
        assert_eq!(s.move_grace, None);
    }

    #[test]
    fn every_fault_fits_the_time_left_when_it_may_start() {
        for seed in 0..200 {
            for (plan, duration) in [
                (Plan::Full, None),
                (Plan::Full, Some(90)),
                (Plan::Short, None),
            ] {
                let s = Schedule::draw(seed, plan, duration, 40).unwrap();
                for f in &s.faults {
                    assert!(f.seconds < LAST_START, "seed {seed}: {f:?}");
                }
                for m in &s.moves {
                    let n: usize = m.tenant["tenant-".len()..].parse().unwrap();
                    assert!((1..=40).contains(&n), "{}", m.tenant);
                    assert!(m.at < s.duration, "seed {seed}: {m:?}");
                }
                if let Some(r) = &s.range_move {
                    assert!(r.at <= s.duration / 2);
                }
            }
        }
    }

    #[test]
    fn the_dry_run_prints_one_line_per_fault_and_move() {
        let s = Schedule::draw(1, Plan::Short, None, 60).unwrap();
        let text = s.describe();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "seed 1, plan short, 60s");
        assert!(lines[1].starts_with("fault: kill-web web"), "{text}");
        assert!(lines[1].contains(" 3 (then "), "{text}");
        assert!(
            lines[2].starts_with("fault: pause-shard postgres-shard-"),
            "{text}"
        );
        assert!(lines[3].starts_with("move at 12s: tenant-00"), "{text}");
        assert!(lines[4].starts_with("move at 30s: tenant-00"), "{text}");
        assert_eq!(lines.len(), 5);
        let killed = Fault {
            kind: FaultKind::KillMove,
            target: "tenant-0001".into(),
            seconds: 2,
            then: Some(AfterKill::Abort),
            gap: 5,
        };
        assert_eq!(killed.param(), "2:abort");
        assert_eq!(killed.what(), "killed 2s in, then abort");
    }

    #[test]
    fn no_tenants_is_refused() {
        assert!(Schedule::draw(1, Plan::Short, None, 0).is_err());
    }
}
