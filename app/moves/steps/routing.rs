//! How a move's scope (see [`Scope`]) meets routing: who its members are on a shard, and how
//! the directory rows or the live slot map change hands, through the move's [`MoveIo`].

use crate::moves::error::{MoveError, on_db};
use crate::moves::io::{At, MoveIo};
use crate::moves::record::MoveRecord;
use crate::moves::scope::Scope;
use crate::tenancy::TenantId;

/// The tenants whose rows the move carries, as `at` holds them now (a snapshot may be
/// older). For a range: every tenant with rows there whose key hashes into the ranges,
/// except those the directory or a config pin places (they stay where they are placed).
pub async fn members<Io: MoveIo>(
    scope: &Scope,
    io: &Io,
    m: &MoveRecord,
    at: At,
) -> Result<Vec<String>, MoveError> {
    let ranges = match scope {
        Scope::Tenants(tenants) => return Ok(tenants.clone()),
        Scope::Ranges(ranges) => ranges,
    };
    let placed = io
        .placed_in(ranges)
        .await
        .map_err(on_db("cannot read the tenant directory"))?;
    let name = if at == At::Dest { &m.to } else { &m.from };
    let found = io
        .tenants_in(at, ranges)
        .await
        .map_err(on_db(format!("cannot list the tenants on {name}")))?;
    Ok(found
        .into_iter()
        .filter(|t| !placed.contains_key(t))
        .collect())
}

/// Before a range move copies anything: the tenants the directory or a config pin
/// places on the source in its ranges are marked placed there, so the source keeps
/// accepting them once it has given the range away (and its capture skips them).
pub async fn keep_placed_on_source<Io: MoveIo>(
    scope: &Scope,
    io: &mut Io,
    from: &str,
) -> Result<usize, MoveError> {
    let Scope::Ranges(ranges) = scope else {
        return Ok(0);
    };
    let staying: Vec<String> = io
        .placed_in(ranges)
        .await
        .map_err(on_db("cannot read the tenant directory"))?
        .into_iter()
        .filter(|(_, (shard, _))| shard == from)
        .map(|(tenant, _)| tenant)
        .collect();
    for tenant in &staying {
        place(io, from, tenant, true).await?;
    }
    Ok(staying.len())
}

/// Routes the move to `to`: each tenant's directory row (and the shards' copy of it),
/// or the ranges in the live slot map. Every web replica hears of it at once.
pub async fn route_to<Io: MoveIo>(
    scope: &Scope,
    io: &mut Io,
    m: &MoveRecord,
    to: &str,
) -> Result<(), MoveError> {
    match scope {
        Scope::Tenants(tenants) => {
            let note = format!("move_slot move {}", m.id);
            for tenant in tenants {
                place(io, to, tenant, true).await?;
                io.set_directory_row(tenant, Some(to), &note)
                    .await
                    .map_err(on_db("cannot re-pin in the directory"))?;
                place(io, &m.from, tenant, false).await?;
            }
            Ok(())
        }
        Scope::Ranges(ranges) => io
            .assign_slots(ranges, to, m.id)
            .await
            .map_err(on_db("cannot change the slot map")),
    }
}

/// Routing back as before the move (an abort after the flip).
pub async fn route_back<Io: MoveIo>(
    scope: &Scope,
    io: &mut Io,
    m: &MoveRecord,
) -> Result<(), MoveError> {
    match scope {
        Scope::Tenants(tenants) => {
            for tenant in tenants {
                let previous = m.previous.get(tenant).cloned().flatten();
                if let Some(shard) = &previous {
                    place(io, shard, tenant, true).await?;
                }
                io.set_directory_row(tenant, previous.as_deref(), "restored by move_slot abort")
                    .await
                    .map_err(on_db("cannot restore the directory"))?;
                if previous.as_deref() != Some(m.to.as_str()) {
                    place(io, &m.to, tenant, false).await?;
                }
            }
            Ok(())
        }
        Scope::Ranges(_) => route_to(scope, io, m, &m.from.clone()).await,
    }
}

/// Whether routing still sends the move to its destination (someone may have changed
/// it since the re-pin): `Err` names what routes elsewhere now.
pub async fn still_routed_to_destination<Io: MoveIo>(
    scope: &Scope,
    io: &Io,
    m: &MoveRecord,
) -> Result<(), MoveError> {
    match scope {
        Scope::Tenants(tenants) => {
            for tenant in tenants {
                let row = io
                    .directory_row(tenant)
                    .await
                    .map_err(on_db("cannot read the tenant directory"))?;
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
            let elsewhere = io
                .slot_routed_elsewhere(ranges, &m.to)
                .await
                .map_err(on_db("cannot read the slot map"))?;
            match elsewhere {
                None => Ok(()),
                Some((slot, now)) => Err(MoveError::RangeRerouted {
                    move_id: m.id,
                    slot,
                    now,
                    to: m.to.clone(),
                }),
            }
        }
    }
}

/// Queues a reindex job per moved tenant, so the destination's search index and tag counts
/// are exact whatever happened during the copy; the keys make a resumed move queue each once.
pub async fn queue_reindex<Io: MoveIo>(
    io: &mut Io,
    m: &MoveRecord,
    tenants: &[String],
) -> Result<(), MoveError> {
    let mut parsed = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        parsed.push(
            TenantId::parse(tenant)
                .map_err(|e| MoveError::Setup(format!("tenant {tenant:?}: {e}")))?,
        );
    }
    io.enqueue_reindex(m.id, &parsed)
        .await
        .map_err(on_db("cannot enqueue the reindex jobs"))
}

/// Lets `shard` accept `tenant` whatever its slot guard says, or (`on` false) takes that
/// exception away (see [`placed`](crate::sharding::directory::placed)).
async fn place<Io: MoveIo>(
    io: &mut Io,
    shard: &str,
    tenant: &str,
    on: bool,
) -> Result<(), MoveError> {
    let what = match on {
        true => format!("cannot mark {tenant} placed on {shard}"),
        false => format!("cannot unmark {tenant} placed on {shard}"),
    };
    io.set_placed(shard, tenant, on).await.map_err(on_db(what))
}
