//! `[database]` and `[sharding]` as written in `autumn.toml` (after the environment's
//! overrides), before validation.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[database]` as written in the file, before validation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDatabase {
    /// The control role: framework state, never sharded.
    pub primary_url: Option<String>,
    /// The login every URL uses, in place of the one it names.
    pub user: Option<String>,
    /// A file whose first line is the password every URL uses, in place of its own.
    pub password_file: Option<String>,
    /// Control pool size.
    pub pool_size: Option<u32>,
    /// Default shard primary pool size.
    pub primary_pool_size: Option<u32>,
    /// Default shard replica pool size.
    pub replica_pool_size: Option<u32>,
    /// Default `replica_fallback` for shards that do not set one.
    pub replica_fallback: Option<String>,
    /// How long opening one connection may take before the shard counts as down.
    pub connect_timeout_ms: Option<u64>,
    /// How long a request waits for a pooled connection.
    pub acquire_timeout_ms: Option<u64>,
    /// How long a pooled connection may sit unused before it is closed.
    pub pool_idle_timeout_ms: Option<u64>,
    /// How many app processes (web replicas and workers) share these servers.
    pub processes: Option<u32>,
    /// How long a request-path statement may wait while its server answers nothing at all
    /// before the server counts as silent (the statement is abandoned, its connection
    /// discarded and the breaker opened). A slow statement on a server that keeps
    /// answering is bounded by the request timeout instead.
    pub query_timeout_ms: Option<u64>,
    /// `statement_timeout` of every pooled connection: the server cancels a statement that
    /// runs longer, even one whose client is gone.
    pub statement_timeout_ms: Option<u64>,
    /// How far behind its primary a replica may be and still serve reads.
    pub max_replica_lag_ms: Option<u64>,
    /// How long a read whose consistency token the replica has not replayed waits for it
    /// before it goes to the primary.
    pub ryow_wait_ms: Option<u64>,
    /// How often each replica's replay position (and its primary's WAL position) is read.
    pub replay_poll_ms: Option<u64>,
    /// Where a read without a consistency token goes: `replica` or `primary`.
    pub reads_without_token: Option<String>,
    #[serde(default)]
    pub shards: Vec<RawShard>,
}

/// One `[[database.shards]]` entry as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShard {
    pub name: Option<String>,
    pub primary_url: Option<String>,
    pub slots: Option<Vec<SlotEntry>>,
    pub replica_url: Option<String>,
    pub replica_fallback: Option<String>,
    pub primary_pool_size: Option<u32>,
    pub replica_pool_size: Option<u32>,
}

/// A `slots` list entry: a bare index (`42` or `"42"`) or an inclusive range (`"0-8191"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SlotEntry {
    Index(i64),
    Text(String),
}

/// `[sharding]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSharding {
    /// Tenant key → shard name, consulted before the hash.
    #[serde(default)]
    pub pins: BTreeMap<String, String>,
    /// Route through the control database's directory table before pins and the hash.
    #[serde(default)]
    pub directory_router: bool,
    /// How long a directory lookup (a row or the absence of one) is cached per process.
    pub directory_cache_ttl_ms: Option<u64>,
    /// How long a write refused by a move's fence may wait for it to lift (0: not at all).
    pub move_wait_ms: Option<u64>,
    /// How many requests may wait out a move's fence at once in one process.
    pub move_wait_max: Option<usize>,
}
