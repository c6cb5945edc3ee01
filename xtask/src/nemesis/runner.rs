//! The nemesis at work: one fault at a time on the schedule's clock, tenant moves in the
//! background beside them, and the healing at the end, however the run ends (its time is
//! up, a stop was asked for, or something failed).

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::task::JoinHandle;

use super::moves::{Moved, Shared};
use super::record::{Log, Timeline};
use super::schedule::{FIRST_FAULT, Fault, FaultKind, LAST_START, Schedule};
use crate::compose::Compose;
use crate::process::{self, output, succeeds};

/// How long a restarted service (and, when healing, each web replica) may take to be ready.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// Moves running at once, at most (a move due beyond that is skipped).
const MOVES_AT_ONCE: usize = 3;
/// Every service the nemesis may stop or pause: started again when healing.
const SERVICES: [&str; 7] = [
    "postgres-control",
    "postgres-shard-0",
    "postgres-shard-0-replica",
    "postgres-shard-1",
    "web1",
    "web2",
    "worker",
];

/// A nemesis ready to run a schedule against a compose stack (two shards: shard0 with its
/// replica, shard1; web1, web2, worker, nginx).
pub struct Nemesis {
    compose: Compose,
    schedule: Schedule,
    timeline: PathBuf,
    log: Box<dyn Write + Send>,
}

/// What a finished run did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Faults started.
    pub faults: usize,
    /// Tenant moves started (the range move not counted).
    pub moves: usize,
    /// The run was stopped before its time was up.
    pub stopped: bool,
    /// Everything it logged, one line each.
    pub log: String,
}

impl Nemesis {
    /// Runs `schedule` against `compose`'s stack, appending to the timeline at `timeline`;
    /// logs to stderr unless told otherwise ([`Nemesis::log_to`]).
    pub fn new(compose: Compose, schedule: Schedule, timeline: &Path) -> Nemesis {
        Nemesis {
            compose,
            schedule,
            timeline: timeline.to_owned(),
            log: Box::new(std::io::stderr()),
        }
    }

    /// Writes the log here instead of stderr (a file; `std::io::sink()` to keep it only in
    /// the [`Summary`]).
    pub fn log_to(self, sink: impl Write + Send + 'static) -> Nemesis {
        Nemesis {
            log: Box::new(sink),
            ..self
        }
    }

    /// Runs the schedule to its end, then heals the stack and writes the timeline's last
    /// line.
    pub async fn run(self) -> Result<Summary> {
        self.run_until(std::future::pending()).await
    }

    /// [`Nemesis::run`], ending the schedule early once `stop` completes (Ctrl-C, say); the
    /// stack is healed either way. An error (the timeline could not be written) is returned
    /// after healing.
    pub async fn run_until(self, stop: impl Future<Output = ()>) -> Result<Summary> {
        let timeline = Timeline::open(&self.timeline)?;
        let headline = self.schedule.headline();
        let shared = Arc::new(Shared {
            compose: self.compose,
            timeline,
            log: Log::new(self.log),
            grace: self.schedule.move_grace,
        });
        shared
            .timeline
            .event(0, "nemesis", "stack", "start", &headline)?;
        shared.log.say(&headline);
        let mut run = Run {
            shared,
            schedule: self.schedule,
            seq: 0,
            paused: Vec::new(),
            under_way: None,
            moves: Vec::new(),
            faults_started: 0,
            moves_started: 0,
        };
        let played = tokio::select! {
            played = run.play() => played.map(|()| false),
            () = stop => Ok(true),
        };
        let stopped = matches!(played, Ok(true));
        let why = match &played {
            Ok(false) => "time is up".to_owned(),
            Ok(true) => "stopped".to_owned(),
            Err(e) => format!("failed ({e:#})"),
        };
        run.shared.log.say(&format!(
            "{why} after {}s: {} fault(s), {} tenant move(s); healing",
            run.shared.log.seconds(),
            run.faults_started,
            run.moves_started
        ));
        let healed = run.heal().await;
        played?;
        healed?;
        Ok(Summary {
            faults: run.faults_started,
            moves: run.moves_started,
            stopped,
            log: run.shared.log.text(),
        })
    }
}

/// One run's state: what it broke and has not yet mended, the moves it started.
struct Run {
    shared: Arc<Shared>,
    schedule: Schedule,
    /// The timeline's sequence number of the last fault or move started.
    seq: u64,
    /// Services paused right now.
    paused: Vec<String>,
    /// The fault under way (`seq`, kind, target): a stop meanwhile ends its window.
    under_way: Option<(u64, &'static str, String)>,
    moves: Vec<JoinHandle<()>>,
    faults_started: usize,
    moves_started: usize,
}

impl Run {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Moves start on their own clock and run in the background; faults run one after
    /// another, each waited for (a move due meanwhile starts once it has ended).
    async fn play(&mut self) -> Result<()> {
        let started = Instant::now();
        let duration = self.schedule.duration;
        let mut fault_due = FIRST_FAULT;
        let mut range_done = false;
        loop {
            let elapsed = started.elapsed().as_secs();
            if elapsed >= duration {
                return Ok(());
            }
            if let Some(m) = self.schedule.moves.get(self.moves_started)
                && m.at <= elapsed
            {
                let moved = Moved::Tenant(m.tenant.clone());
                let seq = self.next_seq();
                self.start_move(seq, moved).await?;
                self.moves_started += 1;
                continue;
            }
            if let Some(r) = &self.schedule.range_move
                && !range_done
                && r.at <= elapsed
            {
                let moved = Moved::Slots(r.slots());
                let seq = self.next_seq();
                self.start_move(seq, moved).await?;
                range_done = true;
                continue;
            }
            // A fault starts only if it can end before the run does.
            if let Some(fault) = self.schedule.faults.get(self.faults_started).cloned()
                && fault_due <= elapsed
                && duration - elapsed >= LAST_START
            {
                let seq = self.next_seq();
                self.faults_started += 1;
                self.one_fault(seq, &fault).await?;
                fault_due = started.elapsed().as_secs() + fault.gap;
                continue;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// A move in the background, from wherever the tenant routes now (a range: from
    /// shard0) to the other shard; at most [`MOVES_AT_ONCE`] at once.
    async fn start_move(&mut self, seq: u64, moved: Moved) -> Result<()> {
        let target = moved.target().to_owned();
        let skipped = |why: &str| -> Result<()> {
            self.shared
                .timeline
                .event(seq, "move", &target, "start", "")?;
            self.shared.timeline.event(seq, "move", &target, "end", why)
        };
        let running = self.moves.iter().filter(|m| !m.is_finished()).count();
        if running >= MOVES_AT_ONCE {
            return skipped("skipped: three moves running");
        }
        let from = match &moved {
            Moved::Slots(_) => "shard0".to_owned(),
            Moved::Tenant(tenant) => match self.shared.route_of(tenant).await {
                Some(shard) => shard,
                None => return skipped("skipped: no replica could route it"),
            },
        };
        let shared = Arc::clone(&self.shared);
        self.moves.push(tokio::spawn(async move {
            let to = super::moves::other_shard(&from);
            shared.run_move(seq, moved, from.clone(), to).await;
        }));
        Ok(())
    }

    /// One fault, from its start line to its end line.
    async fn one_fault(&mut self, seq: u64, fault: &Fault) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let (kind, target) = (fault.kind.name(), fault.target.as_str());
        let what = fault.what();
        shared.timeline.event(seq, kind, target, "start", &what)?;
        shared.log.say(&format!("{kind} {target} ({what})"));
        self.under_way = Some((seq, kind, target.to_owned()));
        let ended = self.break_and_mend(seq, fault).await;
        self.under_way = None;
        ended
    }

    /// What a fault does, to its end line.
    async fn break_and_mend(&mut self, seq: u64, fault: &Fault) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let compose = &shared.compose;
        let (kind, target) = (fault.kind.name(), fault.target.as_str());
        let lasting = Duration::from_secs(fault.seconds);
        match fault.kind {
            FaultKind::KillWeb | FaultKind::KillWorker => {
                let before = compose.address_of(target).await;
                compose.try_run(&["kill", "-s", "SIGKILL", target]).await;
                tokio::time::sleep(lasting).await;
                self.restart_app(target, &before).await;
            }
            FaultKind::KillMove => {
                let then = fault.then.unwrap_or(super::schedule::AfterKill::Resume);
                return shared.kill_move(seq, target, fault.seconds, then).await;
            }
            FaultKind::PauseShard => {
                // Noted before it is paused: a stop meanwhile must still unpause it.
                self.paused.push(target.to_owned());
                compose.try_run(&["pause", target]).await;
                tokio::time::sleep(lasting).await;
                if compose.try_run(&["unpause", target]).await {
                    self.paused.retain(|p| p != target);
                }
            }
            FaultKind::RestartShard | FaultKind::StopReplica | FaultKind::RestartControl => {
                compose.try_run(&["stop", "-t", "5", target]).await;
                tokio::time::sleep(lasting).await;
                compose.try_run(&["start", target]).await;
            }
            FaultKind::Roll => {
                let script = process::root().join("scripts/rolling-restart.sh");
                let mut roll = compose.command(&script.to_string_lossy());
                if !succeeds(roll.args(["web1", "web2"])).await {
                    shared.log.say("the rolling restart failed");
                }
            }
        }
        shared.timeline.event(seq, kind, target, "end", "")
    }

    /// A killed app service started again and waited for; nginx told if a web replica came
    /// back at another address (it resolved the names when it started).
    async fn restart_app(&self, service: &str, before: &str) {
        let compose = &self.shared.compose;
        let log = &self.shared.log;
        compose.try_run(&["start", service]).await;
        if !compose.wait_ready(service, READY_WITHIN).await {
            log.say(&format!(
                "{service} not ready after {} s",
                READY_WITHIN.as_secs()
            ));
        }
        if service == "worker" {
            return;
        }
        let after = compose.address_of(service).await;
        if after != before {
            log.say(&format!(
                "{service} has a new address ({before} -> {after}): reloading nginx"
            ));
            if let Err(e) = compose
                .run(&["exec", "-T", "nginx", "nginx", "-s", "reload"])
                .await
            {
                log.say(&format!("{e:#}"));
            }
        }
    }

    /// Everything running and unpaused, every move finished, both web replicas ready;
    /// then the timeline's last line.
    async fn heal(&mut self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let (compose, log) = (&shared.compose, &shared.log);
        if let Some((seq, kind, target)) = self.under_way.take() {
            shared
                .timeline
                .event(seq, kind, &target, "end", "stopped midway; healed below")?;
        }
        for service in std::mem::take(&mut self.paused) {
            compose.try_run(&["unpause", &service]).await;
        }
        let mut start = vec!["start"];
        start.extend(SERVICES);
        compose.try_run(&start).await;
        let filter = format!("name={}", shared.kill_move_prefix());
        let killed = output(
            compose
                .command("docker")
                .args(["ps", "-aq", "--filter", &filter]),
        )
        .await;
        let killed: Vec<String> = killed
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if !killed.is_empty() {
            succeeds(compose.command("docker").args(["rm", "-f"]).args(&killed)).await;
        }
        for running in std::mem::take(&mut self.moves) {
            if let Err(e) = running.await {
                log.say(&format!("a move's task ended badly: {e}"));
            }
        }
        for (id, _) in shared.unfinished_moves().await {
            log.say(&format!("move {id} was left unfinished: resuming it"));
            if !shared.finish_move(&id).await {
                log.say(&format!("move {id} could not be finished"));
            }
        }
        if !(compose.wait_ready("web1", READY_WITHIN).await
            && compose.wait_ready("web2", READY_WITHIN).await)
        {
            log.say("a web replica is not ready after healing");
        }
        let seq = self.next_seq();
        shared
            .timeline
            .event(seq, "nemesis", "stack", "end", "healed")?;
        log.say(&format!(
            "healed; the timeline is in {}",
            shared.timeline.path().display()
        ));
        Ok(())
    }
}
