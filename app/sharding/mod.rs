//! The sharding layer: how a routing key finds its Postgres shard.
//!
//! `key ──hash──▶ slot (0..16384) ──slot map──▶ shard`. Read bottom-up, each module uses only those
//! above it in this list:
//! - [`slot`] and [`slot_range`]: the hash, a permanent contract, and slot ranges;
//! - [`shard_name`], [`topology`]: configuration, validated on construction;
//! - [`move_wait`]: how a write refused by a move's fence waits for it to lift;
//! - [`row_security`]: the role shard connections act as and the
//!   [`RowScope`](row_security::RowScope) each checkout declares, which the shards'
//!   row-level security policies enforce;
//! - [`slot_map`]: the live slot map, `autumn.toml`'s slots with the control database's
//!   overrides (range moves) on top;
//! - [`shard_set`]: the configured shards ([`Shard`]: one shard's pools and breakers;
//!   [`ShardSet`]: all of them and the slot map);
//! - [`router`]: the routing contract ([`Route`], [`ShardRouter`]), hash routing and config
//!   pins; [`directory`] puts runtime placement from the control database in front of both;
//! - [`replicas`], [`health`]: replica readiness and the probes behind it;
//! - [`access`]: [`Shards`](access::Shards), what handlers and jobs reach shards through
//!   (a router, the shard set and replica readiness together), and [`cross_shard`] for
//!   tenant-free fan-out;
//! - [`session`]: a tenant's [`TenantSession`](session::TenantSession) with its shard, how
//!   every caller's statements reach it: checkout, deadlines, waiting out a move's fence,
//!   following a departed tenant.
//!
//! The generic Postgres plumbing every shard's servers use (pools, circuit breakers, statement
//! deadlines, URLs, LISTEN sessions, probes) lives a layer below, in [`crate::pg`]. Nothing here
//! knows what a bookmark is: tools that copy or count a tenant's rows get its tables as
//! [`tenant_rows::TenantTable`]s.
//!
//! Why `_autumn_`: the sharding framework's own tables (`_autumn_shard_directory` and
//! `_autumn_slot_map` on the control database, `_autumn_tenant_guard`, `_autumn_slot_guard`,
//! `_autumn_placed_tenants` and `_autumn_move_changes` on every shard)
//! share databases with the application's tables. The prefix keeps the two namespaces
//! apart, so that no application table can collide with one, and it tells a reader of a
//! schema dump which tables hold routing and move state that only the framework (its
//! triggers, `bookmarks pin`, `move_slot`) may write. `autumn` is the framework the sharding
//! guide describes; `autumn_jobs` keeps the guide's name for its job queue, and the
//! features' own tables (`tenant_moves`, `bookmarks`, `bookmark_search`, …) have none.

pub mod access;
pub mod arrivals;
pub mod budget;
pub mod consistency;
pub mod cross_shard;
pub mod directory;
pub mod health;
pub mod move_wait;
pub mod replay;
pub mod replicas;
pub mod router;
pub mod row_security;
pub mod session;
pub mod shard_error;
pub mod shard_name;
pub mod shard_set;
pub mod slot;
pub mod slot_map;
pub mod slot_range;
pub mod tenant_rows;
pub mod topology;

pub use directory::DirectoryRouter;
pub use router::{PinRouter, Route, RouteError, RouteVia, ShardRouter, hash_route};
pub use shard_name::ShardName;
pub use shard_set::{Shard, ShardId, ShardSet};
pub use slot::{SLOT_COUNT, ShardKey, Slot};
pub use slot_range::SlotRange;
pub use topology::{ReplicaFallback, ShardSpec, Topology};
