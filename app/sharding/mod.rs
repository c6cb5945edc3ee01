//! The sharding layer: how a routing key finds its Postgres shard.
//!
//! `key ──hash──▶ slot (0..16384) ──slot map──▶ shard`. The hash is a permanent contract
//! ([`slot`]); the slot map is configuration ([`topology`]); pools live in [`shard_set`];
//! [`router`] decides per key, so pinned tenants can bypass the hash, and [`directory`]
//! adds runtime placement from the control database in front of both.
//! Nothing here knows what a bookmark is.

pub mod access;
pub mod breaker;
pub mod cross_shard;
pub mod db_url;
pub mod directory;
pub mod guarded;
pub mod health;
pub mod replicas;
pub mod router;
pub mod shard_name;
pub mod shard_set;
pub mod slot;
pub mod slot_range;
pub mod tenant_rows;
pub mod topology;

pub use db_url::DbUrl;
pub use directory::DirectoryRouter;
pub use router::{HashRouter, PinRouter, Route, RouteError, RouteVia, ShardRouter};
pub use shard_name::ShardName;
pub use shard_set::{Shard, ShardId, ShardSet};
pub use slot::{SLOT_COUNT, ShardKey, Slot};
pub use slot_range::SlotRange;
pub use topology::{ReplicaFallback, ShardSpec, Topology};
