//! What a move carries: named tenants (`--tenant`, `--slot`: a tenant move, placed by
//! directory rows), or the slot ranges themselves (`--slots`: a range move, placed by the
//! live slot map, which carries every tenant the slot map sends through the ranges,
//! including tenants that first write while it runs). The steps are the same for both;
//! this is where they differ: which guard a shard gets, who the members are, and how
//! routing changes hands.

use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::context::{StepContext, live_owners};
use super::error::{MoveError, on_control, on_shard};
use super::plan::tenants_where;
use super::record::MoveRecord;
use super::slot_guard;
use super::tenant_guard::{self, GuardState};
use crate::jobs::{self, Job, queue};
use crate::sharding::directory::{placed, table};
use crate::sharding::slot_map;
use crate::sharding::{ShardKey, ShardSet, SlotRange};
use crate::tenancy::TenantId;

pub enum Scope {
    Tenants(Vec<String>),
    Ranges(Vec<SlotRange>),
}

/// Which of the move's two shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Source,
    Dest,
}

impl Scope {
    pub fn of(m: &MoveRecord) -> Self {
        match &m.slots {
            Some(ranges) => Scope::Ranges(ranges.clone()),
            None => Scope::Tenants(m.tenants.clone()),
        }
    }

    /// Sets the move's guard on a shard: per tenant, or per slot for a range.
    pub async fn guard(
        &self,
        shard: &mut Client,
        move_id: i64,
        guard: GuardState,
        peer: &str,
    ) -> Result<(), tokio_postgres::Error> {
        match self {
            Scope::Tenants(tenants) => {
                tenant_guard::set(shard, move_id, tenants, guard, peer).await
            }
            Scope::Ranges(ranges) => slot_guard::set(shard, move_id, ranges, guard, peer).await,
        }
    }

    /// Removes this move's guard from a shard.
    pub async fn unguard(
        &self,
        shard: &mut Client,
        move_id: i64,
    ) -> Result<(), tokio_postgres::Error> {
        match self {
            Scope::Tenants(tenants) => tenant_guard::clear(shard, move_id, tenants).await,
            Scope::Ranges(ranges) => slot_guard::clear(shard, Some(move_id), ranges).await,
        }
    }

    /// Opens the destination to the move's keys: this move's guard goes, and for a range
    /// also whatever an earlier move left (a range coming back to a shard that gave it away).
    pub async fn open_destination(
        &self,
        dest: &mut Client,
        move_id: i64,
    ) -> Result<(), tokio_postgres::Error> {
        match self {
            Scope::Tenants(tenants) => tenant_guard::clear(dest, move_id, tenants).await,
            Scope::Ranges(ranges) => slot_guard::clear(dest, None, ranges).await,
        }
    }

    /// The tenants whose rows the move carries, as one side holds them now. For a range:
    /// every tenant with rows there whose key hashes into the ranges, except those the
    /// directory or a config pin places (they stay where they are placed).
    pub async fn members(
        &self,
        cx: &StepContext<'_>,
        side: Side,
    ) -> Result<Vec<String>, MoveError> {
        let (shard, name) = match side {
            Side::Source => (&cx.pair.source, &cx.pair.from),
            Side::Dest => (&cx.pair.dest, &cx.pair.to),
        };
        self.members_on(cx, shard, name).await
    }

    /// [`Scope::members`] as `shard` (one of the move's two, called `name`) sees them:
    /// a session may hold an older snapshot.
    pub async fn members_on(
        &self,
        cx: &StepContext<'_>,
        shard: &Client,
        name: &str,
    ) -> Result<Vec<String>, MoveError> {
        let ranges = match self {
            Scope::Tenants(tenants) => return Ok(tenants.clone()),
            Scope::Ranges(ranges) => ranges,
        };
        let placed = placed_in(cx, ranges).await?;
        let found = tenants_where(shard, cx.tables, |t| in_ranges(ranges, t))
            .await
            .map_err(on_shard(format!("cannot list the tenants on {name}")))?;
        Ok(found
            .into_iter()
            .filter(|t| !placed.contains_key(t))
            .collect())
    }

    /// Before a range move copies anything: the tenants the directory or a config pin
    /// places on the source in its ranges are marked placed there, so the source keeps
    /// accepting them once it has given the range away (and its capture skips them).
    pub async fn keep_placed_on_source(
        &self,
        cx: &StepContext<'_>,
        from: &str,
    ) -> Result<usize, MoveError> {
        let Scope::Ranges(ranges) = self else {
            return Ok(0);
        };
        let staying: Vec<String> = placed_in(cx, ranges)
            .await?
            .into_iter()
            .filter(|(_, (shard, _))| shard == from)
            .map(|(tenant, _)| tenant)
            .collect();
        for tenant in &staying {
            place(cx, from, tenant).await?;
        }
        Ok(staying.len())
    }

    /// Routes the move to `to`: each tenant's directory row (and the shards' copy of it),
    /// or the ranges in the live slot map. Every web replica hears of it at once.
    pub async fn route_to(
        &self,
        cx: &StepContext<'_>,
        m: &MoveRecord,
        to: &str,
    ) -> Result<(), MoveError> {
        match self {
            Scope::Tenants(tenants) => {
                let note = format!("move_slot move {}", m.id);
                let mut directory = cx.control().await?;
                for tenant in tenants {
                    place(cx, to, tenant).await?;
                    table::upsert(&mut directory, tenant, to, Some(&note))
                        .await
                        .map_err(on_control("cannot re-pin in the directory"))?;
                    unplace(cx, &m.from, tenant).await?;
                }
                Ok(())
            }
            Scope::Ranges(ranges) => {
                let mut control = cx.control().await?;
                slot_map::assign(&mut control, cx.shards.topology(), ranges, to, m.id)
                    .await
                    .map_err(on_control("cannot change the slot map"))
            }
        }
    }

    /// Routing back as before the move (an abort after the flip).
    pub async fn route_back(&self, cx: &StepContext<'_>, m: &MoveRecord) -> Result<(), MoveError> {
        match self {
            Scope::Tenants(tenants) => {
                let mut directory = cx.control().await?;
                for tenant in tenants {
                    let previous = m.previous.get(tenant).cloned().flatten();
                    let restored = match &previous {
                        Some(shard) => {
                            place(cx, shard, tenant).await?;
                            let note = Some("restored by move_slot abort");
                            table::upsert(&mut directory, tenant, shard, note).await
                        }
                        None => table::remove(&mut directory, tenant).await.map(drop),
                    };
                    restored.map_err(on_control("cannot restore the directory"))?;
                    if previous.as_deref() != Some(m.to.as_str()) {
                        unplace(cx, &m.to, tenant).await?;
                    }
                }
                Ok(())
            }
            Scope::Ranges(_) => self.route_to(cx, m, &m.from).await,
        }
    }

    /// Whether routing still sends the move to its destination (someone may have changed
    /// it since the re-pin): `Err` names what routes elsewhere now.
    pub async fn still_routed_to_destination(
        &self,
        cx: &StepContext<'_>,
        m: &MoveRecord,
    ) -> Result<(), MoveError> {
        let mut control = cx.control().await?;
        match self {
            Scope::Tenants(tenants) => {
                for tenant in tenants {
                    let row = table::shard_of(&mut control, tenant)
                        .await
                        .map_err(on_control("cannot read the tenant directory"))?;
                    if row.as_deref() != Some(m.to.as_str()) {
                        return Err(MoveError::Rerouted {
                            move_id: m.id,
                            tenant: tenant.clone(),
                            now: row,
                            to: m.to.clone(),
                        });
                    }
                }
                Ok(())
            }
            Scope::Ranges(ranges) => {
                let topology = cx.shards.topology();
                let owners = live_owners(topology, &mut control).await?;
                for slot in ranges.iter().flat_map(|r| r.iter()) {
                    let now = topology.shards[owners.owner(slot).shard].name.as_str();
                    if now != m.to {
                        return Err(MoveError::RangeRerouted {
                            move_id: m.id,
                            slot,
                            now: now.to_owned(),
                            to: m.to.clone(),
                        });
                    }
                }
                Ok(())
            }
        }
    }
}

/// Queues a reindex job per moved tenant, so the destination's search index and tag counts
/// are exact whatever happened during the copy; the keys make a resumed move queue each once.
pub async fn queue_reindex(
    cx: &StepContext<'_>,
    m: &MoveRecord,
    tenants: &[String],
) -> Result<(), MoveError> {
    let mut parsed = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        parsed.push(Job::ReindexTenant {
            tenant: TenantId::parse(tenant)
                .map_err(|e| MoveError::Setup(format!("tenant {tenant:?}: {e}")))?,
        });
    }
    let keys: Vec<String> = tenants
        .iter()
        .map(|t| format!("move-{}-reindex-{t}", m.id))
        .collect();
    let jobs: Vec<queue::NewJob<'_>> = parsed
        .iter()
        .zip(&keys)
        .map(|(job, key)| queue::NewJob {
            job,
            idempotency_key: Some(key),
            max_attempts: jobs::DEFAULT_MAX_ATTEMPTS,
        })
        .collect();
    queue::enqueue_many(&mut *cx.control().await?, &jobs)
        .await
        .map_err(on_control("cannot enqueue the reindex jobs"))?;
    Ok(())
}

/// Lets `shard` accept `tenant` whatever its slot guard says (see [`placed`]).
async fn place(cx: &StepContext<'_>, shard: &str, tenant: &str) -> Result<(), MoveError> {
    placed::place(cx.shards, shard, tenant)
        .await
        .map_err(|e| MoveError::Setup(format!("cannot mark {tenant} placed on {shard}: {e}")))
}

/// Takes that exception away.
async fn unplace(cx: &StepContext<'_>, shard: &str, tenant: &str) -> Result<(), MoveError> {
    placed::unplace(cx.shards, shard, tenant)
        .await
        .map_err(|e| MoveError::Setup(format!("cannot unmark {tenant} placed on {shard}: {e}")))
}

/// Whether `tenant`'s key hashes into `ranges`.
pub fn in_ranges(ranges: &[SlotRange], tenant: &str) -> bool {
    let slot = ShardKey::Str(tenant).slot().index();
    ranges.iter().any(|r| r.contains(slot))
}

/// The tenants of `ranges` that a directory row or a config pin places: where, and which.
pub type Placed = BTreeMap<String, (String, &'static str)>;

async fn placed_in(cx: &StepContext<'_>, ranges: &[SlotRange]) -> Result<Placed, MoveError> {
    placed_tenants(cx.shards, &mut *cx.control().await?, ranges).await
}

/// See [`placed_in`]; for the planner too.
pub async fn placed_tenants(
    shards: &ShardSet,
    control: &mut diesel_async::AsyncPgConnection,
    ranges: &[SlotRange],
) -> Result<Placed, MoveError> {
    let topology = shards.topology();
    let mut placed: Placed = topology
        .pins
        .iter()
        .filter(|(tenant, _)| in_ranges(ranges, tenant))
        .map(|(tenant, &i)| {
            let shard = topology.shards[i].name.as_str().to_owned();
            (tenant.clone(), (shard, "pin"))
        })
        .collect();
    let rows = table::list(control)
        .await
        .map_err(on_control("cannot read the tenant directory"))?;
    for row in rows {
        if in_ranges(ranges, &row.tenant_key) {
            placed.insert(row.tenant_key, (row.shard_name, "directory"));
        }
    }
    Ok(placed)
}
