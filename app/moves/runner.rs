//! The move state machine. Each step checks that the move is in the state it needs
//! (refusing to run out of order), does its work idempotently, and records the next state,
//! so a move killed anywhere is finished by running the remaining steps again.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::conn;
use super::copy::{self, TableInfo};
use super::guard::{self, Guard};
use super::plan::{Selection, TenantPlan};
use super::progress::Progress;
use super::record::{self, CreateError, MoveRecord, MoveState, NewMove, Set};
use super::verify::{self, TableSum};
use crate::configuration::Settings;
use crate::jobs::{self, Job, queue};
use crate::sharding::directory::placement::{self, Placement};
use crate::sharding::directory::table;
use crate::sharding::shard_set::{PgConn, PgPool, build_pool};
use crate::sharding::tenant_rows::{self, TenantTable};
use crate::sharding::{DbUrl, ShardSet, Topology};
use crate::tenancy::TenantId;

/// Catch-up rounds copy at most this many logged changes each.
const CATCH_UP_BATCH: i64 = 10_000;
/// Catch-up stops once a round has fewer changes than this left to copy: the rest is
/// copied behind the fence, whose length it bounds.
const CATCH_UP_SMALL: u64 = 200;
const CATCH_UP_ROUNDS: usize = 20;
/// Session advisory locks on the control database that say "a process is running this
/// move": the move's id plus this offset.
const MOVE_LOCK_BASE: i64 = 0x6d6f_7665_0000_0000;

/// Why a move command did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// Bad arguments, or a step asked for out of order or against a busy tenant: nothing
    /// was changed; the message says what to do instead.
    #[error("{0}")]
    Refused(String),
    /// A step failed; the move's state says where it stopped.
    #[error("{0}")]
    Failed(String),
}

fn failed(what: &str) -> impl Fn(tokio_postgres::Error) -> MoveError + '_ {
    move |e| MoveError::Failed(format!("{what}: {}", describe_db_error(&e)))
}

fn directory_failed(what: &str) -> impl Fn(diesel::result::Error) -> MoveError + '_ {
    move |e| MoveError::Failed(format!("{what}: {e}"))
}

fn describe_db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}

/// Stops the process dead at a named point when `MOVE_SLOT_PAUSE_AT` names it, so tests
/// can kill a move exactly there (`during-copy`, `after-fence`, `after-repin`).
pub fn pause_point(name: &str) {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("MOVE_SLOT_PAUSE_AT").ok());
    if at.as_deref() == Some(name) {
        eprintln!(
            "move_slot: paused at {name} (pid {}); waiting to be killed",
            std::process::id()
        );
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// Runs moves of one deployment: its topology, its tenant tables, its control database.
pub struct Mover {
    topology: Arc<Topology>,
    shards: ShardSet,
    tables: &'static [TenantTable],
    /// The moves' own records, and the session lock that claims a move.
    control: Client,
    /// The directory, through `sharding::directory` (lazy: connects on first use).
    directory: PgPool,
    progress: Progress,
    /// The open connections to the current move's shards, kept between steps so the
    /// fence window is not spent connecting.
    pair: Option<Pair>,
}

/// Connections to a move's source and destination, and its tables as the source has them.
struct Pair {
    from: String,
    to: String,
    source: Client,
    dest: Client,
    tables: Vec<TableInfo>,
}

impl Mover {
    pub async fn connect(
        settings: &Settings,
        tables: &'static [TenantTable],
    ) -> Result<Self, MoveError> {
        let topology = Arc::new(settings.topology.clone());
        let shards =
            ShardSet::new(topology.clone()).map_err(|e| MoveError::Failed(e.to_string()))?;
        let control = conn::connect(
            &topology.control_url,
            "the control database",
            topology.connect_timeout,
        )
        .await
        .map_err(MoveError::Failed)?;
        let directory = build_pool(&topology.control_url, 1, &topology, "control")
            .map_err(|e| MoveError::Failed(e.to_string()))?;
        Ok(Self {
            topology,
            shards,
            tables,
            control,
            directory,
            progress: Progress::new("move_slot".to_owned()),
            pair: None,
        })
    }

    /// Runs `work` on the move's shard connections, keeping them for the next step.
    async fn on_pair(
        &mut self,
        m: &mut MoveRecord,
        work: impl AsyncFnOnce(&Self, &mut MoveRecord, &mut Pair) -> Result<(), MoveError>,
    ) -> Result<(), MoveError> {
        let mut pair = self.take_pair(m).await?;
        let result = work(self, m, &mut pair).await;
        self.pair = Some(pair);
        result
    }

    /// The move's shard connections: the kept ones, or new ones.
    async fn take_pair(&mut self, m: &MoveRecord) -> Result<Pair, MoveError> {
        if let Some(pair) = self.pair.take()
            && pair.from == m.from
            && pair.to == m.to
            && !pair.source.is_closed()
            && !pair.dest.is_closed()
        {
            return Ok(pair);
        }
        let source = self.shard(&m.from).await?;
        let dest = self.shard(&m.to).await?;
        let tables = copy::describe(&source, self.tables)
            .await
            .map_err(failed(&format!("cannot read the tables on {}", m.from)))?;
        Ok(Pair {
            from: m.from.clone(),
            to: m.to.clone(),
            source,
            dest,
            tables,
        })
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    fn shard_url(&self, name: &str) -> Result<&DbUrl, MoveError> {
        self.shards
            .by_name(name)
            .map(|s| &s.spec().primary_url)
            .ok_or_else(|| {
                MoveError::Refused(format!(
                    "no shard is named {name:?} (shards: {})",
                    self.topology.shard_names()
                ))
            })
    }

    async fn shard(&self, name: &str) -> Result<Client, MoveError> {
        let url = self.shard_url(name)?;
        conn::connect(url, &format!("shard {name}"), self.topology.connect_timeout)
            .await
            .map_err(MoveError::Failed)
    }

    /// Checks `--from`/`--to` before anything connects to them.
    pub fn check_pair(&self, from: &str, to: &str) -> Result<(), MoveError> {
        self.shard_url(from)?;
        self.shard_url(to)?;
        if from == to {
            return Err(MoveError::Refused(format!(
                "--from and --to are both {from}: a move needs two shards"
            )));
        }
        Ok(())
    }

    /// A connection for reading and writing the directory, through the same code as
    /// `bookmarks pin` (the moves' own records stay on `control`).
    async fn directory(&self) -> Result<PgConn, MoveError> {
        self.directory
            .get()
            .await
            .map_err(|e| MoveError::Failed(format!("cannot reach the tenant directory: {e}")))
    }

    /// Where `tenant` routes now: its directory row, else config pin, else hash.
    async fn current_route(&self, tenant: &str) -> Result<Placement, MoveError> {
        placement::current(&mut *self.directory().await?, &self.shards, tenant)
            .await
            .map_err(directory_failed("cannot read the tenant directory"))
    }

    async fn directory_row(&self, tenant: &str) -> Result<Option<String>, MoveError> {
        table::shard_of(&mut *self.directory().await?, tenant)
            .await
            .map_err(directory_failed("cannot read the tenant directory"))
    }

    /// `tenant`'s rows per table on a shard, counted as `bookmarks pin` counts them.
    async fn rows_on(
        &self,
        shard: &str,
        tenant: &str,
    ) -> Result<Vec<(&'static str, i64)>, MoveError> {
        let fail = |e: String| MoveError::Failed(format!("cannot count rows on {shard}: {e}"));
        let pool = self
            .shards
            .by_name(shard)
            .ok_or_else(|| MoveError::Refused(format!("no shard is named {shard:?}")))?
            .primary_pool();
        let mut conn = pool.get().await.map_err(|e| fail(e.to_string()))?;
        let counts = tenant_rows::count_per_table(&mut conn, self.tables, tenant)
            .await
            .map_err(|e| fail(e.to_string()))?;
        Ok(self.tables.iter().map(|t| t.name).zip(counts).collect())
    }

    /// What moving `selection` from `from` to `to` would do; changes nothing.
    pub async fn plan(
        &self,
        from: &str,
        to: &str,
        selection: &Selection,
    ) -> Result<Vec<TenantPlan>, MoveError> {
        self.check_pair(from, to)?;
        let tenants = match selection {
            Selection::Tenants(tenants) => tenants.clone(),
            Selection::Slot(slot) => {
                let source = self.shard(from).await?;
                super::plan::tenants_in_slot(&source, self.tables, *slot)
                    .await
                    .map_err(failed(&format!("cannot list the tenants on {from}")))?
            }
        };
        let mut plans = Vec::with_capacity(tenants.len());
        for tenant in tenants {
            let Placement { shard: route, via } = self.current_route(&tenant).await?;
            let rows_from = self.rows_on(from, &tenant).await?;
            let rows_to = self.rows_on(to, &tenant).await?;
            plans.push(TenantPlan::new(
                tenant, from, to, route, via, rows_from, rows_to,
            ));
        }
        Ok(plans)
    }

    /// Records a new move of `selection` (refusing tenants that cannot move) and returns it.
    pub async fn start(
        &mut self,
        from: &str,
        to: &str,
        selection: &Selection,
        confirm: bool,
    ) -> Result<MoveRecord, MoveError> {
        if !self.topology.directory_router {
            return Err(MoveError::Refused(
                "move_slot re-routes tenants through the directory, and directory routing is \
                 off: set [sharding] directory_router = true (and deploy it) first"
                    .to_owned(),
            ));
        }
        let plans = self.plan(from, to, selection).await?;
        let named: Vec<String> = plans.iter().map(|p| p.tenant.clone()).collect();
        if let Some(active) = record::active_for(&self.control, &named)
            .await
            .map_err(|e| MoveError::Failed(format!("cannot read tenant_moves: {e}")))?
        {
            return Err(busy(&active.tenants.join(", "), active.id));
        }
        let (ready, skipped): (Vec<&TenantPlan>, Vec<&TenantPlan>) =
            plans.iter().partition(|p| p.blocker.is_none());
        match selection {
            Selection::Tenants(_) => {
                if let Some(p) = skipped.first() {
                    return Err(MoveError::Refused(format!(
                        "cannot move {}: {}",
                        p.tenant,
                        p.blocker.as_deref().unwrap_or_default()
                    )));
                }
            }
            Selection::Slot(slot) => {
                for p in &skipped {
                    self.progress.step(&format!(
                        "slot {slot}: skipping {}: {}",
                        p.tenant,
                        p.blocker.as_deref().unwrap_or_default()
                    ));
                }
                if ready.is_empty() {
                    return Err(MoveError::Refused(format!(
                        "slot {slot} has no tenant with rows on {from} that routes there: \
                         nothing to move"
                    )));
                }
            }
        }
        let tenants: Vec<String> = ready.iter().map(|p| p.tenant.clone()).collect();
        let mut previous = BTreeMap::new();
        for tenant in &tenants {
            previous.insert(tenant.clone(), self.directory_row(tenant).await?);
        }
        let slot = match selection {
            Selection::Slot(slot) => Some(*slot),
            Selection::Tenants(_) => None,
        };
        let new = NewMove {
            tenants: &tenants,
            from,
            to,
            slot,
            confirm,
            previous: &previous,
        };
        match record::create(&mut self.control, &new).await {
            Ok(record) => {
                self.label(&record);
                self.progress.step(&format!(
                    "recorded: {} tenant(s), {} row(s) to copy",
                    tenants.len(),
                    ready.iter().map(|p| p.rows_on_source()).sum::<i64>()
                ));
                Ok(record)
            }
            Err(CreateError::Busy { tenant, move_id }) => Err(busy(&tenant, move_id)),
            Err(CreateError::Db(e)) => Err(failed("cannot record the move")(e)),
        }
    }

    /// The unfinished move of `selection` from `from` to `to`, for the step commands.
    pub async fn find(
        &self,
        from: &str,
        to: &str,
        selection: &Selection,
    ) -> Result<Option<MoveRecord>, MoveError> {
        self.check_pair(from, to)?;
        let found = match selection {
            Selection::Tenants(tenants) => record::active_for(&self.control, tenants).await,
            Selection::Slot(slot) => record::active_for_slot(&self.control, *slot, from, to).await,
        }
        .map_err(|e| MoveError::Failed(format!("cannot read tenant_moves: {e}")))?;
        let Some(found) = found else {
            return Ok(None);
        };
        let same_tenants = match selection {
            Selection::Tenants(tenants) => {
                let mut a = tenants.clone();
                let mut b = found.tenants.clone();
                a.sort();
                b.sort();
                a.dedup();
                a == b
            }
            Selection::Slot(_) => true,
        };
        if found.from != from || found.to != to || !same_tenants {
            return Err(MoveError::Refused(format!(
                "those tenants are in move {} ({} from {} to {}, state {}), which is a \
                 different move: use `move_slot resume {0}` or `move_slot abort {0}`",
                found.id,
                found.tenants.join(", "),
                found.from,
                found.to,
                found.state
            )));
        }
        Ok(Some(found))
    }

    pub async fn load(&self, id: i64) -> Result<MoveRecord, MoveError> {
        record::load(&self.control, id)
            .await
            .map_err(|e| MoveError::Failed(format!("cannot read tenant_moves: {e}")))?
            .ok_or_else(|| MoveError::Refused(format!("there is no move {id}")))
    }

    pub async fn list(&self) -> Result<Vec<MoveRecord>, MoveError> {
        record::list(&self.control)
            .await
            .map_err(|e| MoveError::Failed(format!("cannot read tenant_moves: {e}")))
    }

    /// Makes this process the only one running `record` until it exits (a session
    /// advisory lock: a killed process releases it with its connection).
    pub async fn claim(&mut self, record: &MoveRecord) -> Result<(), MoveError> {
        let got: bool = self
            .control
            .query_one(
                "SELECT pg_try_advisory_lock($1)",
                &[&(MOVE_LOCK_BASE + record.id)],
            )
            .await
            .map_err(failed("cannot lock the move"))?
            .get(0);
        if !got {
            return Err(MoveError::Refused(format!(
                "move {} is being run by another move_slot process; wait for it, or stop it \
                 and `move_slot resume {0}`",
                record.id
            )));
        }
        self.label(record);
        Ok(())
    }

    fn label(&mut self, record: &MoveRecord) {
        self.progress.set_label(format!(
            "move {} ({} {}→{})",
            record.id,
            record.tenants.join(","),
            record.from,
            record.to
        ));
    }

    async fn advance(
        &self,
        record: &mut MoveRecord,
        state: MoveState,
        also: &[Set<'_>],
    ) -> Result<(), MoveError> {
        record::advance(&self.control, record, state, also)
            .await
            .map_err(|e| MoveError::Failed(format!("cannot record the move's progress: {e}")))
    }

    fn out_of_order(record: &MoveRecord, step: &str, needs: &str) -> MoveError {
        let next = match record.state {
            MoveState::Planned | MoveState::Copying => "copy",
            MoveState::Copied | MoveState::Fenced => "verify",
            MoveState::Verified => "repin",
            MoveState::Repinned => "delete",
            MoveState::Done | MoveState::Aborted => "",
        };
        let advice = if next.is_empty() {
            format!(
                "move {} is {}: there is nothing left to do",
                record.id, record.state
            )
        } else {
            format!(
                "its next step is `move_slot {next} --from {} --to {} {}{}` (or `move_slot \
                 resume {}`)",
                record.from,
                record.to,
                record.selection_args(),
                if next == "delete" { " --confirm" } else { "" },
                record.id
            )
        };
        MoveError::Refused(format!(
            "cannot {step} move {}: it is {} and {step} needs it {needs}; {advice}",
            record.id, record.state
        ))
    }

    /// Step 1: capture on, bulk copy, catch up. The tenant stays writable throughout.
    pub async fn copy(&mut self, m: &mut MoveRecord) -> Result<(), MoveError> {
        match m.state {
            MoveState::Planned | MoveState::Copying => {}
            MoveState::Copied | MoveState::Fenced | MoveState::Verified | MoveState::Repinned => {
                self.progress.step("already copied");
                return Ok(());
            }
            MoveState::Done | MoveState::Aborted => {
                return Err(Self::out_of_order(m, "copy", "planned or copying"));
            }
        }
        if m.state == MoveState::Planned {
            self.advance(m, MoveState::Copying, &[Set::Now("copy_started_at")])
                .await?;
        }
        self.on_pair(m, Self::copy_on).await
    }

    async fn copy_on(&self, m: &mut MoveRecord, pair: &mut Pair) -> Result<(), MoveError> {
        let Pair {
            source,
            dest,
            tables,
            ..
        } = pair;
        guard::set(dest, m.id, &m.tenants, Guard::Incoming, &m.from)
            .await
            .map_err(failed(&format!("cannot guard the tenants on {}", m.to)))?;
        guard::set(source, m.id, &m.tenants, Guard::Capturing, &m.to)
            .await
            .map_err(failed(&format!("cannot start capturing on {}", m.from)))?;
        let mut total = 0;
        for tenant in &m.tenants {
            total += self
                .rows_on(&m.from, tenant)
                .await?
                .iter()
                .map(|(_, n)| n)
                .sum::<i64>();
        }
        let started = Instant::now();
        self.progress.start_copy(total as u64);
        let copied = copy::bulk(source, dest, m.id, &m.tenants, tables, &self.progress)
            .await
            .map_err(failed("bulk copy failed"));
        self.progress.finish_copy();
        let copied = copied?;
        let took = started.elapsed();
        self.progress.step(&format!(
            "copied {copied} row(s) in {} ms ({:.0} rows/s)",
            took.as_millis(),
            copied as f64 / took.as_secs_f64().max(1e-9)
        ));
        let mut applied = 0;
        for _ in 0..CATCH_UP_ROUNDS {
            let n = copy::catch_up(source, dest, m.id, tables, CATCH_UP_BATCH)
                .await
                .map_err(failed("catch-up copy failed"))?;
            applied += n;
            if n < CATCH_UP_SMALL {
                break;
            }
        }
        self.progress.step(&format!(
            "caught up with {applied} change(s) written meanwhile"
        ));
        self.advance(
            m,
            MoveState::Copied,
            &[
                Set::Count("rows_copied", copied as i64),
                Set::Count("changes_applied", m.changes_applied + applied as i64),
                Set::Now("copied_at"),
            ],
        )
        .await
    }

    /// Step 2: fence the source, copy the last changes, compare both shards. A mismatch
    /// aborts the move: the source stays authoritative and nothing of it is deleted.
    pub async fn verify(&mut self, m: &mut MoveRecord) -> Result<(), MoveError> {
        match m.state {
            MoveState::Copied | MoveState::Fenced => {}
            MoveState::Verified | MoveState::Repinned => {
                self.progress.step("already verified");
                return Ok(());
            }
            _ => return Err(Self::out_of_order(m, "verify", "copied")),
        }
        self.on_pair(m, Self::verify_on).await
    }

    async fn verify_on(&self, m: &mut MoveRecord, pair: &mut Pair) -> Result<(), MoveError> {
        let Pair {
            source,
            dest,
            tables,
            ..
        } = pair;
        if m.state == MoveState::Copied {
            guard::set(source, m.id, &m.tenants, Guard::Fenced, &m.to)
                .await
                .map_err(failed(&format!("cannot fence the tenants on {}", m.from)))?;
            self.advance(m, MoveState::Fenced, &[Set::Now("fenced_at")])
                .await?;
            self.progress
                .step(&format!("fenced: {} refuses the tenants' writes", m.from));
            pause_point("after-fence");
        }
        let final_copy = Instant::now();
        let mut applied = 0;
        loop {
            let n = copy::catch_up(source, dest, m.id, tables, CATCH_UP_BATCH)
                .await
                .map_err(failed("final copy failed"))?;
            applied += n;
            if n == 0 {
                break;
            }
        }
        let final_copy = final_copy.elapsed();
        let checksumming = Instant::now();
        let (at_source, at_dest) = tokio::join!(
            verify::sums(source, tables, &m.tenants),
            verify::sums(dest, tables, &m.tenants)
        );
        let at_source = at_source.map_err(failed(&format!("cannot checksum {}", m.from)))?;
        let at_dest = at_dest.map_err(failed(&format!("cannot checksum {}", m.to)))?;
        let differences = verify::differences(&at_source, &at_dest);
        if !differences.is_empty() {
            let why = format!(
                "verification failed, so the move was aborted (the source keeps the tenants, \
                 nothing was deleted from it): {}",
                differences.join("; ")
            );
            self.undo_copy(m, pair).await?;
            self.advance(
                m,
                MoveState::Aborted,
                &[Set::Error(Some(&why)), Set::Now("finished_at")],
            )
            .await?;
            return Err(MoveError::Failed(why));
        }
        let rows: i64 = at_source.iter().map(|s| s.rows).sum();
        let sums = serde_json::to_value(&at_source).expect("sums serialize");
        self.advance(
            m,
            MoveState::Verified,
            &[
                Set::Count("rows_verified", rows),
                Set::Count("changes_applied", m.changes_applied + applied as i64),
                Set::Json("checksums", &sums),
                Set::Now("verified_at"),
            ],
        )
        .await?;
        self.progress.step(&format!(
            "verified {rows} row(s) after copying the last {applied} change(s) (final copy \
             {} ms, checksums {} ms)",
            final_copy.as_millis(),
            checksumming.elapsed().as_millis()
        ));
        Ok(())
    }

    /// Step 3: the destination takes over. The directory routes the tenants there (every
    /// web replica hears at once) and the source answers stale writers "departed".
    pub async fn repin(&mut self, m: &mut MoveRecord) -> Result<(), MoveError> {
        match m.state {
            MoveState::Verified => {}
            MoveState::Repinned => {
                self.progress.step("already re-pinned");
                return Ok(());
            }
            _ => return Err(Self::out_of_order(m, "repin", "verified")),
        }
        self.on_pair(m, Self::repin_on).await
    }

    async fn repin_on(&self, m: &mut MoveRecord, pair: &mut Pair) -> Result<(), MoveError> {
        let Pair { source, dest, .. } = pair;
        guard::clear(dest, m.id, &m.tenants)
            .await
            .map_err(failed(&format!("cannot open {} to the tenants", m.to)))?;
        let note = format!("move_slot move {}", m.id);
        let mut directory = self.directory().await?;
        for tenant in &m.tenants {
            table::upsert(&mut directory, tenant, &m.to, Some(&note))
                .await
                .map_err(directory_failed("cannot re-pin in the directory"))?;
            // The destination's reindexer indexes rows as they are copied in; this rebuild
            // (routed to the new shard when it runs) makes the tenant's index and tag
            // counts exact there whatever happened during the copy. The key makes a
            // resumed move enqueue it once.
            let job = Job::ReindexTenant {
                tenant: TenantId::parse(tenant)
                    .map_err(|e| MoveError::Failed(format!("tenant {tenant:?}: {e}")))?,
            };
            let key = format!("move-{}-reindex-{tenant}", m.id);
            queue::enqueue(
                &mut directory,
                &queue::NewJob {
                    job: &job,
                    idempotency_key: Some(&key),
                    max_attempts: jobs::DEFAULT_MAX_ATTEMPTS,
                },
            )
            .await
            .map_err(directory_failed("cannot enqueue the reindex job"))?;
        }
        guard::set(source, m.id, &m.tenants, Guard::Departed, &m.to)
            .await
            .map_err(failed(&format!(
                "cannot mark the tenants departed on {}",
                m.from
            )))?;
        self.control
            .execute(
                "UPDATE tenant_moves SET fence_ms = \
                 (extract(epoch FROM now() - fenced_at) * 1000)::bigint WHERE id = $1",
                &[&m.id],
            )
            .await
            .map_err(failed("cannot record the fence window"))?;
        self.advance(m, MoveState::Repinned, &[Set::Now("repinned_at")])
            .await?;
        self.progress.step(&format!(
            "re-pinned to {}; the tenants' writes were refused for {} ms",
            m.to,
            m.fence_ms.unwrap_or_default()
        ));
        pause_point("after-repin");
        Ok(())
    }

    /// Step 4: delete the tenants' rows from the source, once every moved key routes to
    /// the destination and every web replica's directory cache has had `grace` to expire.
    pub async fn delete(&mut self, m: &mut MoveRecord, grace: Duration) -> Result<(), MoveError> {
        match m.state {
            MoveState::Repinned => {}
            MoveState::Done => {
                self.progress.step("already deleted");
                return Ok(());
            }
            _ => return Err(Self::out_of_order(m, "delete", "re-pinned")),
        }
        for tenant in &m.tenants {
            let row = self.directory_row(tenant).await?;
            if row.as_deref() != Some(m.to.as_str()) {
                return Err(MoveError::Refused(format!(
                    "cannot delete move {}'s source rows: tenant {tenant} routes to {} in the \
                     directory now, not {}; someone changed it since the re-pin",
                    m.id,
                    row.as_deref().unwrap_or("(no row: pin or hash)"),
                    m.to
                )));
            }
        }
        let wait: f64 = self
            .control
            .query_one(
                "SELECT greatest(0, extract(epoch FROM repinned_at - now()) + $2::float8)::float8 \
                 FROM tenant_moves WHERE id = $1",
                &[&m.id, &grace.as_secs_f64()],
            )
            .await
            .map_err(failed("cannot read the re-pin time"))?
            .get(0);
        if wait > 0.0 {
            self.progress.step(&format!(
                "waiting {wait:.1} s so that every web replica's directory cache has expired \
                 (--grace)"
            ));
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
        let mut pair = self.take_pair(m).await?;
        let deleted = delete_rows(&mut pair.source, m.id, &m.tenants, &pair.tables)
            .await
            .map_err(failed(&format!("cannot delete the rows on {}", m.from)));
        let cleared = copy::clear_changes(&pair.source, m.id)
            .await
            .map_err(failed("cannot clear the change log"));
        self.pair = Some(pair);
        let deleted = deleted?;
        cleared?;
        self.advance(
            m,
            MoveState::Done,
            &[
                Set::Count("rows_deleted", deleted as i64),
                Set::Now("finished_at"),
            ],
        )
        .await?;
        self.progress
            .step(&format!("deleted {deleted} row(s) from {}; done", m.from));
        Ok(())
    }

    /// Undoes a move: routing back as it was, the source writable again, the copied rows
    /// removed from the destination. Refused once the move is done, or once the
    /// destination has taken writes after the re-pin (undoing would lose them).
    pub async fn abort(&mut self, m: &mut MoveRecord) -> Result<(), MoveError> {
        match m.state {
            MoveState::Aborted => {
                self.progress.step("already aborted");
                return Ok(());
            }
            MoveState::Done => {
                return Err(MoveError::Refused(format!(
                    "move {} is done and its source rows are deleted; to undo it, move the \
                     tenants back: `move_slot run --from {} --to {} {}`",
                    m.id,
                    m.to,
                    m.from,
                    m.selection_args()
                )));
            }
            MoveState::Planned => {}
            MoveState::Copying | MoveState::Copied | MoveState::Fenced | MoveState::Verified => {
                self.on_pair(m, async |me, m, pair| me.undo_copy(m, pair).await)
                    .await?
            }
            MoveState::Repinned => {
                self.on_pair(m, async |me, m, pair| me.undo_repin(m, pair).await)
                    .await?
            }
        }
        self.advance(m, MoveState::Aborted, &[Set::Now("finished_at")])
            .await?;
        self.progress
            .step("aborted: routing and data are as before the move");
        Ok(())
    }

    /// Before the re-pin the source is authoritative: lift its guard, forget the change
    /// log, remove what was copied.
    async fn undo_copy(&self, m: &MoveRecord, pair: &mut Pair) -> Result<(), MoveError> {
        let Pair {
            source,
            dest,
            tables,
            ..
        } = pair;
        guard::clear(source, m.id, &m.tenants)
            .await
            .map_err(failed(&format!("cannot lift the guard on {}", m.from)))?;
        copy::clear_changes(source, m.id)
            .await
            .map_err(failed("cannot clear the change log"))?;
        delete_rows(dest, m.id, &m.tenants, tables)
            .await
            .map_err(failed(&format!(
                "cannot remove the copied rows from {}",
                m.to
            )))?;
        guard::clear(dest, m.id, &m.tenants)
            .await
            .map_err(failed(&format!("cannot lift the guard on {}", m.to)))?;
        Ok(())
    }

    /// After the re-pin, only if the destination is exactly as verified: fence it, route
    /// back, reopen the source, remove the copy and leave "departed" on the destination for
    /// any replica still routing there.
    async fn undo_repin(&self, m: &MoveRecord, pair: &mut Pair) -> Result<(), MoveError> {
        let Pair {
            source,
            dest,
            tables,
            ..
        } = pair;
        guard::set(dest, m.id, &m.tenants, Guard::Fenced, &m.from)
            .await
            .map_err(failed(&format!("cannot fence the tenants on {}", m.to)))?;
        let now = verify::sums(dest, tables, &m.tenants)
            .await
            .map_err(failed(&format!("cannot checksum {}", m.to)))?;
        let verified: Option<Vec<TableSum>> = m
            .checksums
            .clone()
            .and_then(|v| serde_json::from_value(v).ok());
        if verified.as_deref() != Some(now.as_slice()) {
            guard::clear(dest, m.id, &m.tenants)
                .await
                .map_err(failed(&format!("cannot reopen {}", m.to)))?;
            return Err(MoveError::Refused(format!(
                "cannot abort move {}: {} has taken writes for the tenants since the re-pin, \
                 and aborting would lose them; move them back instead: `move_slot run --from \
                 {} --to {} {}`",
                m.id,
                m.to,
                m.to,
                m.from,
                m.selection_args()
            )));
        }
        let mut directory = self.directory().await?;
        for tenant in &m.tenants {
            let restored = match m.previous.get(tenant).cloned().flatten() {
                Some(shard) => {
                    let note = Some("restored by move_slot abort");
                    table::upsert(&mut directory, tenant, &shard, note).await
                }
                None => table::remove(&mut directory, tenant).await.map(drop),
            };
            restored.map_err(directory_failed("cannot restore the directory"))?;
        }
        guard::clear(source, m.id, &m.tenants)
            .await
            .map_err(failed(&format!("cannot reopen {}", m.from)))?;
        delete_rows(dest, m.id, &m.tenants, tables)
            .await
            .map_err(failed(&format!(
                "cannot remove the copied rows from {}",
                m.to
            )))?;
        guard::set(dest, m.id, &m.tenants, Guard::Departed, &m.from)
            .await
            .map_err(failed(&format!(
                "cannot mark the tenants departed on {}",
                m.to
            )))?;
        Ok(())
    }

    /// Runs the remaining steps: copy, verify, re-pin and, when `confirm`, delete.
    pub async fn drive(
        &mut self,
        m: &mut MoveRecord,
        confirm: bool,
        grace: Duration,
    ) -> Result<(), MoveError> {
        loop {
            match m.state {
                MoveState::Planned | MoveState::Copying => self.copy(m).await?,
                MoveState::Copied | MoveState::Fenced => self.verify(m).await?,
                MoveState::Verified => self.repin(m).await?,
                MoveState::Repinned if confirm => self.delete(m, grace).await?,
                MoveState::Repinned => {
                    self.progress.step(&format!(
                        "stopped after the re-pin; the source rows stay until you run `move_slot \
                         delete --from {} --to {} {} --confirm`",
                        m.from,
                        m.to,
                        m.selection_args()
                    ));
                    return Ok(());
                }
                MoveState::Done | MoveState::Aborted => return Ok(()),
            }
        }
    }

    /// After a slot's move is done: the `autumn.toml` change that would make the slot's
    /// placement permanent, or why it is not safe yet. `None` for tenant moves.
    pub async fn slot_advice(&self, m: &MoveRecord) -> Result<Option<String>, MoveError> {
        let Some(slot) = m.slot else {
            return Ok(None);
        };
        let slot = slot as u16;
        if m.state != MoveState::Done {
            return Ok(None);
        }
        let source = self.shard(&m.from).await?;
        let left = super::plan::tenants_in_slot(&source, self.tables, slot)
            .await
            .map_err(failed(&format!("cannot list the tenants on {}", m.from)))?;
        if !left.is_empty() {
            return Ok(Some(format!(
                "slot {slot} still has tenants with rows on {}: {}. Do not move slot {slot} in \
                 autumn.toml until they are moved too, or they would lose their data",
                m.from,
                left.join(", ")
            )));
        }
        Ok(Some(super::plan::slot_remap_advice(
            &self.topology,
            slot,
            &m.from,
            &m.to,
        )))
    }
}

fn busy(tenants: &str, move_id: i64) -> MoveError {
    MoveError::Refused(format!(
        "tenant(s) {tenants}: already in move {move_id}, which is not finished: `move_slot status \
         {move_id}` shows where it stands, `move_slot resume {move_id}` finishes it, \
         `move_slot abort {move_id}` undoes it"
    ))
}

/// Deletes `tenants`' rows on the connected shard (the guard lets the mover through).
async fn delete_rows(
    shard: &mut Client,
    move_id: i64,
    tenants: &[String],
    tables: &[TableInfo],
) -> Result<u64, tokio_postgres::Error> {
    let tx = shard.transaction().await?;
    guard::bypass(&tx, move_id).await?;
    let deleted = copy::delete_tenants(&tx, tables, tenants).await?;
    tx.commit().await?;
    Ok(deleted)
}
