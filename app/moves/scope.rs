//! What a move carries: named tenants (`--tenant`, `--slot`: a tenant move, placed by
//! directory rows), or the slot ranges themselves (`--slots`: a range move, placed by the
//! live slot map, which carries every tenant the slot map sends through the ranges,
//! including tenants that first write while it runs). The steps are the same for both;
//! they differ in which guard a shard gets (each [`MoveIo`](super::io::MoveIo)), and in
//! who the members are and how routing changes hands (`steps::routing`).

use std::collections::BTreeMap;

use super::error::DbError;
use super::record::MoveRecord;
use crate::sharding::directory::table;
use crate::sharding::{ShardKey, ShardSet, SlotRange};

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
}

/// Whether `tenant`'s key hashes into `ranges`.
pub fn in_ranges(ranges: &[SlotRange], tenant: &str) -> bool {
    let slot = ShardKey::Str(tenant).slot().index();
    ranges.iter().any(|r| r.contains(slot))
}

/// The tenants of `ranges` that a directory row or a config pin places: where, and which.
pub type Placed = BTreeMap<String, (String, &'static str)>;

/// The tenants of `ranges` that a directory row or a config pin places: where, and which.
pub async fn placed_tenants(
    shards: &ShardSet,
    control: &mut diesel_async::AsyncPgConnection,
    ranges: &[SlotRange],
) -> Result<Placed, DbError> {
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
    let rows = table::list(control).await?;
    for row in rows {
        if in_ranges(ranges, &row.tenant_key) {
            placed.insert(row.tenant_key, (row.shard_name, "directory"));
        }
    }
    Ok(placed)
}
