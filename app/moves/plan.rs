//! What a move would do: which tenants (named, or every tenant of a slot with rows on the
//! source), how many rows each has on both shards, where each routes now, and whether it
//! can move at all.

use serde_json::{Value, json};
use tokio_postgres::Client;

use super::conn::ident;
use crate::sharding::slot_range::{SlotRange, compact};
use crate::sharding::tenant_rows::TenantTable;
use crate::sharding::{ShardKey, Topology};

/// Which tenants a command is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantSelection {
    Tenants(Vec<String>),
    /// Every tenant hashing to this slot that has rows on the source (placed by directory
    /// rows afterwards).
    Slot(u16),
    /// The slot ranges themselves: the slot map gives them to the destination, with every
    /// tenant it routes through them, present and future.
    Ranges(Vec<SlotRange>),
}

/// One tenant in a plan.
#[derive(Clone, Debug)]
pub struct TenantPlan {
    pub tenant: String,
    pub route: String,
    pub via: &'static str,
    /// Per table: rows on the source, rows on the destination.
    pub rows: Vec<(&'static str, i64, i64)>,
    /// Why the tenant cannot move, if it cannot.
    pub blocker: Option<String>,
}

impl TenantPlan {
    pub fn new(
        tenant: String,
        from: &str,
        to: &str,
        route: String,
        via: &'static str,
        rows_from: Vec<(&'static str, i64)>,
        rows_to: Vec<(&'static str, i64)>,
    ) -> Self {
        let rows: Vec<(&'static str, i64, i64)> = rows_from
            .iter()
            .zip(&rows_to)
            .map(|((table, f), (_, t))| (*table, *f, *t))
            .collect();
        let on_dest: i64 = rows.iter().map(|r| r.2).sum();
        let blocker = if route != from {
            Some(format!(
                "it routes to {route} (via {via}), not {from}; there is nothing to move from {from}"
            ))
        } else if on_dest > 0 {
            Some(format!(
                "it already has {on_dest} row(s) on {to}, which a move would overwrite; look \
                 at them (the admin page's tenant lookup flags strays) and remove them first"
            ))
        } else {
            None
        };
        Self {
            tenant,
            route,
            via,
            rows,
            blocker,
        }
    }

    pub fn rows_on_source(&self) -> i64 {
        self.rows.iter().map(|r| r.1).sum()
    }

    /// The `move_slot plan` line.
    pub fn to_json(&self, from: &str, to: &str) -> Value {
        let rows: serde_json::Map<String, Value> = self
            .rows
            .iter()
            .map(|(table, f, t)| ((*table).to_owned(), json!({ from: f, to: t })))
            .collect();
        json!({
            "tenant": self.tenant,
            "slot": ShardKey::Str(&self.tenant).slot().index(),
            "route": { "shard": self.route, "via": self.via },
            "rows": rows,
            "moves": self.blocker.is_none(),
            "blocker": self.blocker,
        })
    }
}

/// Every tenant with rows on the connected shard whose key hashes to `slot`. Walks the
/// tenant column's index one distinct value at a time, so a shard of few, large tenants
/// costs a lookup per tenant rather than a scan of every row.
pub async fn tenants_in_slot(
    shard: &Client,
    tables: &[TenantTable],
    slot: u16,
) -> Result<Vec<String>, tokio_postgres::Error> {
    tenants_where(shard, tables, |t| ShardKey::Str(t).slot().index() == slot).await
}

/// Every tenant with rows on the connected shard for which `keep` holds, walking each
/// tenant column's index as [`tenants_in_slot`] does.
pub async fn tenants_where(
    shard: &Client,
    tables: &[TenantTable],
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut tenants = std::collections::BTreeSet::new();
    for table in tables {
        let (t, c) = (ident(table.name), ident(table.tenant_column));
        let rows = shard
            .query(
                &format!(
                    "WITH RECURSIVE walk AS ( \
                       (SELECT {c} AS k FROM {t} ORDER BY {c} LIMIT 1) \
                       UNION ALL \
                       SELECT (SELECT {c} FROM {t} WHERE {c} > walk.k ORDER BY {c} LIMIT 1) \
                       FROM walk WHERE walk.k IS NOT NULL) \
                     SELECT k FROM walk WHERE k IS NOT NULL"
                ),
                &[],
            )
            .await?;
        for row in rows {
            let tenant: String = row.get(0);
            if keep(&tenant) {
                tenants.insert(tenant);
            }
        }
    }
    Ok(tenants.into_iter().collect())
}

/// Those of `candidates` with at least one row on the connected shard: one index probe
/// per candidate and table, whatever their sizes.
pub async fn tenants_with_rows(
    shard: &Client,
    tables: &[TenantTable],
    candidates: &[String],
) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut found = std::collections::BTreeSet::new();
    for table in tables {
        let (t, c) = (ident(table.name), ident(table.tenant_column));
        let rows = shard
            .query(
                &format!(
                    "SELECT k FROM unnest($1::text[]) AS k \
                     WHERE EXISTS (SELECT 1 FROM {t} WHERE {c} = k)"
                ),
                &[&candidates],
            )
            .await?;
        found.extend(rows.iter().map(|r| r.get::<_, String>(0)));
    }
    Ok(found.into_iter().collect())
}

/// Each tenant's rows per table on the connected shard, in `tenants`' order: one grouped
/// count per table, whatever the number of tenants.
pub async fn rows_by_tenant(
    shard: &Client,
    tables: &[TenantTable],
    tenants: &[String],
) -> Result<Vec<Vec<(&'static str, i64)>>, tokio_postgres::Error> {
    let mut counts: Vec<Vec<(&'static str, i64)>> = vec![Vec::new(); tenants.len()];
    for table in tables {
        let (t, c) = (ident(table.name), ident(table.tenant_column));
        let rows = shard
            .query(
                &format!("SELECT {c}, count(*) FROM {t} WHERE {c} = ANY($1) GROUP BY {c}"),
                &[&tenants],
            )
            .await?;
        let by: std::collections::HashMap<String, i64> =
            rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        for (i, tenant) in tenants.iter().enumerate() {
            counts[i].push((table.name, by.get(tenant).copied().unwrap_or(0)));
        }
    }
    Ok(counts)
}

/// The `autumn.toml` edit that moves `slot` from one shard's list to the other's.
pub fn slot_remap_advice(topology: &Topology, slot: u16, from: &str, to: &str) -> String {
    let slots_of = |name: &str, with: bool| -> String {
        let spec = topology
            .shard_named(name)
            .expect("move shards are configured");
        let mut all: Vec<u16> = spec
            .slots
            .iter()
            .flat_map(|r: &SlotRange| r.iter())
            .filter(|&s| s != slot)
            .collect();
        if with {
            all.push(slot);
        }
        all.sort_unstable();
        let ranges: Vec<String> = compact(all).iter().map(|r| format!("\"{r}\"")).collect();
        format!("[{}]", ranges.join(", "))
    };
    let first = if topology.auto_assigned {
        "declare explicit slots on every shard first (the slot map is auto-split now, and \
         editing it then would move other slots too), then "
    } else {
        ""
    };
    format!(
        "every tenant of slot {slot} that had rows on {from} is on {to} now. To make that the \
         slot map's placement (and stop relying on the directory rows), {first}move slot \
         {slot} in autumn.toml: shard {from}: slots = {}; shard {to}: slots = {}; check it \
         with `bookmarks check-config`, deploy, then `bookmarks unpin` the moved tenants",
        slots_of(from, false),
        slots_of(to, true),
    )
}
