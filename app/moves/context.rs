//! What every step of a move works with: the control database (the move's record and the
//! directory), the two shards' sessions, the tenant tables and the operator's progress
//! lines; and the reads that the planner and several steps share.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::conn;
use super::error::{DbError, MoveError, on_control};
use super::progress::MoveProgress;
use super::record::{self, MoveRecord, MoveState, Set};
use super::transfer::{self, DeletePacing, Keys, TableInfo};
use crate::pg::DbUrl;
use crate::pg::pool::{PgConn, PgPool};
use crate::sharding::directory::table;
use crate::sharding::slot_map::{self, SlotOwners};
use crate::sharding::tenant_rows::{self, TenantTable};
use crate::sharding::{ShardSet, Topology};

/// Sessions to a move's source and destination, and its tables as the source has them.
/// Kept between steps, so that the fence window is not spent connecting.
pub struct Pair {
    pub from: String,
    pub to: String,
    pub source: Client,
    pub dest: Client,
    pub tables: Vec<TableInfo>,
    pub source_url: DbUrl,
    pub connect_timeout: Duration,
    /// When this process fenced the move's source, for `--max-fence`.
    pub fenced_since: Option<Instant>,
}

impl Pair {
    /// One catch-up round: copies up to `limit` of the changes the source logged for move
    /// `move_id`; returns how many it applied, and adds the rows they named to `applied`.
    pub async fn catch_up(
        &mut self,
        move_id: i64,
        limit: i64,
        applied: Option<&mut Keys>,
    ) -> Result<u64, tokio_postgres::Error> {
        transfer::catch_up(
            &mut self.source,
            &mut self.dest,
            move_id,
            &self.tables,
            limit,
            applied,
        )
        .await
    }

    /// Another session on the source, for a snapshot held while this pair copies on.
    pub async fn another_source_session(&self) -> Result<Client, MoveError> {
        conn::connect(
            &self.source_url,
            &format!("shard {}", self.from),
            self.connect_timeout,
        )
        .await
        .map_err(MoveError::Connect)
    }

    /// Whether these sessions serve `m` and are still open.
    pub fn serves(&self, m: &MoveRecord) -> bool {
        self.from == m.from && self.to == m.to && !self.source.is_closed() && !self.dest.is_closed()
    }
}

pub struct StepContext<'a> {
    pub fence: FenceOptions,
    pub delete: DeletePacing,
    pub control: &'a PgPool,
    pub shards: &'a ShardSet,
    pub tables: &'static [TenantTable],
    pub progress: &'a MoveProgress,
    pub pair: &'a mut Pair,
}

/// How the verify step treats the fence: its longest allowed length, and whether to
/// checksum every row inside it (`verify --full`) rather than only the rows changed since
/// the verification ahead of it.
#[derive(Clone, Copy, Debug)]
pub struct FenceOptions {
    pub max: Duration,
    pub full: bool,
}

impl Default for FenceOptions {
    fn default() -> Self {
        Self {
            max: Duration::from_secs(10),
            full: false,
        }
    }
}

impl StepContext<'_> {
    /// Moves the record to `state`, setting `also` in the same statement.
    pub async fn advance(
        &self,
        m: &mut MoveRecord,
        state: MoveState,
        also: &[Set<'_>],
    ) -> Result<(), MoveError> {
        let mut conn = control(self.control).await?;
        record::advance(&mut conn, m, state, also)
            .await
            .map_err(on_control("cannot record the move's progress"))
    }

    pub async fn control(&self) -> Result<PgConn, MoveError> {
        control(self.control).await
    }
}

/// A control database connection: the moves' records and the directory.
pub async fn control(pool: &PgPool) -> Result<PgConn, MoveError> {
    pool.get().await.map_err(|e| MoveError::Db {
        what: "cannot reach the control database".to_owned(),
        source: DbError::Pool(e.to_string()),
    })
}

/// `tenant`'s directory row: the shard it names, if it has one.
pub async fn directory_row(pool: &PgPool, tenant: &str) -> Result<Option<String>, MoveError> {
    table::shard_of(&mut *control(pool).await?, tenant)
        .await
        .map_err(on_control("cannot read the tenant directory"))
}

/// `tenant`'s rows per table on a shard, counted as `bookmarks pin` counts them.
pub async fn rows_on(
    shards: &ShardSet,
    tables: &'static [TenantTable],
    shard: &str,
    tenant: &str,
) -> Result<Vec<(&'static str, i64)>, MoveError> {
    let fail = |e: String| MoveError::Db {
        what: format!("cannot count rows on {shard}"),
        source: DbError::Pool(e),
    };
    let pool = shards
        .by_name(shard)
        .ok_or_else(|| MoveError::UnknownShard {
            name: shard.to_owned(),
            known: shards.topology().shard_names(),
        })?
        .primary_pool();
    let mut conn = pool.get().await.map_err(|e| fail(e.to_string()))?;
    let counts = tenant_rows::count_per_table(&mut conn, tables, tenant)
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok(tables.iter().map(|t| t.name).zip(counts).collect())
}

/// The slot map as the control database has it now.
pub async fn live_owners(
    topology: &Topology,
    control: &mut diesel_async::AsyncPgConnection,
) -> Result<SlotOwners, MoveError> {
    slot_map::current(control, topology)
        .await
        .map_err(on_control("cannot read the slot map"))
}
