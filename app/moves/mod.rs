//! Online tenant moves between shards: the resharding runbook (copy, verify, re-pin,
//! delete) as one durable, resumable state machine, safe while the tenant is live.
//!
//! How no acknowledged write is lost or left behind:
//! - Every write to a tenant table passes the shard's tenant guard (a trigger, see the shard
//!   migration `create_tenant_guard`), in the writer's own transaction. A guard row per moving
//!   tenant says `capturing` (writes pass and their keys are logged), `fenced` (refused),
//!   `departed` (refused, naming the new shard) or `incoming` (only the mover writes).
//! - Guard changes wait for the tenant's in-flight writes and hold off new ones (a per-tenant
//!   advisory lock the trigger takes shared), so a write either lands before a change, and
//!   is seen by the next copy, or after it, and obeys it.
//! - Copy: capture on, then a bulk `COPY` from one snapshot, then catch-up rounds that
//!   re-copy logged keys ([`transfer`]). Verify: compare per-table row counts and checksums
//!   of a source snapshot with the destination while writes go on (rows with uncopied
//!   changes left out), fence, drain the log, then compare only the rows changed since the
//!   snapshot ([`checksum`]), so the fence does not grow with the tenant. Re-pin: the
//!   directory says "destination", the
//!   source says "departed". Delete: only after every process's directory cache has had
//!   time to expire. One file per step under `steps/`; [`state`] says which step may run
//!   in which state.
//!
//! A routing cache therefore only decides where a write is *tried*: the source refuses it
//! from the fence on, whoever sent it. Web replicas hide the refusals from clients: a
//! refused write waits for the fence to lift and is sent again (`sharding::move_wait`).
//!
//! Range moves (`--slots`) run the same steps over slot ranges instead of named tenants
//! ([`scope`]): the source's slot guard ([`slot_guard`]) captures, fences and finally refuses every
//! key of the ranges (new tenants included), under one table lock rather than a lock per tenant,
//! and the flip is one entry in the live slot map. Moves are rows in the control database's
//! `tenant_moves`; every step is idempotent, so a killed move is resumed or aborted. This module
//! knows tables only as [`TenantTable`](crate::sharding::tenant_rows::TenantTable)s.

pub mod checksum;
mod conn;
mod context;
pub mod driver;
#[cfg(test)]
mod driver_tests;
pub mod error;
pub mod io;
pub mod mover;
pub mod pause;
pub mod plan;
pub mod progress;
pub mod record;
pub mod scope;
pub mod slot_guard;
pub mod state;
mod steps;
pub mod tenant_guard;
pub mod transfer;

pub use context::FenceOptions;
pub use error::MoveError;
pub use mover::Mover;
pub use record::MoveRecord;
pub use state::{MoveState, Step};
pub use transfer::DeletePacing;
