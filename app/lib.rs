//! bookmarks-sharded: a multi-tenant bookmarks service whose tenant data is routed across
//! several independent Postgres shards.
//!
//! Where things live:
//! - [`sharding`]: keys, slots, topology, shard pools and routers. Knows nothing of bookmarks.
//! - [`configuration`]: loads `autumn.toml` plus `AUTUMN_*` environment overrides.
//! - [`tenancy`]: `TenantId` and how a request names its tenant.
//! - [`web`]: extractors (`ShardedDb`, `ShardedReadDb`, `Shards`, `Tenant`), errors → HTTP,
//!   health, metrics, middleware.
//! - [`fairness`]: the per-tenant bulkhead and the busiest tenants with placement advice.
//! - [`bookmarks`]: the feature itself (API, HTML UI, stats); never computes a slot.
//! - [`admin`]: the operator's cross-shard admin page (only with `ADMIN_TOKEN`).
//! - [`migrate`]: embedded migrations for the control database and the shards.
//! - [`moves`]: online tenant moves between shards (the `move_slot` tool).
//! - [`startup`]: builds the application (server, CLI and tests share it).
//! - [`cli`]: the `bookmarks` command line (the binary in `bin/` only calls into it).
//! - [`loadgen`]: a load generator for the API (the `loadgen` binary), reporting per tenant
//!   class and per shard.

pub mod admin;
pub mod bookmarks;
pub mod cli;
pub mod configuration;
pub mod fairness;
pub mod jobs;
pub mod loadgen;
pub mod migrate;
pub mod moves;
pub mod search;
pub mod sharding;
pub mod startup;
pub mod telemetry;
pub mod tenancy;
pub mod web;
