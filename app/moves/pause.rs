//! Crash and delay injection for tests: a move stops dead at a named point when
//! `MOVE_SLOT_PAUSE_AT` names it, so a test can `kill -9` it exactly there and check that
//! `resume` and `abort` handle that moment; `POINT:DURATION` (e.g. `after-fence:1500ms`)
//! holds the move there that long and then lets it go on, so a test can act inside the
//! fence.

use std::sync::OnceLock;
use std::time::Duration;

/// Where a move can be paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePoint {
    /// Inside the bulk copy, after the first row was streamed.
    DuringCopy,
    /// The source has just fenced the tenants.
    AfterFence,
    /// The directory routes to the destination; the source rows are still there.
    AfterRepin,
}

impl PausePoint {
    pub fn name(self) -> &'static str {
        match self {
            PausePoint::DuringCopy => "during-copy",
            PausePoint::AfterFence => "after-fence",
            PausePoint::AfterRepin => "after-repin",
        }
    }
}

/// Blocks the process at `point` if `MOVE_SLOT_PAUSE_AT` names it: forever, or for the
/// duration given after a colon. Else returns at once.
pub fn pause_at(point: PausePoint) {
    static AT: OnceLock<Option<(String, Option<Duration>)>> = OnceLock::new();
    let at = AT.get_or_init(|| {
        let raw = std::env::var("MOVE_SLOT_PAUSE_AT").ok()?;
        Some(match raw.split_once(':') {
            Some((name, d)) => (name.to_owned(), humantime::parse_duration(d).ok()),
            None => (raw, None),
        })
    });
    let Some((name, hold)) = at else {
        return;
    };
    if name != point.name() {
        return;
    }
    match hold {
        Some(hold) => {
            eprintln!(
                "move_slot: paused at {} for {} ms",
                point.name(),
                hold.as_millis()
            );
            std::thread::sleep(*hold);
        }
        None => {
            eprintln!(
                "move_slot: paused at {} (pid {}); waiting to be killed",
                point.name(),
                std::process::id()
            );
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }
}
