//! What every step of a move works with (its [`StepContext`]), and the control database
//! reads the planner shares.

use std::time::{Duration, Instant};

use super::error::{DbError, MoveError, on_control, on_db};
use super::io::MoveIo;
use super::progress::MoveProgress;
use super::record::{MoveRecord, MoveState, Set};
use crate::pg::pool::{PgConn, PgPool};
use crate::sharding::directory::table;
use crate::sharding::row_security::{self, RowScope};
use crate::sharding::slot_map::{self, SlotOwners};
use crate::sharding::tenant_rows::{self, TenantTable};
use crate::sharding::{ShardSet, Topology};

/// What a step works with: the world through `io`, the operator's options and progress
/// lines, and when this process fenced the move (kept between steps).
pub struct StepContext<'a, Io> {
    pub fence: FenceOptions,
    pub progress: &'a MoveProgress,
    pub io: &'a mut Io,
    /// When this process fenced the move's source, for `--max-fence`.
    pub fenced_since: &'a mut Option<Instant>,
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

impl<Io: MoveIo> StepContext<'_, Io> {
    /// Moves the record to `state`, setting `also` in the same statement.
    pub async fn advance(
        &mut self,
        m: &mut MoveRecord,
        state: MoveState,
        also: &[Set<'_>],
    ) -> Result<(), MoveError> {
        self.io
            .advance(m, state, also)
            .await
            .map_err(on_db("cannot record the move's progress"))
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
    row_security::declare(&mut conn, RowScope::Tenant(tenant))
        .await
        .map_err(|e| fail(e.to_string()))?;
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
