//! bookmarks-sharded: a multi-tenant bookmarks service whose tenant data is routed across
//! several independent Postgres shards.
//!
//! Where things live, infrastructure first, then the features built on it, then what
//! assembles and runs them. Infrastructure never imports a feature
//! (`scripts/check-architecture.py` checks it):
//! - [`pg`]: generic Postgres plumbing: pools, circuit breakers, statement deadlines, URLs,
//!   LISTEN sessions, health probes.
//! - [`sharding`]: keys, slots, topology, the shard set, routers and the directory. Knows
//!   nothing of bookmarks.
//! - [`configuration`]: loads `autumn.toml` plus `AUTUMN_*` environment overrides.
//! - [`tenancy`]: `TenantId`, how a request names and proves its tenant, API keys, and the
//!   tenant's members with their roles.
//! - [`migrate`]: embedded migrations for the control database and the shards.
//! - [`telemetry`]: the log subscriber, and `MetricSource`, what contributes figures to
//!   the metrics endpoints.
//! - [`web`]: the HTTP plumbing: extractors (`ShardedDb`, `ShardedReadDb`, `Shards`,
//!   `CrossShard`, `Tenant`), errors → HTTP, health, metrics, the access log, the layer stack.
//! - [`bookmarks`]: the feature itself (API, HTML UI, stats); never computes a slot.
//! - [`collections`]: a tenant's nested folders of bookmarks.
//! - [`changes`]: the change feed of a tenant's bookmarks and collections, kept by the shard.
//! - [`content`]: every tenant table on the shards, declared once for moves and checks.
//! - [`search`]: full-text search and the per-shard reindexer.
//! - [`jobs`]: the job queue on the control database and its worker.
//! - [`members`]: a tenant's admins manage its members and their keys over the API.
//! - [`fairness`]: the per-tenant bulkhead and the busiest tenants with placement advice.
//! - [`moves`]: online tenant moves between shards (the `move_slot` tool).
//! - [`admin`]: the operator's cross-shard admin page (only with `ADMIN_TOKEN`).
//! - [`startup`]: builds the application and assembles every feature's state and routes
//!   (server, CLI and tests share it).
//! - [`cli`]: the `bookmarks` command line (the binary in `bin/` only calls into it).
//!
//! The load generator is a crate of its own (`loadgen/`): it talks to the service over HTTP
//! only.

pub mod admin;
pub mod bookmarks;
pub mod changes;
pub mod cli;
pub mod collections;
pub mod configuration;
pub mod content;
pub mod fairness;
pub mod imports;
pub mod jobs;
pub mod members;
pub mod migrate;
pub mod moves;
pub mod pg;
pub mod search;
pub mod sharding;
pub mod startup;
pub mod telemetry;
pub mod tenancy;
pub mod web;
