//! Pinning and unpinning tenants in the directory, under the rule that keeps data reachable:
//! placing a tenant does not move its rows, so a change that would route a tenant away from
//! the only shard holding its rows is refused unless forced (`move_slot` moves rows).
//! The CLI and the admin page both place tenants through here.

use diesel_async::AsyncPgConnection;

use super::placed::{self, PlacedError};
use super::table;
use crate::pg::bounded::{ServerError, within};
use crate::pg::pool::{PgConn, PgPool};
use crate::sharding::router::{PinRouter, RouteVia};
use crate::sharding::row_security::{self, RowScope};
use crate::sharding::shard_set::ShardSet;
use crate::sharding::slot::ShardKey;
use crate::sharding::slot_range::SlotRanges;
use crate::sharding::tenant_rows::{self, TenantTable};

/// Where a tenant routes, by name, and which rule said so.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NamedRoute {
    pub shard: String,
    pub via: &'static str,
}

/// What a pin or unpin did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Change {
    pub tenant: String,
    pub before: NamedRoute,
    pub after: NamedRoute,
    /// The tenant's rows on the shard it routed to before, and on the one it routes to now
    /// (counted only when the two differ and the check was not skipped).
    pub rows_before: Option<i64>,
    pub rows_after: Option<i64>,
    /// False when there was nothing to do (unpinning a tenant without a row).
    pub changed: bool,
}

impl Change {
    fn new(
        tenant: &str,
        before: NamedRoute,
        after: NamedRoute,
        (rows_before, rows_after): (Option<i64>, Option<i64>),
        changed: bool,
    ) -> Self {
        Self {
            tenant: tenant.to_owned(),
            before,
            after,
            rows_before,
            rows_after,
            changed,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "directory routing is off ([sharding] directory_router = false), so a directory row \
         would not be consulted; turn it on first (or AUTUMN_SHARDING__DIRECTORY_ROUTER=true)"
    )]
    DirectoryOff,
    #[error("no shard is named {name:?} (shards: {known})")]
    UnknownShard { name: String, known: String },
    #[error(
        "refusing to {action} {tenant:?}: it has {rows} row(s) on {from}, where it routes now, \
         and none on {to}. Pinning places a tenant, it does not move its data: the tenant would \
         see an empty {to} and its rows would stay behind on {from}. Move it with \
         `move_slot run --from {from} --to {to} --tenant {tenant}`, or pass --force if the rows \
         are meant to stay behind"
    )]
    WouldStrand {
        action: &'static str,
        tenant: String,
        from: String,
        to: String,
        rows: i64,
    },
    #[error(
        "refusing to place {tenant:?} now: its slot {slot} is in range move {move_id}, which \
         moves the slot's tenants by the slot map; wait for it (`move_slot status {move_id}`) \
         or abort it, then place the tenant"
    )]
    RangeMoving {
        tenant: String,
        slot: u16,
        move_id: i64,
    },
    #[error("cannot use the tenant directory on the control database: {0}")]
    Control(String),
    /// The shards' copy of placement (`_autumn_placed_tenants`) could not be written.
    #[error(
        "cannot record {tenant:?}'s placement on the shards ({cause}); the directory was not \
         changed, retry once the shard answers"
    )]
    Placed { tenant: String, cause: String },
    #[error(
        "cannot count {tenant:?}'s rows on shard {shard}: {cause} (--force pins without checking)"
    )]
    Shard {
        tenant: String,
        shard: String,
        cause: String,
    },
}

impl PlacementError {
    /// A refusal (bad input, or a change that would strand data), as opposed to a failure
    /// to reach a database.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            PlacementError::DirectoryOff
                | PlacementError::UnknownShard { .. }
                | PlacementError::WouldStrand { .. }
                | PlacementError::RangeMoving { .. }
        )
    }
}

/// Where `tenant` routes now in `shards`' deployment: its directory row (read afresh through
/// `control`), else config pin, else hash. Tools that must see the directory as it is now
/// (placement, moves) ask here rather than through a router's cache.
pub async fn current(
    control: &mut AsyncPgConnection,
    shards: &ShardSet,
    tenant: &str,
) -> diesel::QueryResult<NamedRoute> {
    Ok(match table::shard_of(control, tenant).await? {
        Some(shard) => NamedRoute {
            shard,
            via: RouteVia::Directory.as_str(),
        },
        None => without_directory(shards, tenant),
    })
}

#[derive(diesel::QueryableByName)]
struct RangeMove {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    slots: String,
}

/// The unfinished range move (`move_slot --slots`) whose ranges hold `slot`, if any.
pub async fn range_move_covering(
    control: &mut AsyncPgConnection,
    slot: u16,
) -> diesel::QueryResult<Option<i64>> {
    use diesel_async::RunQueryDsl;
    let moves: Vec<RangeMove> = diesel::sql_query(
        "SELECT id, slots FROM tenant_moves WHERE slots IS NOT NULL \
         AND state NOT IN ('done', 'aborted') ORDER BY id",
    )
    .load(control)
    .await?;
    Ok(moves
        .into_iter()
        .find(|m| {
            m.slots
                .parse::<SlotRanges>()
                .is_ok_and(|ranges| ranges.as_slice().iter().any(|r| r.contains(slot)))
        })
        .map(|m| m.id))
}

/// Where config pins and the hash put `tenant`, ignoring the directory.
pub fn without_directory(shards: &ShardSet, tenant: &str) -> NamedRoute {
    let route = PinRouter::from_shard_set(shards).decide(ShardKey::Str(tenant), shards);
    NamedRoute {
        shard: shards.get(route.shard).name().to_owned(),
        via: route.via.as_str(),
    }
}

/// One placed tenant as operators list them: a directory row or a config pin, and
/// whether it is the rule in effect.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct PinEntry {
    pub tenant: String,
    pub shard: String,
    /// `directory` or `config`.
    pub source: &'static str,
    /// False for a directory row while directory routing is off, and for a config pin
    /// shadowed by a directory row.
    pub effective: bool,
    pub slot: u16,
    pub hash_shard: String,
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
    pub note: Option<String>,
    /// Set when the entry cannot work as written (a shard that is not configured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Every directory row, then every config pin, with the rule each is subject to.
pub fn pin_entries(shards: &ShardSet, rows: &[table::DirectoryRow]) -> Vec<PinEntry> {
    let topology = shards.topology();
    let hash_shard = |key: &str| {
        shards
            .get(crate::sharding::hash_route(shards, ShardKey::Str(key)).shard)
            .name()
            .to_owned()
    };
    let mut entries: Vec<PinEntry> = rows
        .iter()
        .map(|row| PinEntry {
            tenant: row.tenant_key.clone(),
            shard: row.shard_name.clone(),
            source: "directory",
            effective: topology.directory_router,
            slot: ShardKey::Str(&row.tenant_key).slot().index(),
            hash_shard: hash_shard(&row.tenant_key),
            updated_at: Some(row.updated_at),
            note: row.note.clone(),
            problem: shards.by_name(&row.shard_name).is_none().then(|| {
                format!(
                    "shard {:?} is not configured: this tenant's requests fail",
                    row.shard_name
                )
            }),
        })
        .collect();
    for (tenant, &index) in &topology.pins {
        let shadowed = topology.directory_router && rows.iter().any(|r| &r.tenant_key == tenant);
        entries.push(PinEntry {
            tenant: tenant.clone(),
            shard: topology.shards[index].name.as_str().to_owned(),
            source: "config",
            effective: !shadowed,
            slot: ShardKey::Str(tenant).slot().index(),
            hash_shard: hash_shard(tenant),
            updated_at: None,
            note: None,
            problem: None,
        });
    }
    entries
}

/// Places tenants through the directory table of one deployment.
pub struct Placer<'a> {
    pub shards: &'a ShardSet,
    pub control: &'a PgPool,
    /// The application's tenant-scoped tables, to find a tenant's rows.
    pub tables: &'a [TenantTable],
}

impl Placer<'_> {
    /// Pins `tenant` to `shard` (a directory row), refusing to strand its rows unless `force`.
    pub async fn pin(
        &self,
        tenant: &str,
        shard: &str,
        note: Option<&str>,
        force: bool,
    ) -> Result<Change, PlacementError> {
        self.require_directory()?;
        let target = self
            .shards
            .by_name(shard)
            .ok_or_else(|| PlacementError::UnknownShard {
                name: shard.to_owned(),
                known: self.shards.topology().shard_names(),
            })?;
        let mut control = self.control_conn().await?;
        self.refresh_slot_map(&mut control).await?;
        let before = self.current(&mut control, tenant).await?;
        let after = NamedRoute {
            shard: target.name().to_owned(),
            via: RouteVia::Directory.as_str(),
        };
        let rows = self
            .check_rows("pin", tenant, &before, &after, force)
            .await?;
        self.refuse_during_range_move(&mut control, tenant).await?;
        // The new shard accepts the tenant before the directory sends it there, and the
        // old one stops before the directory stops sending it there: at worst a write is
        // refused for a moment, never stored on a shard the tenant no longer lives on.
        self.placed(
            placed::place(self.shards, target.name(), tenant).await,
            tenant,
        )?;
        if before.via == RouteVia::Directory.as_str()
            && before.shard != target.name()
            && self.shards.by_name(&before.shard).is_some()
        {
            self.placed(
                placed::unplace(self.shards, &before.shard, tenant).await,
                tenant,
            )?;
        }
        table::upsert(&mut control, tenant, target.name(), note)
            .await
            .map_err(|e| PlacementError::Control(e.to_string()))?;
        Ok(Change::new(tenant, before, after, rows, true))
    }

    /// Removes `tenant`'s directory row, refusing to strand its rows unless `force`.
    pub async fn unpin(&self, tenant: &str, force: bool) -> Result<Change, PlacementError> {
        self.require_directory()?;
        let mut control = self.control_conn().await?;
        self.refresh_slot_map(&mut control).await?;
        let before = self.current(&mut control, tenant).await?;
        let after = self.without_directory(tenant);
        if before.via != RouteVia::Directory.as_str() {
            return Ok(Change::new(tenant, before, after, (None, None), false));
        }
        let rows = self
            .check_rows("unpin", tenant, &before, &after, force)
            .await?;
        self.refuse_during_range_move(&mut control, tenant).await?;
        if self.shards.by_name(&before.shard).is_some() {
            self.placed(
                placed::unplace(self.shards, &before.shard, tenant).await,
                tenant,
            )?;
        }
        table::remove(&mut control, tenant)
            .await
            .map_err(|e| PlacementError::Control(e.to_string()))?;
        Ok(Change::new(tenant, before, after, rows, true))
    }

    /// Routes by the slot map as it is now (a tool's shard set starts from autumn.toml's).
    async fn refresh_slot_map(
        &self,
        control: &mut AsyncPgConnection,
    ) -> Result<(), PlacementError> {
        self.shards
            .slot_map()
            .load_from(self.shards.topology(), control)
            .await
            .map_err(|e| PlacementError::Control(e.to_string()))
    }

    fn placed(&self, outcome: Result<(), PlacedError>, tenant: &str) -> Result<(), PlacementError> {
        outcome.map_err(|cause| PlacementError::Placed {
            tenant: tenant.to_owned(),
            cause: cause.to_string(),
        })
    }

    /// A range move decides its slots' tenants by the slot map while it runs: placing one
    /// of them then would change which tenants it moves under its feet.
    async fn refuse_during_range_move(
        &self,
        control: &mut AsyncPgConnection,
        tenant: &str,
    ) -> Result<(), PlacementError> {
        let slot = ShardKey::Str(tenant).slot().index();
        let moving = range_move_covering(control, slot)
            .await
            .map_err(|e| PlacementError::Control(e.to_string()))?;
        match moving {
            Some(move_id) => Err(PlacementError::RangeMoving {
                tenant: tenant.to_owned(),
                slot,
                move_id,
            }),
            None => Ok(()),
        }
    }

    /// Where `tenant` routes now: its directory row (read afresh), else pin, else hash.
    pub async fn current(
        &self,
        control: &mut AsyncPgConnection,
        tenant: &str,
    ) -> Result<NamedRoute, PlacementError> {
        current(control, self.shards, tenant)
            .await
            .map_err(|e| PlacementError::Control(e.to_string()))
    }

    fn without_directory(&self, tenant: &str) -> NamedRoute {
        without_directory(self.shards, tenant)
    }

    /// Counts the tenant's rows where it routes before and after; refuses when the change
    /// would leave every row behind. A shard the directory names but the topology lacks
    /// holds nothing we can count, so leaving it is always allowed.
    async fn check_rows(
        &self,
        action: &'static str,
        tenant: &str,
        before: &NamedRoute,
        after: &NamedRoute,
        force: bool,
    ) -> Result<(Option<i64>, Option<i64>), PlacementError> {
        if force || before.shard == after.shard || self.shards.by_name(&before.shard).is_none() {
            return Ok((None, None));
        }
        let rows_before = self.rows_on(tenant, &before.shard).await?;
        let rows_after = self.rows_on(tenant, &after.shard).await?;
        if rows_before > 0 && rows_after == 0 {
            return Err(PlacementError::WouldStrand {
                action,
                tenant: tenant.to_owned(),
                from: before.shard.clone(),
                to: after.shard.clone(),
                rows: rows_before,
            });
        }
        Ok((Some(rows_before), Some(rows_after)))
    }

    async fn rows_on(&self, tenant: &str, shard_name: &str) -> Result<i64, PlacementError> {
        let fail = |cause: String| PlacementError::Shard {
            tenant: tenant.to_owned(),
            shard: shard_name.to_owned(),
            cause,
        };
        let shard = self
            .shards
            .by_name(shard_name)
            .ok_or_else(|| fail("not configured".to_owned()))?;
        let count = async {
            let mut conn = shard.primary_pool().get().await?;
            row_security::declare(&mut conn, RowScope::Tenant(tenant)).await?;
            Ok(tenant_rows::count(&mut conn, self.tables, tenant).await?)
        };
        self.bounded(count).await.map_err(|e| fail(e.to_string()))
    }

    async fn control_conn(&self) -> Result<PgConn, PlacementError> {
        self.bounded(async { Ok(self.control.get().await?) })
            .await
            .map_err(|e| PlacementError::Control(e.to_string()))
    }

    async fn bounded<T>(
        &self,
        work: impl Future<Output = Result<T, ServerError>>,
    ) -> Result<T, ServerError> {
        within(self.shards.topology().acquire_timeout, work).await
    }

    fn require_directory(&self) -> Result<(), PlacementError> {
        if self.shards.topology().directory_router {
            Ok(())
        } else {
            Err(PlacementError::DirectoryOff)
        }
    }
}
