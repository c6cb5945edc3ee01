//! Planning and recording moves: what a move would do, recording it, and finding the
//! unfinished move a step command names.

use std::collections::BTreeMap;

use crate::moves::context::{self, directory_row, live_owners, rows_on};
use crate::moves::error::{MoveError, on_control, on_db, on_shard};
use crate::moves::plan::{self, TenantPlan, TenantSelection};
use crate::moves::record::{self, CreateError, MoveRecord, NewMove};
use crate::moves::scope;
use crate::sharding::directory::placement::{self, NamedRoute};
use crate::sharding::slot_range::ranges_text;
use crate::sharding::{ShardKey, SlotRange};

use super::Mover;

impl Mover {
    /// Where `tenant` routes now: its directory row, else config pin, else hash.
    async fn current_route(&self, tenant: &str) -> Result<NamedRoute, MoveError> {
        placement::current(
            &mut *context::control(&self.control).await?,
            &self.shards,
            tenant,
        )
        .await
        .map_err(on_control("cannot read the tenant directory"))
    }

    /// What moving `selection` from `from` to `to` would do; changes nothing.
    pub async fn plan(
        &self,
        from: &str,
        to: &str,
        selection: &TenantSelection,
    ) -> Result<Vec<TenantPlan>, MoveError> {
        self.check_pair(from, to)?;
        let tenants = match selection {
            TenantSelection::Ranges(ranges) => return self.plan_ranges(from, to, ranges).await,
            TenantSelection::Tenants(tenants) => tenants.clone(),
            TenantSelection::Slot(slot) => {
                let source = self.shard(from).await?;
                plan::tenants_in_slot(&source, self.tables, *slot)
                    .await
                    .map_err(on_shard(format!("cannot list the tenants on {from}")))?
            }
        };
        let mut plans = Vec::with_capacity(tenants.len());
        for tenant in tenants {
            let NamedRoute { shard: route, via } = self.current_route(&tenant).await?;
            let rows_from = rows_on(&self.shards, self.tables, from, &tenant).await?;
            let rows_to = rows_on(&self.shards, self.tables, to, &tenant).await?;
            plans.push(TenantPlan::new(
                tenant, from, to, route, via, rows_from, rows_to,
            ));
        }
        Ok(plans)
    }

    /// A range move's plan: every tenant of the ranges with rows on the source, with its
    /// rows on both shards; those a directory row or config pin places are marked staying.
    /// Refuses ranges the source does not own by the slot map.
    async fn plan_ranges(
        &self,
        from: &str,
        to: &str,
        ranges: &[SlotRange],
    ) -> Result<Vec<TenantPlan>, MoveError> {
        let mut control = context::control(&self.control).await?;
        let owners = live_owners(&self.topology, &mut control).await?;
        for slot in ranges.iter().flat_map(|r| r.iter()) {
            let owner = owners.owner(slot);
            let name = self.topology.shards[owner.shard].name.as_str();
            if name != from {
                return Err(MoveError::RangeNotOwned {
                    slot,
                    owner: name.to_owned(),
                    via: if owner.overridden {
                        "slot_map"
                    } else {
                        "config"
                    },
                    from: from.to_owned(),
                });
            }
        }
        let placed = scope::placed_tenants(&self.shards, &mut control, ranges)
            .await
            .map_err(on_db("cannot read the tenant directory"))?;
        drop(control);
        let source = self.shard(from).await?;
        let dest = self.shard(to).await?;
        let tenants = plan::tenants_where(&source, self.tables, |t| scope::in_ranges(ranges, t))
            .await
            .map_err(on_shard(format!("cannot list the tenants on {from}")))?;
        let on_source = plan::rows_by_tenant(&source, self.tables, &tenants)
            .await
            .map_err(on_shard(format!("cannot count rows on {from}")))?;
        let on_dest = plan::rows_by_tenant(&dest, self.tables, &tenants)
            .await
            .map_err(on_shard(format!("cannot count rows on {to}")))?;
        Ok(tenants
            .into_iter()
            .zip(on_source.into_iter().zip(on_dest))
            .map(|(tenant, (rows_from, rows_to))| {
                let (route, via) = match placed.get(&tenant) {
                    Some((shard, via)) => (shard.clone(), *via),
                    None => {
                        let slot = ShardKey::Str(&tenant).slot().index();
                        let via = if owners.owner(slot).overridden {
                            "slot_map"
                        } else {
                            "hash"
                        };
                        (from.to_owned(), via)
                    }
                };
                let stays = placed.get(&tenant).map(|(shard, via)| {
                    format!("the {via} places it on {shard}, so it stays where it is placed")
                });
                let mut p = TenantPlan::new(tenant, from, to, route, via, rows_from, rows_to);
                if stays.is_some() {
                    p.blocker = stays;
                }
                p
            })
            .collect())
    }

    /// Records a new move of `selection` (refusing tenants that cannot move) and returns it.
    pub async fn start(
        &mut self,
        from: &str,
        to: &str,
        selection: &TenantSelection,
        confirm: bool,
    ) -> Result<MoveRecord, MoveError> {
        if !self.topology.directory_router {
            return Err(MoveError::DirectoryOff);
        }
        let plans = self.plan(from, to, selection).await?;
        let named: Vec<String> = plans.iter().map(|p| p.tenant.clone()).collect();
        let mut control = context::control(&self.control).await?;
        if let Some(active) = record::active_for(&mut control, &named)
            .await
            .map_err(on_control("cannot read tenant_moves"))?
        {
            return Err(MoveError::Busy {
                tenants: active.tenants.join(", "),
                move_id: active.id,
            });
        }
        let (ready, skipped): (Vec<&TenantPlan>, Vec<&TenantPlan>) =
            plans.iter().partition(|p| p.blocker.is_none());
        match selection {
            TenantSelection::Ranges(ranges) => {
                // A tenant the slot map routes to the source but with rows on the
                // destination would have them overwritten: the whole range waits for it.
                let by_slot_map = |p: &&TenantPlan| matches!(p.via, "slot_map" | "hash");
                if let Some(p) = plans
                    .iter()
                    .filter(by_slot_map)
                    .find(|p| p.rows.iter().any(|r| r.2 > 0))
                {
                    let on_dest: i64 = p.rows.iter().map(|r| r.2).sum();
                    return Err(MoveError::CannotMove {
                        tenant: p.tenant.clone(),
                        blocker: format!(
                            "it already has {on_dest} row(s) on {to}, which the range move \
                             would overwrite; remove them first (the admin page's tenant \
                             lookup flags strays)"
                        ),
                    });
                }
                for p in &skipped {
                    self.progress.step(&format!(
                        "slots {}: {} stays: {}",
                        ranges_text(ranges),
                        p.tenant,
                        p.blocker.as_deref().unwrap_or_default()
                    ));
                }
            }
            TenantSelection::Tenants(_) => {
                if let Some(p) = skipped.first() {
                    return Err(MoveError::CannotMove {
                        tenant: p.tenant.clone(),
                        blocker: p.blocker.clone().unwrap_or_default(),
                    });
                }
            }
            TenantSelection::Slot(slot) => {
                for p in &skipped {
                    self.progress.step(&format!(
                        "slot {slot}: skipping {}: {}",
                        p.tenant,
                        p.blocker.as_deref().unwrap_or_default()
                    ));
                }
                if ready.is_empty() {
                    return Err(MoveError::NothingInSlot {
                        slot: *slot,
                        from: from.to_owned(),
                    });
                }
            }
        }
        let tenants: Vec<String> = ready.iter().map(|p| p.tenant.clone()).collect();
        let mut previous = BTreeMap::new();
        if !matches!(selection, TenantSelection::Ranges(_)) {
            for tenant in &tenants {
                previous.insert(tenant.clone(), directory_row(&self.control, tenant).await?);
            }
        }
        let slot = match selection {
            TenantSelection::Slot(slot) => Some(*slot),
            TenantSelection::Tenants(_) | TenantSelection::Ranges(_) => None,
        };
        let slots = match selection {
            TenantSelection::Ranges(ranges) => Some(ranges.as_slice()),
            _ => None,
        };
        if slots.is_some() {
            // Directory rows are not what a range move changes: nothing to restore.
            previous.clear();
        }
        let new = NewMove {
            tenants: &tenants,
            from,
            to,
            slot,
            slots,
            confirm,
            previous: &previous,
        };
        match record::create(&mut control, &new).await {
            Ok(record) => {
                self.label(&record);
                self.progress.step(&format!(
                    "recorded: {} tenant(s), {} row(s) to copy",
                    tenants.len(),
                    ready.iter().map(|p| p.rows_on_source()).sum::<i64>()
                ));
                Ok(record)
            }
            Err(CreateError::Busy { tenant, move_id }) => Err(MoveError::Busy {
                tenants: tenant,
                move_id,
            }),
            Err(CreateError::SlotBusy { slot, move_id }) => {
                Err(MoveError::SlotBusy { slot, move_id })
            }
            Err(CreateError::Record(e)) => Err(on_control("cannot record the move")(e)),
        }
    }

    /// The unfinished move of `selection` from `from` to `to`, for the step commands.
    pub async fn find(
        &self,
        from: &str,
        to: &str,
        selection: &TenantSelection,
    ) -> Result<Option<MoveRecord>, MoveError> {
        self.check_pair(from, to)?;
        let mut control = context::control(&self.control).await?;
        let found = match selection {
            TenantSelection::Ranges(ranges) => {
                let slot = ranges[0].start();
                record::active_for_range_slot(&mut control, slot).await
            }
            TenantSelection::Tenants(tenants) => record::active_for(&mut control, tenants).await,
            TenantSelection::Slot(slot) => {
                record::active_for_slot(&mut control, *slot, from, to).await
            }
        }
        .map_err(on_control("cannot read tenant_moves"))?;
        let Some(found) = found else {
            return Ok(None);
        };
        let same_tenants = match selection {
            TenantSelection::Tenants(tenants) => record::same_tenants(tenants, &found.tenants),
            TenantSelection::Slot(_) => true,
            TenantSelection::Ranges(ranges) => found.slots.as_deref() == Some(ranges.as_slice()),
        };
        if found.from != from || found.to != to || !same_tenants {
            return Err(MoveError::DifferentMove {
                other: Box::new(found),
            });
        }
        Ok(Some(found))
    }

    pub async fn load(&self, id: i64) -> Result<MoveRecord, MoveError> {
        let mut control = context::control(&self.control).await?;
        record::load(&mut control, id)
            .await
            .map_err(on_control("cannot read tenant_moves"))?
            .ok_or(MoveError::NoSuchMove(id))
    }

    pub async fn list(&self) -> Result<Vec<MoveRecord>, MoveError> {
        let mut control = context::control(&self.control).await?;
        record::list(&mut control)
            .await
            .map_err(on_control("cannot read tenant_moves"))
    }
}
