//! The measuring harnesses behind `cargo xtask` (see `src/main.rs` for the commands), and
//! the pieces they share: [`process`] (tools, builds, paths), [`postgres`] (throwaway
//! servers), [`compose`] (stacks of their own), [`wrk`]. The nemesis is a library too: the
//! stack test runs its short plan beside its own load.

pub mod admin_screenshot;
pub mod bench;
pub mod compose;
pub mod fault_run;
pub mod fault_summary;
pub mod nemesis;
pub mod postgres;
pub mod process;
pub mod whale;
pub mod wrk;

/// What a task returns: its exit status (a benchmark that measured but missed a target,
/// or a checker that found something, exits non-zero without being an error).
pub type Outcome = anyhow::Result<std::process::ExitCode>;
