//! bookmarks-sharded: a multi-tenant bookmarks service whose tenant data is routed across
//! several independent Postgres shards.
//!
//! Where things live:
//! - [`sharding`]: keys, slots, topology, shard pools and routers. Knows nothing of bookmarks.
//! - [`configuration`]: loads `autumn.toml` plus `AUTUMN_*` environment overrides.
//! - [`cli`]: the `bookmarks` command line (the binary in `bin/` only calls into it).

pub mod cli;
pub mod configuration;
pub mod sharding;
