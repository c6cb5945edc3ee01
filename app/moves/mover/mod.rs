//! `Mover`: runs the moves of one deployment (its topology, its tenant tables, its control
//! database). It plans and records moves, claims one for this process, and runs a move's
//! steps in the order [`MoveState::next_step`] gives, keeping the two shards' sessions open
//! between steps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

mod advice;
mod planning;

use super::conn;
use super::context::{self, FenceOptions, StepContext};
use super::driver;
use super::error::{MoveError, on_control, on_shard};
use super::io::postgres::{Pair, PgMoveIo};
use super::progress::MoveProgress;
use super::record::{self, MoveRecord};
use super::state::{AbortCheck, MoveState, Step};
use super::transfer::{self, DeletePacing};
use crate::configuration::Settings;
use crate::pg::DbUrl;
use crate::pg::pool::PgPool;
use crate::sharding::row_security::control_pool;
use crate::sharding::slot_range::ranges_text;
use crate::sharding::tenant_rows::TenantTable;
use crate::sharding::{ShardSet, Topology};

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
    /// When this process fenced the current move's source (for `--max-fence`).
    fenced_since: Option<Instant>,
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
        let control = control_pool(&topology, 2).map_err(|e| MoveError::Setup(e.to_string()))?;
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
            fenced_since: None,
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
        conn::connect_shard(url, name, self.topology.connect_timeout)
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
        self.fenced_since = None;
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
        })
    }

    /// Runs `work` with the move's step context, keeping the shard sessions for the next.
    async fn with_context(
        &mut self,
        m: &mut MoveRecord,
        work: impl AsyncFnOnce(
            &mut StepContext<'_, PgMoveIo<'_>>,
            &mut MoveRecord,
        ) -> Result<(), MoveError>,
    ) -> Result<(), MoveError> {
        let mut pair = self.take_pair(m).await?;
        let mut io = PgMoveIo::new(
            &self.control,
            &self.shards,
            self.tables,
            self.delete,
            &mut pair,
        );
        let mut cx = StepContext {
            fence: self.fence,
            progress: &self.progress,
            io: &mut io,
            fenced_since: &mut self.fenced_since,
        };
        let result = work(&mut cx, m).await;
        drop(io);
        self.pair = Some(pair);
        result
    }

    /// Runs one step of `m`, if its state allows it (see [`MoveState::check`]). `grace` is
    /// how long `delete` waits after the re-pin. A step that may not run connects nowhere.
    pub async fn step(
        &mut self,
        m: &mut MoveRecord,
        step: Step,
        grace: Duration,
    ) -> Result<(), MoveError> {
        if !driver::cleared(&self.progress, m, step)? {
            return Ok(());
        }
        self.with_context(m, async |cx, m| driver::step(cx, m, step, grace).await)
            .await
    }

    /// Undoes `m` (see `steps::abort`).
    pub async fn abort(&mut self, m: &mut MoveRecord) -> Result<(), MoveError> {
        match m.state.abort_check() {
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
                self.with_context(m, async |cx, m| driver::abort(cx, m).await)
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
        if m.state.next_step().is_none() {
            return Ok(());
        }
        self.with_context(m, async |cx, m| driver::drive(cx, m, confirm, grace).await)
            .await
    }
}
