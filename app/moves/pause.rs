//! Crash injection for tests: a move stops dead at a named point when `MOVE_SLOT_PAUSE_AT`
//! names it, so a test can `kill -9` it exactly there and check that `resume` and `abort`
//! handle that moment.

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

/// Blocks the process forever at `point` if `MOVE_SLOT_PAUSE_AT` names it; else returns.
pub fn pause_at(point: PausePoint) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("MOVE_SLOT_PAUSE_AT").ok());
    if at.as_deref() == Some(point.name()) {
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
