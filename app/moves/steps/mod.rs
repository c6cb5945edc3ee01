//! The steps of a move, one file each, all with the same shape: `run(cx, m)` does the
//! step's work on a move that [`MoveState::check`](super::state::MoveState::check) has
//! cleared for it, idempotently, and records the state it reaches. `abort` undoes a move
//! from wherever it stopped.

pub mod abort;
pub mod copy;
pub mod delete;
pub mod repin;
pub mod routing;
pub mod verify;
