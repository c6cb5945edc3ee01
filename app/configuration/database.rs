//! `[database]` and `[sharding]` validated into a [`Topology`]. Validation reports every problem it
//! finds at once, each naming the shard and slots involved, because a topology is usually edited in
//! a hurry during an incident.

use std::collections::BTreeMap;
use std::time::Duration;

use super::login::Login;
use super::raw::{RawDatabase, RawSharding};
use super::slots::resolve_slots;
use crate::pg::db_url::{DbUrl, DbUrlError};
use crate::sharding::SLOT_COUNT;
use crate::sharding::shard_name::ShardName;
use crate::sharding::topology::{
    MoveWaitPolicy, ReplicaFallback, ReplicaReadPolicy, ShardSpec, Topology,
};

pub const DEFAULT_CONTROL_POOL_SIZE: u32 = 8;
pub const DEFAULT_PRIMARY_POOL_SIZE: u32 = 8;
pub const DEFAULT_REPLICA_POOL_SIZE: u32 = 4;
const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
const DEFAULT_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// A minute: a shard this process stopped serving gives its connections back to its server
/// soon, and one it serves now and then keeps one warm.
const DEFAULT_POOL_IDLE_TIMEOUT_MS: u64 = 60_000;
/// The compose stack's: two web replicas and a worker.
const DEFAULT_PROCESSES: u32 = 3;
/// Well under the server's 10 s request timeout, and above the liveness monitor's 1 s
/// interval, so that a live server always answers a check within one deadline.
const DEFAULT_QUERY_TIMEOUT_MS: u64 = 2_000;
/// A little above the default request timeout (10 s), past which no request waits for a
/// statement: the server's own backstop for a statement the app let go of.
const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 11_000;
pub const DEFAULT_DIRECTORY_CACHE_TTL_MS: u64 = 30_000;
pub const DEFAULT_MOVE_WAIT_MS: u64 = 2_000;
pub const DEFAULT_MOVE_WAIT_MAX: usize = 1_000;
pub const DEFAULT_MAX_REPLICA_LAG_MS: u64 = 1_000;
pub const DEFAULT_RYOW_WAIT_MS: u64 = 20;
pub const DEFAULT_REPLAY_POLL_MS: u64 = 10;
/// A replica a minute behind serves nothing anyone would call current.
const MAX_MAX_REPLICA_LAG_MS: u64 = 60_000;
/// A read waiting longer for a replica costs more than the primary read it would save.
const MAX_RYOW_WAIT_MS: u64 = 1_000;

/// A wait longer than this would outlast the request timeout's default (10 s) by far.
const MAX_MOVE_WAIT_MS: u64 = 60_000;

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
    let pool_idle_timeout = timeout(
        "[database] pool_idle_timeout_ms",
        db.pool_idle_timeout_ms,
        DEFAULT_POOL_IDLE_TIMEOUT_MS,
        &mut problems,
    );
    let processes = match db.processes {
        Some(0) => {
            problems.push("[database] processes is 0; it must be at least 1".to_owned());
            DEFAULT_PROCESSES
        }
        Some(n) => n,
        None => DEFAULT_PROCESSES,
    };
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
                        "{label}: replica_url {:?} is not a Postgres URL: {e}",
                        masked(u)
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

    let replica_reads = replica_reads(db, &mut problems);

    if sharding.directory_router && control_pool_size < 2 {
        // Routing a request takes a control connection; a handler already holding the
        // only one would wait for itself forever.
        problems.push(format!(
            "[sharding] directory_router = true needs [database] pool_size of at least 2 \
             (it is {control_pool_size}): routing checks out a control connection, and a \
             handler that already holds the only one would wait for it forever"
        ));
    }

    let login = Login::read(db, &mut problems);
    let control_url =
        control_url.map(|url| login.apply("[database] primary_url", url, &mut problems));
    for spec in &mut specs {
        let what = format!("shard {:?}", spec.name.as_str());
        spec.primary_url = login.apply(
            &format!("{what}: primary_url"),
            spec.primary_url.clone(),
            &mut problems,
        );
        spec.replica_url = spec
            .replica_url
            .take()
            .map(|url| login.apply(&format!("{what}: replica_url"), url, &mut problems));
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
        pool_idle_timeout,
        processes,
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
        replica_reads,
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
            raw: masked(u),
            source,
        }),
    }
}

/// `raw` with the password of its `user:password@` part masked: a URL that failed to parse
/// is still printed in the problem, which is logged and shown by `check-config`.
fn masked(raw: &str) -> String {
    let Some(scheme_end) = raw.find("://").map(|i| i + 3) else {
        return raw.to_owned();
    };
    let rest = &raw[scheme_end..];
    let Some(at) = rest.rfind('@') else {
        return raw.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &raw[..scheme_end],
            &rest[..colon],
            &rest[at..]
        ),
        None => raw.to_owned(),
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

/// `[database] max_replica_lag_ms`, `ryow_wait_ms`, `replay_poll_ms`, `reads_without_token`.
fn replica_reads(db: &RawDatabase, problems: &mut Vec<String>) -> ReplicaReadPolicy {
    let max_lag = db.max_replica_lag_ms.unwrap_or(DEFAULT_MAX_REPLICA_LAG_MS);
    if max_lag > MAX_MAX_REPLICA_LAG_MS {
        problems.push(format!(
            "[database] max_replica_lag_ms = {max_lag} is too long (at most \
             {MAX_MAX_REPLICA_LAG_MS})"
        ));
    }
    let ryow_wait = db.ryow_wait_ms.unwrap_or(DEFAULT_RYOW_WAIT_MS);
    if ryow_wait > MAX_RYOW_WAIT_MS {
        problems.push(format!(
            "[database] ryow_wait_ms = {ryow_wait} is too long (at most {MAX_RYOW_WAIT_MS}): \
             past that the primary answers sooner"
        ));
    }
    let poll = db.replay_poll_ms.unwrap_or(DEFAULT_REPLAY_POLL_MS);
    if !(1..=1_000).contains(&poll) {
        problems.push(format!(
            "[database] replay_poll_ms = {poll} must be between 1 and 1000"
        ));
    }
    let without_token = match db.reads_without_token.as_deref() {
        None | Some("replica") => true,
        Some("primary") => false,
        Some(other) => {
            problems.push(format!(
                "[database] reads_without_token {other:?} is not one of \"replica\", \"primary\""
            ));
            true
        }
    };
    ReplicaReadPolicy {
        max_lag: Duration::from_millis(max_lag),
        ryow_wait: Duration::from_millis(ryow_wait),
        poll: Duration::from_millis(poll.max(1)),
        without_token,
    }
}

#[cfg(test)]
mod tests {
    use super::masked;

    #[test]
    fn a_url_that_does_not_parse_is_printed_without_its_password() {
        assert_eq!(
            masked("postgres://app:s3cret@db:99999/control"),
            "postgres://app:***@db:99999/control"
        );
        assert_eq!(masked("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(masked("postgres://"), "postgres://");
        assert_eq!(masked("not a url"), "not a url");
        assert_eq!(masked("postgres://u:p@ss@h/d"), "postgres://u:***@h/d");
    }
}
