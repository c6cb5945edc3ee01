//! `Mover`: runs the moves of one deployment (its topology, its tenant tables, its control
//! database). It plans and records moves, claims one for this process, and runs a move's
//! steps in the order [`MoveState::next_step`] gives, keeping the two shards' sessions open
//! between steps.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use super::conn;
use super::context::{self, FenceOptions, Pair, StepContext, directory_row, live_owners, rows_on};
use super::error::{MoveError, on_control, on_shard};
use super::plan::{self, TenantPlan, TenantSelection};
use super::progress::MoveProgress;
use super::record::{self, CreateError, MoveRecord, MoveState, NewMove, Step, StepCheck};
use super::scope;
use super::steps::{self, abort::AbortCheck};
use super::transfer::{self, DeletePacing};
use crate::configuration::Settings;
use crate::pg::DbUrl;
use crate::pg::pool::{PgPool, build_pool};
use crate::sharding::directory::placement::{self, NamedRoute};
use crate::sharding::slot_range::ranges_text;
use crate::sharding::tenant_rows::TenantTable;
use crate::sharding::{ShardKey, ShardSet, SlotRange, Topology};

/// Session advisory locks on the control database that say "a process is running this
/// move": the move's id plus this offset.
const MOVE_LOCK_BASE: i64 = 0x6d6f_7665_0000_0000;

pub struct Mover {
    topology: Arc<Topology>,
    shards: ShardSet,
    tables: &'static [TenantTable],
    /// The moves' records and the directory.
    control: PgPool,
    /// The session holding this process's claim on a move (a session lock ends with it).
    claim: Option<Client>,
    progress: MoveProgress,
    /// The current move's shard sessions, kept between steps.
    pair: Option<Pair>,
    fence: FenceOptions,
    delete: DeletePacing,
}

impl Mover {
    pub async fn connect(
        settings: &Settings,
        tables: &'static [TenantTable],
    ) -> Result<Self, MoveError> {
        let topology = Arc::new(settings.topology.clone());
        let shards =
            ShardSet::new(topology.clone()).map_err(|e| MoveError::Setup(e.to_string()))?;
        let control = build_pool(&topology.control_url, 2, topology.pool_bounds(), "control")
            .map_err(|e| MoveError::Setup(e.to_string()))?;
        // Fail now, naming the database, rather than at the first record.
        let mut conn = control
            .get()
            .await
            .map_err(|source| MoveError::ConnectControl {
                url: topology.control_url.to_string(),
                source: Box::new(source),
            })?;
        // Route as the web replicas do: by the live slot map.
        shards
            .slot_map()
            .load_from(&topology, &mut conn)
            .await
            .map_err(on_control("cannot read the slot map"))?;
        drop(conn);
        Ok(Self {
            topology,
            shards,
            tables,
            control,
            claim: None,
            progress: MoveProgress::new("move_slot".to_owned()),
            pair: None,
            fence: FenceOptions::default(),
            delete: DeletePacing::default(),
        })
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// How the verify step treats the fence from now on.
    pub fn set_fence(&mut self, fence: FenceOptions) {
        self.fence = fence;
    }

    /// How the delete step clears the source from now on.
    pub fn set_delete_pacing(&mut self, delete: DeletePacing) {
        self.delete = delete;
    }

    fn shard_url(&self, name: &str) -> Result<&DbUrl, MoveError> {
        self.shards
            .by_name(name)
            .map(|s| &s.spec().primary_url)
            .ok_or_else(|| MoveError::UnknownShard {
                name: name.to_owned(),
                known: self.topology.shard_names(),
            })
    }

    async fn shard(&self, name: &str) -> Result<Client, MoveError> {
        let url = self.shard_url(name)?;
        conn::connect(url, &format!("shard {name}"), self.topology.connect_timeout)
            .await
            .map_err(MoveError::Connect)
    }

    /// Checks `--from`/`--to` before anything connects to them.
    pub fn check_pair(&self, from: &str, to: &str) -> Result<(), MoveError> {
        self.shard_url(from)?;
        self.shard_url(to)?;
        if from == to {
            return Err(MoveError::SameShard {
                shard: from.to_owned(),
            });
        }
        Ok(())
    }

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
        let placed = scope::placed_tenants(&self.shards, &mut control, ranges).await?;
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

    /// Makes this process the only one running `record` until it exits (a session
    /// advisory lock: a killed process releases it with its connection).
    pub async fn claim(&mut self, record: &MoveRecord) -> Result<(), MoveError> {
        let session = match self.claim.take() {
            Some(session) if !session.is_closed() => session,
            _ => conn::connect(
                &self.topology.control_url,
                "the control database",
                self.topology.connect_timeout,
            )
            .await
            .map_err(MoveError::Connect)?,
        };
        let got: bool = session
            .query_one(
                "SELECT pg_try_advisory_lock($1)",
                &[&(MOVE_LOCK_BASE + record.id)],
            )
            .await
            .map_err(on_shard("cannot lock the move"))?
            .get(0);
        self.claim = Some(session);
        if !got {
            return Err(MoveError::ClaimedElsewhere { move_id: record.id });
        }
        self.label(record);
        Ok(())
    }

    fn label(&mut self, record: &MoveRecord) {
        let what = match &record.slots {
            Some(ranges) => format!("slots {}", ranges_text(ranges)),
            None => record.tenants.join(","),
        };
        self.progress.set_label(format!(
            "move {} ({what} {}→{})",
            record.id, record.from, record.to
        ));
    }

    /// The move's shard sessions: the kept ones, or new ones.
    async fn take_pair(&mut self, m: &MoveRecord) -> Result<Pair, MoveError> {
        if let Some(pair) = self.pair.take()
            && pair.serves(m)
        {
            return Ok(pair);
        }
        let source = self.shard(&m.from).await?;
        let dest = self.shard(&m.to).await?;
        let tables = transfer::describe(&source, self.tables)
            .await
            .map_err(on_shard(format!("cannot read the tables on {}", m.from)))?;
        Ok(Pair {
            from: m.from.clone(),
            to: m.to.clone(),
            source,
            dest,
            tables,
            source_url: self.shard_url(&m.from)?.clone(),
            connect_timeout: self.topology.connect_timeout,
            fenced_since: None,
        })
    }

    /// Runs `work` with the move's step context, keeping the shard sessions for the next.
    async fn with_context(
        &mut self,
        m: &mut MoveRecord,
        work: impl AsyncFnOnce(&mut StepContext<'_>, &mut MoveRecord) -> Result<(), MoveError>,
    ) -> Result<(), MoveError> {
        let mut pair = self.take_pair(m).await?;
        let mut cx = StepContext {
            fence: self.fence,
            delete: self.delete,
            control: &self.control,
            shards: &self.shards,
            tables: self.tables,
            progress: &self.progress,
            pair: &mut pair,
        };
        let result = work(&mut cx, m).await;
        self.pair = Some(pair);
        result
    }

    /// Runs one step of `m`, if its state allows it (see [`MoveState::check`]). `grace` is
    /// how long `delete` waits after the re-pin.
    pub async fn step(
        &mut self,
        m: &mut MoveRecord,
        step: Step,
        grace: Duration,
    ) -> Result<(), MoveError> {
        match m.state.check(step) {
            StepCheck::Run => {}
            StepCheck::AlreadyDone => {
                self.progress.step(step.already());
                return Ok(());
            }
            StepCheck::OutOfOrder => {
                return Err(MoveError::OutOfOrder {
                    record: Box::new(m.clone()),
                    step,
                });
            }
        }
        self.with_context(m, async |cx, m| match step {
            Step::Copy => steps::copy::run(cx, m).await,
            Step::Verify => steps::verify::run(cx, m).await,
            Step::Repin => steps::repin::run(cx, m).await,
            Step::Delete => steps::delete::run(cx, m, grace).await,
        })
        .await
    }

    /// Undoes `m` (see `steps::abort`).
    pub async fn abort(&mut self, m: &mut MoveRecord) -> Result<(), MoveError> {
        match steps::abort::check(m.state) {
            AbortCheck::AlreadyAborted => {
                self.progress.step("already aborted");
                Ok(())
            }
            AbortCheck::Refused => Err(MoveError::AbortAfterDone {
                record: Box::new(m.clone()),
            }),
            // Nothing on the shards to undo: no sessions needed.
            AbortCheck::RecordOnly => {
                let mut control = context::control(&self.control).await?;
                record::advance(
                    &mut control,
                    m,
                    MoveState::Aborted,
                    &[record::Set::Now("finished_at")],
                )
                .await
                .map_err(on_control("cannot record the move's progress"))?;
                self.progress
                    .step("aborted: routing and data are as before the move");
                Ok(())
            }
            AbortCheck::Undo => {
                self.with_context(m, async |cx, m| steps::abort::run(cx, m).await)
                    .await
            }
        }
    }

    /// Runs the remaining steps in order: copy, verify, re-pin and, when `confirm`, delete.
    pub async fn drive(
        &mut self,
        m: &mut MoveRecord,
        confirm: bool,
        grace: Duration,
    ) -> Result<(), MoveError> {
        while let Some(step) = m.state.next_step() {
            if step == Step::Delete && !confirm {
                self.progress.step(&format!(
                    "stopped after the re-pin; the source rows stay until you run `move_slot \
                     delete --from {} --to {} {} --confirm`",
                    m.from,
                    m.to,
                    m.selection_args()
                ));
                return Ok(());
            }
            self.step(m, step, grace).await?;
        }
        Ok(())
    }

    /// After a range move's flip: the live slot map differs from `autumn.toml`, and the
    /// edit that would fold it in.
    async fn range_advice(&self, m: &MoveRecord) -> Result<Option<String>, MoveError> {
        if m.state < MoveState::Repinned || m.state == MoveState::Aborted {
            return Ok(None);
        }
        let mut control = context::control(&self.control).await?;
        let owners = live_owners(&self.topology, &mut control).await?;
        let drift = owners.drift(&self.topology);
        if drift.is_empty() {
            return Ok(Some(
                "the live slot map matches autumn.toml again; `bookmarks slots compact` \
                 removes overrides that change nothing"
                    .to_owned(),
            ));
        }
        let edits: Vec<String> = drift
            .iter()
            .map(|d| format!("shard {}: {}", d.shard, d.edit))
            .collect();
        Ok(Some(format!(
            "every web replica routes slots {} to {} now, by the live slot map (no deploy \
             needed). To make autumn.toml say so too: {}; check it with `bookmarks \
             check-config`, deploy, then `bookmarks slots compact`",
            m.slots.as_deref().map(ranges_text).unwrap_or_default(),
            m.to,
            edits.join("; ")
        )))
    }

    /// After a slot's move is done: the `autumn.toml` change that would make the slot's
    /// placement permanent, or why it is not safe yet. `None` for tenant moves.
    pub async fn slot_advice(&self, m: &MoveRecord) -> Result<Option<String>, MoveError> {
        if m.slots.is_some() {
            return self.range_advice(m).await;
        }
        let Some(slot) = m.slot else {
            return Ok(None);
        };
        let slot = slot as u16;
        if m.state != MoveState::Done {
            return Ok(None);
        }
        let source = self.shard(&m.from).await?;
        let left = plan::tenants_in_slot(&source, self.tables, slot)
            .await
            .map_err(on_shard(format!("cannot list the tenants on {}", m.from)))?;
        if !left.is_empty() {
            return Ok(Some(format!(
                "slot {slot} still has tenants with rows on {}: {}. Do not move slot {slot} in \
                 autumn.toml until they are moved too, or they would lose their data",
                m.from,
                left.join(", ")
            )));
        }
        Ok(Some(plan::slot_remap_advice(
            &self.topology,
            slot,
            &m.from,
            &m.to,
        )))
    }
}
