//! `[database]` and `[sharding]` as written in `autumn.toml`, and their validation into a
//! [`Topology`]. Validation reports every problem it finds at once, each naming the shard
//! and slots involved, because a topology is usually edited in a hurry during an incident.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::pg::db_url::{DbUrl, DbUrlError};
use crate::sharding::shard_name::ShardName;
use crate::sharding::slot::SLOT_COUNT;
use crate::sharding::slot_range::{SlotRange, compact, display_ranges};
use crate::sharding::topology::{MoveWaitPolicy, ReplicaFallback, ShardSpec, Topology};

pub const DEFAULT_CONTROL_POOL_SIZE: u32 = 8;
pub const DEFAULT_PRIMARY_POOL_SIZE: u32 = 8;
pub const DEFAULT_REPLICA_POOL_SIZE: u32 = 4;
const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
const DEFAULT_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// Well under the server's 10 s request timeout, and above the liveness monitor's 1 s
/// interval, so that a live server always answers a check within one deadline.
const DEFAULT_QUERY_TIMEOUT_MS: u64 = 2_000;
/// A little above the default request timeout (10 s), past which no request waits for a
/// statement: the server's own backstop for a statement the app let go of.
const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 11_000;
pub const DEFAULT_DIRECTORY_CACHE_TTL_MS: u64 = 30_000;
pub const DEFAULT_MOVE_WAIT_MS: u64 = 2_000;
pub const DEFAULT_MOVE_WAIT_MAX: usize = 1_000;
/// A wait longer than this would outlast the request timeout's default (10 s) by far.
const MAX_MOVE_WAIT_MS: u64 = 60_000;

/// `[database]` as written in the file, before validation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDatabase {
    /// The control role: framework state, never sharded.
    pub primary_url: Option<String>,
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
    /// How long a request-path statement may wait while its server answers nothing at all
    /// before the server counts as silent (the statement is abandoned, its connection
    /// discarded and the breaker opened). A slow statement on a server that keeps
    /// answering is bounded by the request timeout instead.
    pub query_timeout_ms: Option<u64>,
    /// `statement_timeout` of every pooled connection: the server cancels a statement that
    /// runs longer, even one whose client is gone.
    pub statement_timeout_ms: Option<u64>,
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

/// Validates the raw sections into a [`Topology`], returning every problem found.
pub fn topology(db: &RawDatabase, sharding: &RawSharding) -> Result<Topology, Vec<String>> {
    let mut problems = Vec::new();

    let control_url = required_url("[database] primary_url", db.primary_url.as_deref())
        .map_err(|p| problems.push(p.to_string()))
        .ok();
    let control_pool_size = pool_size(
        "[database] pool_size",
        db.pool_size,
        DEFAULT_CONTROL_POOL_SIZE,
        &mut problems,
    );
    let default_primary = pool_size(
        "[database] primary_pool_size",
        db.primary_pool_size,
        DEFAULT_PRIMARY_POOL_SIZE,
        &mut problems,
    );
    let default_replica = pool_size(
        "[database] replica_pool_size",
        db.replica_pool_size,
        DEFAULT_REPLICA_POOL_SIZE,
        &mut problems,
    );
    let default_fallback = match db.replica_fallback.as_deref() {
        None => ReplicaFallback::Primary,
        Some(raw) => ReplicaFallback::parse(raw).unwrap_or_else(|| {
            problems.push(format!(
                "[database] replica_fallback {raw:?} is not one of \"primary\", \"fail_readiness\""
            ));
            ReplicaFallback::Primary
        }),
    };
    let connect_timeout = timeout(
        "[database] connect_timeout_ms",
        db.connect_timeout_ms,
        DEFAULT_CONNECT_TIMEOUT_MS,
        &mut problems,
    );
    let acquire_timeout = timeout(
        "[database] acquire_timeout_ms",
        db.acquire_timeout_ms,
        DEFAULT_ACQUIRE_TIMEOUT_MS,
        &mut problems,
    );
    let query_timeout = timeout(
        "[database] query_timeout_ms",
        db.query_timeout_ms,
        DEFAULT_QUERY_TIMEOUT_MS,
        &mut problems,
    );
    let statement_timeout = timeout(
        "[database] statement_timeout_ms",
        db.statement_timeout_ms,
        DEFAULT_STATEMENT_TIMEOUT_MS,
        &mut problems,
    );

    if db.shards.is_empty() {
        problems.push(
            "[database] declares no shards: add at least one [[database.shards]] entry".to_owned(),
        );
    }

    let labels: Vec<String> = db
        .shards
        .iter()
        .enumerate()
        .map(|(i, s)| match s.name.as_deref() {
            Some(n) if !n.is_empty() => format!("shard {n:?}"),
            _ => format!("shards[{i}]"),
        })
        .collect();

    let names = validate_names(db, &labels, &mut problems);
    let slot_lists = resolve_slots(db, &labels, &mut problems);

    let mut specs = Vec::new();
    for (i, raw) in db.shards.iter().enumerate() {
        let label = &labels[i];
        let primary_url =
            required_url(&format!("{label}: primary_url"), raw.primary_url.as_deref())
                .map_err(|p| problems.push(p.to_string()))
                .ok();
        let replica_url = raw.replica_url.as_deref().and_then(|u| {
            DbUrl::parse(u)
                .map_err(|e| {
                    problems.push(format!(
                        "{label}: replica_url {u:?} is not a Postgres URL: {e}"
                    ))
                })
                .ok()
        });
        let replica_fallback = match raw.replica_fallback.as_deref() {
            None => default_fallback,
            Some(r) => ReplicaFallback::parse(r).unwrap_or_else(|| {
                problems.push(format!(
                    "{label}: replica_fallback {r:?} is not one of \"primary\", \"fail_readiness\""
                ));
                default_fallback
            }),
        };
        let primary_pool_size = pool_size(
            &format!("{label}: primary_pool_size"),
            raw.primary_pool_size,
            default_primary,
            &mut problems,
        );
        let replica_pool_size = pool_size(
            &format!("{label}: replica_pool_size"),
            raw.replica_pool_size,
            default_replica,
            &mut problems,
        );
        if let (Some(name), Some(primary_url), Some(slots)) = (
            names[i].clone(),
            primary_url,
            slot_lists.as_ref().map(|l| l[i].clone()),
        ) {
            specs.push(ShardSpec {
                name,
                primary_url,
                replica_url,
                replica_fallback,
                primary_pool_size,
                replica_pool_size,
                slots,
            });
        }
    }

    let mut pins = BTreeMap::new();
    for (tenant, shard) in &sharding.pins {
        if tenant.is_empty() {
            problems.push(format!(
                "[sharding.pins] an empty tenant key is pinned to {shard:?}"
            ));
            continue;
        }
        match db.shards.iter().position(|s| s.name.as_deref() == Some(shard.as_str())) {
            Some(i) => {
                pins.insert(tenant.clone(), i);
            }
            None => problems.push(format!(
                "[sharding.pins] tenant {tenant:?} is pinned to unknown shard {shard:?} (shards: {})",
                known_names(db)
            )),
        }
    }

    let move_wait_ms = sharding.move_wait_ms.unwrap_or(DEFAULT_MOVE_WAIT_MS);
    if move_wait_ms > MAX_MOVE_WAIT_MS {
        problems.push(format!(
            "[sharding] move_wait_ms = {move_wait_ms} is too long (at most {MAX_MOVE_WAIT_MS}): \
             a move's fence lasts well under a second, and a longer wait would outlast \
             the request timeout"
        ));
    }

    if sharding.directory_router && control_pool_size < 2 {
        // Routing a request takes a control connection; a handler already holding the
        // only one would wait for itself forever.
        problems.push(format!(
            "[sharding] directory_router = true needs [database] pool_size of at least 2 \
             (it is {control_pool_size}): routing checks out a control connection, and a \
             handler that already holds the only one would wait for it forever"
        ));
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    let control_url = control_url.expect("no problems means the control URL parsed");
    let mut owner = vec![0u16; usize::from(SLOT_COUNT)].into_boxed_slice();
    for (i, spec) in specs.iter().enumerate() {
        for slot in spec.slots.iter().flat_map(|r| r.iter()) {
            owner[usize::from(slot)] = i as u16;
        }
    }
    Ok(Topology {
        control_url,
        control_pool_size,
        connect_timeout,
        acquire_timeout,
        query_timeout,
        statement_timeout,
        shards: specs,
        owner,
        pins,
        directory_router: sharding.directory_router,
        directory_cache_ttl: Duration::from_millis(
            sharding
                .directory_cache_ttl_ms
                .unwrap_or(DEFAULT_DIRECTORY_CACHE_TTL_MS),
        ),
        auto_assigned: db.shards.iter().all(|s| s.slots.is_none()),
        move_wait: MoveWaitPolicy {
            budget: Duration::from_millis(move_wait_ms),
            max: sharding.move_wait_max.unwrap_or(DEFAULT_MOVE_WAIT_MAX),
        },
    })
}

fn known_names(db: &RawDatabase) -> String {
    let names: Vec<&str> = db.shards.iter().filter_map(|s| s.name.as_deref()).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// A URL setting that cannot be used; the message starts with the setting's name.
#[derive(Debug, thiserror::Error)]
enum UrlProblem {
    #[error("{0} is missing")]
    Missing(String),
    #[error("{0} is empty")]
    Empty(String),
    #[error("{what} {raw:?} is not a Postgres URL: {source}")]
    Invalid {
        what: String,
        raw: String,
        source: DbUrlError,
    },
}

fn required_url(what: &str, raw: Option<&str>) -> Result<DbUrl, UrlProblem> {
    match raw {
        None => Err(UrlProblem::Missing(what.to_owned())),
        Some(u) if u.trim().is_empty() => Err(UrlProblem::Empty(what.to_owned())),
        Some(u) => DbUrl::parse(u).map_err(|source| UrlProblem::Invalid {
            what: what.to_owned(),
            raw: u.to_owned(),
            source,
        }),
    }
}

fn pool_size(what: &str, raw: Option<u32>, default: u32, problems: &mut Vec<String>) -> u32 {
    match raw {
        Some(0) => {
            problems.push(format!("{what} is 0; a pool needs at least 1 connection"));
            default
        }
        Some(n) => n,
        None => default,
    }
}

fn timeout(what: &str, raw: Option<u64>, default_ms: u64, problems: &mut Vec<String>) -> Duration {
    match raw {
        Some(0) => {
            problems.push(format!("{what} is 0; it must be at least 1 millisecond"));
            Duration::from_millis(default_ms)
        }
        Some(ms) => Duration::from_millis(ms),
        None => Duration::from_millis(default_ms),
    }
}

fn validate_names(
    db: &RawDatabase,
    labels: &[String],
    problems: &mut Vec<String>,
) -> Vec<Option<ShardName>> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    db.shards
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let Some(raw) = s.name.as_deref() else {
                problems.push(format!("{}: name is missing", labels[i]));
                return None;
            };
            if let Some(first) = seen.insert(raw, i) {
                problems.push(format!(
                    "shard name {raw:?} is used twice (shards[{first}] and shards[{i}]); names must be unique"
                ));
            }
            ShardName::parse(raw)
                .map_err(|e| problems.push(format!("{}: {e}", labels[i])))
                .ok()
        })
        .collect()
}

/// Each shard's owned slots, either as declared (validated to cover every slot exactly once)
/// or auto-split into contiguous even ranges in declaration order.
fn resolve_slots(
    db: &RawDatabase,
    labels: &[String],
    problems: &mut Vec<String>,
) -> Option<Vec<Vec<SlotRange>>> {
    let n = db.shards.len();
    if n == 0 {
        return None;
    }
    let declaring: Vec<usize> = (0..n).filter(|&i| db.shards[i].slots.is_some()).collect();
    if declaring.is_empty() {
        if n > usize::from(SLOT_COUNT) {
            problems.push(format!(
                "{n} shards is more than the {SLOT_COUNT} slots to share"
            ));
            return None;
        }
        let total = usize::from(SLOT_COUNT);
        return Some(
            (0..n)
                .map(|i| {
                    let start = (i * total / n) as u16;
                    let end = ((i + 1) * total / n - 1) as u16;
                    vec![SlotRange::new(start, end).expect("auto-split ranges are in bounds")]
                })
                .collect(),
        );
    }
    if declaring.len() < n {
        let silent: Vec<&str> = (0..n)
            .filter(|i| !declaring.contains(i))
            .map(|i| labels[i].as_str())
            .collect();
        let loud: Vec<&str> = declaring.iter().map(|&i| labels[i].as_str()).collect();
        problems.push(format!(
            "slots are all-or-none: {} declare slots but {} do not (declare slots on every shard, or on none to auto-split)",
            loud.join(", "),
            silent.join(", ")
        ));
        return None;
    }

    let mut claims: Vec<Vec<usize>> = vec![Vec::new(); usize::from(SLOT_COUNT)];
    // Slots a bad entry evidently meant to cover ("9-3", "16000-20000"): not owned, but not
    // reported as gaps either, so each mistake is reported once, as itself.
    let mut meant = vec![false; usize::from(SLOT_COUNT)];
    let mut per_shard: Vec<Vec<SlotRange>> = vec![Vec::new(); n];
    let before = problems.len();
    for (i, raw) in db.shards.iter().enumerate() {
        for entry in raw.slots.as_deref().unwrap_or_default() {
            let text = match entry {
                SlotEntry::Index(v) => v.to_string(),
                SlotEntry::Text(t) => t.clone(),
            };
            match text.parse::<SlotRange>() {
                Ok(range) => {
                    per_shard[i].push(range);
                    for slot in range.iter() {
                        claims[usize::from(slot)].push(i);
                    }
                }
                Err(e) => {
                    problems.push(format!("{}: slots entry {e}", labels[i]));
                    for slot in intended_slots(&text) {
                        meant[usize::from(slot)] = true;
                    }
                }
            }
        }
    }

    // Coverage is still checked when some entries are bad: every problem at once.
    let gaps = compact(
        (0..SLOT_COUNT).filter(|&s| claims[usize::from(s)].is_empty() && !meant[usize::from(s)]),
    );
    if !gaps.is_empty() {
        problems.push(format!(
            "slots {} are owned by no shard (every slot 0-{} must be owned exactly once)",
            display_ranges(&gaps),
            SLOT_COUNT - 1
        ));
    }
    let mut overlaps: BTreeMap<Vec<usize>, Vec<u16>> = BTreeMap::new();
    for slot in 0..SLOT_COUNT {
        let owners = &claims[usize::from(slot)];
        if owners.len() > 1 {
            overlaps.entry(owners.clone()).or_default().push(slot);
        }
    }
    for (owners, slots) in overlaps {
        let who: Vec<&str> = owners.iter().map(|&i| labels[i].as_str()).collect();
        problems.push(format!(
            "slots {} are claimed more than once, by {}",
            display_ranges(&compact(slots)),
            who.join(" and ")
        ));
    }
    if problems.len() > before {
        return None;
    }
    Some(
        per_shard
            .into_iter()
            .map(|mut ranges| {
                ranges.sort();
                compact(ranges.iter().flat_map(|r| r.iter()))
            })
            .collect(),
    )
}

/// The in-range slots an unparsable entry most plausibly meant: a reversed range read
/// forwards, a range running past the end clipped to the last slot. Empty when the entry
/// is not made of numbers at all.
fn intended_slots(text: &str) -> impl Iterator<Item = u16> {
    let number = |s: &str| s.trim().parse::<u64>().ok();
    let (a, b) = match text.trim().split_once('-') {
        Some((a, b)) => (number(a), number(b)),
        None => (number(text), number(text)),
    };
    let last = u64::from(SLOT_COUNT - 1);
    let range = match (a, b) {
        (Some(a), Some(b)) if a.min(b) <= last => {
            Some((a.min(b) as u16)..=(a.max(b).min(last) as u16))
        }
        _ => None,
    };
    range.into_iter().flatten()
}
