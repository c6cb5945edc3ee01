//! The admin page's picture of the deployment: one card per shard (slots, servers, pools,
//! counts, schema) and the slot map with the tenants placed outside the hash.

use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{Nullable, Text};
use diesel_async::RunQueryDsl;
use serde::Serialize;

use super::state::AdminState;
use crate::bookmarks::store;
use crate::pg::breaker::BreakerSnapshot;
use crate::pg::pool::{AfterCheck, PgPool};
use crate::search::reindexer::IndexSnapshot;
use crate::sharding::cross_shard::{CrossShard, FanOut, Server};
use crate::sharding::directory::placement::{PinEntry, pin_entries};
use crate::sharding::directory::table;
use crate::sharding::health::{check_replica, probe_primary};
use crate::sharding::slot_range::display_ranges;
use crate::sharding::{SLOT_COUNT, Shard};

/// One server of a shard as probed just now.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ServerState {
    pub up: bool,
    pub detail: String,
    pub probe_ms: u64,
}

/// A connection pool's occupancy.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PoolState {
    pub server: &'static str,
    pub max_size: usize,
    pub open: usize,
    pub in_use: usize,
    pub waiting: usize,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReplicaState {
    #[serde(flatten)]
    pub server: ServerState,
    /// How far behind its primary the replica's data was when it answered the counts.
    pub lag_ms: Option<u64>,
    /// Where replica-aware reads go now.
    pub reads: &'static str,
    /// Tenant reads this web replica sent to the shard's replica since it started.
    pub replica_reads: u64,
    /// Tenant reads this web replica sent to the shard's primary instead (no token the
    /// replica had replayed in time, too much lag, or the replica unready).
    pub primary_reads: u64,
}

impl ReplicaState {
    /// The replica's share of this web replica's tenant reads, in percent, once there are any.
    pub fn share(&self) -> Option<u64> {
        let all = self.replica_reads + self.primary_reads;
        (all > 0).then(|| self.replica_reads * 100 / all)
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ShardCard {
    pub name: String,
    pub colour: &'static str,
    pub slot_count: u32,
    pub ranges: String,
    pub primary: ServerState,
    pub replica: Option<ReplicaState>,
    pub pools: Vec<PoolState>,
    pub bookmarks: Option<i64>,
    pub tenants: Option<i64>,
    /// Which server the counts and schema version came from.
    pub counted_on: Option<Server>,
    /// Newest migration applied on the server that answered, and the one this build expects.
    pub migration: Option<String>,
    pub expected_migration: String,
    /// The search index as this process's reindexer last saw it.
    pub index: IndexSnapshot,
    /// This process's circuit breakers for the shard's servers.
    pub circuits: Vec<BreakerSnapshot>,
}

/// Colours for shards in declaration order (cards, map and legend agree). The stylesheet
/// (app/templates/admin.css) has a class for each, `shard-<hex digits>`.
pub const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

pub fn colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

impl ShardCard {
    /// The stylesheet's class for this card's colour: the page carries no inline style.
    pub fn colour_class(&self) -> String {
        format!("shard-{}", self.colour.trim_start_matches('#'))
    }
}

#[derive(QueryableByName)]
struct Latest {
    #[diesel(sql_type = Nullable<Text>)]
    version: Option<String>,
}

/// Counts and schema version from every shard (replica-aware, lag reported).
pub async fn shard_facts(cross: &CrossShard) -> FanOut<((i64, i64), Option<String>)> {
    cross
        .read(|conn| {
            Box::pin(async move {
                let counts = store::shard_counts(conn).await?;
                let latest: Latest = diesel::sql_query(
                    "SELECT max(version) AS version FROM __diesel_schema_migrations",
                )
                .get_result(conn)
                .await?;
                Ok((counts, latest.version))
            })
        })
        .await
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn pool_state(server: &'static str, pool: &PgPool) -> PoolState {
    let s = pool.status();
    PoolState {
        server,
        max_size: s.max_size,
        open: s.size,
        in_use: s.size.saturating_sub(s.available),
        waiting: s.waiting,
    }
}

async fn probe_shard(shard: &Shard, state: &AdminState) -> (ServerState, Option<ServerState>) {
    let primary = async {
        let started = Instant::now();
        let p = probe_primary(
            shard,
            &state.expected_shard_migrations,
            state.shard_timeout,
            AfterCheck::Return,
        )
        .await;
        ServerState {
            up: p.up,
            detail: p.detail,
            probe_ms: millis(started.elapsed()),
        }
    };
    let replica = async {
        let started = Instant::now();
        let p = check_replica(
            shard,
            state.shards.replicas(),
            &state.expected_shard_migrations,
            state.shard_timeout,
        )
        .await?;
        Some(ServerState {
            up: p.up,
            detail: p.detail,
            probe_ms: millis(started.elapsed()),
        })
    };
    futures::join!(primary, replica)
}

/// The shard cards, and the coverage of the counts' fan-out (for the banner).
pub async fn shard_cards(
    state: &AdminState,
    cross: &CrossShard,
) -> (Vec<ShardCard>, FanOut<((i64, i64), Option<String>)>) {
    let set = state.shards.set();
    let probes = futures::future::join_all(set.iter().map(|s| probe_shard(s, state)));
    let (probes, facts) = futures::join!(probes, shard_facts(cross));
    let expected = state
        .expected_shard_migrations
        .iter()
        .next_back()
        .cloned()
        .unwrap_or_default();
    // Each shard's slots in the live slot map (`autumn.toml` plus overrides).
    let map = set.slot_map().snapshot();
    let owned: Vec<_> = (0..set.len()).map(|i| map.ranges_of(i)).collect();
    let cards = set
        .iter()
        .zip(probes)
        .zip(&facts.answers)
        .enumerate()
        .map(|(i, ((shard, (primary, replica)), answer))| {
            let answered = answer.outcome.as_ref().ok();
            let lag = answered.and_then(|a| a.replica_lag).map(millis);
            let mut pools = vec![pool_state("primary", shard.primary_pool())];
            if let Some(pool) = shard.replica_pool() {
                pools.push(pool_state("replica", pool));
            }
            ShardCard {
                name: shard.name().to_owned(),
                colour: colour(i),
                slot_count: owned[i].iter().map(|r| r.len()).sum(),
                ranges: display_ranges(&owned[i]),
                primary,
                replica: replica.map(|server| {
                    let counts = state.shards.replicas().counts(shard.id());
                    ReplicaState {
                        reads: if state.shards.replicas().is_ready(shard.id()) {
                            "replica"
                        } else {
                            match shard.replica_fallback() {
                                crate::sharding::ReplicaFallback::Primary => "primary (fallback)",
                                crate::sharding::ReplicaFallback::FailReadiness => "refused",
                            }
                        },
                        server,
                        lag_ms: lag,
                        replica_reads: counts.replica,
                        primary_reads: counts.primary,
                    }
                }),
                pools,
                bookmarks: answered.map(|a| a.value.0.0),
                tenants: answered.map(|a| a.value.0.1),
                counted_on: answered.map(|a| a.server),
                migration: answered.and_then(|a| a.value.1.clone()),
                expected_migration: expected.clone(),
                index: state
                    .index
                    .get(shard.name())
                    .map(|s| s.snapshot())
                    .unwrap_or_default(),
                circuits: shard.breakers().map(|b| b.snapshot()).collect(),
            }
        })
        .collect();
    (cards, facts)
}

/// How the live slot map differs from `autumn.toml`, with the edit that folds it in.
pub fn slot_drift(state: &AdminState) -> Vec<crate::sharding::slot_map::Drift> {
    let set = state.shards.set();
    set.slot_map().snapshot().drift(set.topology())
}

/// One run of consecutive slots with the same owner, as a rectangle of the map.
#[derive(Debug, Clone, Serialize)]
pub struct SlotRun {
    pub shard: String,
    pub start: u16,
    pub end: u16,
    #[serde(skip)]
    pub x: u32,
    #[serde(skip)]
    pub y: u32,
    #[serde(skip)]
    pub width: u32,
    #[serde(skip)]
    pub colour: &'static str,
}

/// A placed tenant's marker on the map.
#[derive(Debug, Clone, Serialize)]
pub struct Marker {
    pub tenant: String,
    pub x: u32,
    pub y: u32,
    pub colour: &'static str,
}

/// The map lays slots out row by row, this many per row.
pub const MAP_COLUMNS: u32 = 128;
/// Pixels per slot in the SVG.
pub const MAP_CELL: u32 = 4;

/// The slot map: consecutive slots with one owner, cut at row ends so each is a rectangle.
pub fn slot_runs(state: &AdminState) -> Vec<SlotRun> {
    let set = state.shards.set();
    let topology = set.topology();
    let map = set.slot_map().snapshot();
    let mut runs: Vec<SlotRun> = Vec::new();
    for slot in 0..SLOT_COUNT {
        let owner = map.owner(slot).shard;
        let row_start = u32::from(slot) % MAP_COLUMNS == 0;
        match runs.last_mut() {
            Some(run) if !row_start && run.shard == topology.shards[owner].name.as_str() => {
                run.end = slot;
                run.width += MAP_CELL;
            }
            _ => runs.push(SlotRun {
                shard: topology.shards[owner].name.as_str().to_owned(),
                start: slot,
                end: slot,
                x: (u32::from(slot) % MAP_COLUMNS) * MAP_CELL,
                y: (u32::from(slot) / MAP_COLUMNS) * MAP_CELL,
                width: MAP_CELL,
                colour: colour(owner),
            }),
        }
    }
    runs
}

/// Where each placed tenant sits on the map, coloured by the shard it is placed on.
pub fn markers(state: &AdminState, pins: &[PinEntry]) -> Vec<Marker> {
    let set = state.shards.set();
    pins.iter()
        .filter(|p| p.effective)
        .map(|p| {
            let index = set.by_name(&p.shard).map(|s| s.id().index()).unwrap_or(0);
            let slot = u32::from(p.slot);
            Marker {
                tenant: p.tenant.clone(),
                x: (slot % MAP_COLUMNS) * MAP_CELL + MAP_CELL / 2,
                y: (slot / MAP_COLUMNS) * MAP_CELL + MAP_CELL / 2,
                colour: colour(index),
            }
        })
        .collect()
}

/// Directory rows and config pins; `Err` when the control database cannot be read (the
/// config pins alone are still returned).
pub async fn pins(state: &AdminState) -> (Vec<PinEntry>, Option<String>) {
    let set = state.shards.set();
    match state
        .control
        .run("read the directory", |conn| Box::pin(table::list(conn)))
        .await
    {
        Ok(rows) => (pin_entries(set, &rows), None),
        Err(reason) => (pin_entries(set, &[]), Some(reason.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stylesheet_has_a_class_for_every_colour_of_the_palette() {
        let css = include_str!("../templates/admin.css");
        for colour in PALETTE {
            let digits = colour.trim_start_matches('#');
            let rule = format!(".shard-{digits} {{ --shard: {colour}; }}");
            assert!(css.contains(&rule), "admin.css lacks {rule}");
        }
    }
}
