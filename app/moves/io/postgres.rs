//! [`MoveIo`] on real servers: the mover's own `tokio-postgres` sessions to the two shards
//! (kept between steps in a [`Pair`]), and the control database's pool.

use std::time::Duration;

use tokio_postgres::Client;

use super::{At, MoveIo, RowHashes};
use crate::jobs::{self, Job, queue};
use crate::moves::checksum::{self, TableSum};
use crate::moves::conn;
use crate::moves::error::DbError;
use crate::moves::pause::{PausePoint, pause_at};
use crate::moves::plan;
use crate::moves::progress::MoveProgress;
use crate::moves::record::{self, MoveRecord, MoveState, Set};
use crate::moves::scope::{self, Placed, Scope, Side};
use crate::moves::transfer::{self, DeletePacing, Keys, TableInfo};
use crate::moves::{slot_guard, tenant_guard};
use crate::pg::DbUrl;
use crate::pg::pool::{PgConn, PgPool};
use crate::sharding::directory::{placed, table};
use crate::sharding::tenant_rows::TenantTable;
use crate::sharding::{ShardSet, SlotRange};
use crate::sharding::{arrivals, slot_map};
use crate::tenancy::TenantId;

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
}

impl Pair {
    /// Whether these sessions serve `m` and are still open.
    pub fn serves(&self, m: &MoveRecord) -> bool {
        self.from == m.from && self.to == m.to && !self.source.is_closed() && !self.dest.is_closed()
    }
}

pub struct PgMoveIo<'a> {
    pub control: &'a PgPool,
    pub shards: &'a ShardSet,
    /// The tenant tables the deployment registered.
    pub tables: &'static [TenantTable],
    pub delete: DeletePacing,
    pub pair: &'a mut Pair,
    /// A second source session holding a read-only snapshot, while one is open.
    snapshot: Option<Client>,
}

impl<'a> PgMoveIo<'a> {
    pub fn new(
        control: &'a PgPool,
        shards: &'a ShardSet,
        tables: &'static [TenantTable],
        delete: DeletePacing,
        pair: &'a mut Pair,
    ) -> Self {
        Self {
            control,
            shards,
            tables,
            delete,
            pair,
            snapshot: None,
        }
    }

    fn client(&self, at: At) -> Result<&Client, DbError> {
        match at {
            At::Source => Ok(&self.pair.source),
            At::Dest => Ok(&self.pair.dest),
            At::Snapshot => self
                .snapshot
                .as_ref()
                .ok_or_else(|| DbError::Pool("no snapshot of the source is open".to_owned())),
        }
    }

    fn side(&mut self, side: Side) -> &mut Client {
        match side {
            Side::Source => &mut self.pair.source,
            Side::Dest => &mut self.pair.dest,
        }
    }

    async fn conn(&self) -> Result<PgConn, DbError> {
        control(self.control).await
    }
}

/// A control database connection out of `pool`.
pub async fn control(pool: &PgPool) -> Result<PgConn, DbError> {
    pool.get()
        .await
        .map_err(|e| DbError::Pool(format!("cannot reach the control database: {e}")))
}

impl MoveIo for PgMoveIo<'_> {
    async fn guard(
        &mut self,
        side: Side,
        scope: &Scope,
        move_id: i64,
        state: tenant_guard::GuardState,
        peer: &str,
    ) -> Result<(), DbError> {
        let shard = self.side(side);
        match scope {
            Scope::Tenants(tenants) => {
                tenant_guard::set(shard, move_id, tenants, state, peer).await
            }
            Scope::Ranges(ranges) => slot_guard::set(shard, move_id, ranges, state, peer).await,
        }
        .map_err(DbError::Shard)
    }

    async fn unguard(&mut self, side: Side, scope: &Scope, move_id: i64) -> Result<(), DbError> {
        let shard = self.side(side);
        match scope {
            Scope::Tenants(tenants) => tenant_guard::clear(shard, move_id, tenants).await,
            Scope::Ranges(ranges) => slot_guard::clear(shard, Some(move_id), ranges).await,
        }
        .map_err(DbError::Shard)
    }

    async fn open_destination(&mut self, scope: &Scope, move_id: i64) -> Result<(), DbError> {
        let dest = &mut self.pair.dest;
        match scope {
            Scope::Tenants(tenants) => tenant_guard::clear(dest, move_id, tenants).await,
            Scope::Ranges(ranges) => slot_guard::clear(dest, None, ranges).await,
        }
        .map_err(DbError::Shard)
    }

    async fn tenants_in(&self, at: At, ranges: &[SlotRange]) -> Result<Vec<String>, DbError> {
        plan::tenants_where(self.client(at)?, self.tables, |t| {
            scope::in_ranges(ranges, t)
        })
        .await
        .map_err(DbError::Shard)
    }

    async fn tenants_with_rows(&self, at: At, tenants: &[String]) -> Result<Vec<String>, DbError> {
        plan::tenants_with_rows(self.client(at)?, self.tables, tenants)
            .await
            .map_err(DbError::Shard)
    }

    async fn row_count(&self, at: At, tenants: &[String]) -> Result<i64, DbError> {
        let counts = plan::rows_by_tenant(self.client(at)?, self.tables, tenants)
            .await
            .map_err(DbError::Shard)?;
        Ok(counts.iter().flatten().map(|(_, n)| n).sum())
    }

    async fn bulk_copy(
        &mut self,
        move_id: i64,
        tenants: &[String],
        progress: &MoveProgress,
    ) -> Result<u64, DbError> {
        let pair = &mut *self.pair;
        transfer::bulk(
            &mut pair.source,
            &mut pair.dest,
            move_id,
            tenants,
            &pair.tables,
            progress,
        )
        .await
        .map_err(DbError::Shard)
    }

    async fn catch_up(&mut self, move_id: i64, applied: Option<&mut Keys>) -> Result<u64, DbError> {
        let pair = &mut *self.pair;
        transfer::catch_up(
            &mut pair.source,
            &mut pair.dest,
            move_id,
            &pair.tables,
            applied,
        )
        .await
        .map_err(DbError::Shard)
    }

    async fn open_snapshot(&mut self, move_id: i64) -> Result<Keys, DbError> {
        let snapshot = conn::connect_shard(
            &self.pair.source_url,
            &self.pair.from,
            self.pair.connect_timeout,
        )
        .await?;
        // The snapshot is taken at the first statement.
        snapshot
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(DbError::Shard)?;
        let mut pending = Keys::new();
        for row in snapshot
            .query(
                "SELECT table_name, tenant_key, row_key FROM _autumn_move_changes \
                 WHERE move_id = $1",
                &[&move_id],
            )
            .await
            .map_err(DbError::Shard)?
        {
            transfer::note(&mut pending, row.get(0), row.get(1), row.get(2));
        }
        self.snapshot = Some(snapshot);
        Ok(pending)
    }

    fn close_snapshot(&mut self) {
        self.snapshot = None;
    }

    async fn sums_except(
        &self,
        at: At,
        tenants: &[String],
        except: &Keys,
    ) -> Result<Vec<TableSum>, DbError> {
        checksum::sums_except(self.client(at)?, &self.pair.tables, tenants, except)
            .await
            .map_err(DbError::Shard)
    }

    async fn row_hashes(&self, at: At, keys: &Keys) -> Result<RowHashes, DbError> {
        checksum::row_hashes(self.client(at)?, &self.pair.tables, keys)
            .await
            .map_err(DbError::Shard)
    }

    async fn delete_moved_rows(
        &mut self,
        side: Side,
        move_id: i64,
        tenants: &[String],
    ) -> Result<u64, DbError> {
        let pacing = self.delete;
        let pair = &mut *self.pair;
        let shard = match side {
            Side::Source => &mut pair.source,
            Side::Dest => &mut pair.dest,
        };
        transfer::delete_moved_rows(shard, move_id, tenants, &pair.tables, pacing)
            .await
            .map_err(DbError::Shard)
    }

    async fn clear_changes(&mut self, move_id: i64) -> Result<(), DbError> {
        transfer::clear_changes(&self.pair.source, move_id)
            .await
            .map(drop)
            .map_err(DbError::Shard)
    }

    async fn pause(&mut self, point: PausePoint) -> Result<(), DbError> {
        pause_at(point);
        Ok(())
    }

    async fn advance(
        &mut self,
        m: &mut MoveRecord,
        state: MoveState,
        also: &[Set<'_>],
    ) -> Result<(), DbError> {
        record::advance(&mut *self.conn().await?, m, state, also)
            .await
            .map_err(DbError::Record)
    }

    async fn placed_in(&self, ranges: &[SlotRange]) -> Result<Placed, DbError> {
        scope::placed_tenants(self.shards, &mut *self.conn().await?, ranges).await
    }

    async fn set_placed(&mut self, shard: &str, tenant: &str, on: bool) -> Result<(), DbError> {
        let done = match on {
            true => placed::place(self.shards, shard, tenant).await,
            false => placed::unplace(self.shards, shard, tenant).await,
        };
        done.map_err(|e| DbError::Pool(e.to_string()))
    }

    async fn directory_row(&self, tenant: &str) -> Result<Option<String>, DbError> {
        Ok(table::shard_of(&mut *self.conn().await?, tenant).await?)
    }

    async fn set_directory_row(
        &mut self,
        tenant: &str,
        shard: Option<&str>,
        note: &str,
    ) -> Result<(), DbError> {
        let mut conn = self.conn().await?;
        match shard {
            Some(shard) => table::upsert(&mut conn, tenant, shard, Some(note)).await?,
            None => drop(table::remove(&mut conn, tenant).await?),
        }
        Ok(())
    }

    async fn record_arrival(&mut self, to: &str) -> Result<(), DbError> {
        let row = self
            .pair
            .dest
            .query_one(arrivals::WAL_POSITION, &[])
            .await
            .map_err(DbError::Shard)?;
        let lsn: i64 = row.get(0);
        Ok(arrivals::record(&mut *self.conn().await?, to, lsn).await?)
    }

    async fn assign_slots(
        &mut self,
        ranges: &[SlotRange],
        to: &str,
        move_id: i64,
    ) -> Result<(), DbError> {
        let mut conn = self.conn().await?;
        Ok(slot_map::assign(&mut conn, self.shards.topology(), ranges, to, move_id).await?)
    }

    async fn slot_routed_elsewhere(
        &self,
        ranges: &[SlotRange],
        to: &str,
    ) -> Result<Option<(u16, String)>, DbError> {
        let topology = self.shards.topology();
        let owners = slot_map::current(&mut *self.conn().await?, topology).await?;
        Ok(ranges.iter().flat_map(|r| r.iter()).find_map(|slot| {
            let now = topology.shards[owners.owner(slot).shard].name.as_str();
            (now != to).then(|| (slot, now.to_owned()))
        }))
    }

    async fn enqueue_reindex(&mut self, move_id: i64, tenants: &[TenantId]) -> Result<(), DbError> {
        let jobs: Vec<Job> = tenants
            .iter()
            .map(|tenant| Job::ReindexTenant {
                tenant: tenant.clone(),
            })
            .collect();
        let keys: Vec<String> = tenants
            .iter()
            .map(|t| format!("move-{move_id}-reindex-{}", t.as_str()))
            .collect();
        let new: Vec<queue::NewJob<'_>> = jobs
            .iter()
            .zip(&keys)
            .map(|(job, key)| queue::NewJob {
                job,
                idempotency_key: Some(key),
                max_attempts: jobs::DEFAULT_MAX_ATTEMPTS,
            })
            .collect();
        queue::enqueue_many(&mut *self.conn().await?, &new).await?;
        Ok(())
    }

    async fn until_repin_is(&self, move_id: i64, grace: Duration) -> Result<Duration, DbError> {
        let seconds = record::until_repin_is(&mut *self.conn().await?, move_id, grace).await?;
        Ok(Duration::from_secs_f64(seconds.max(0.0)))
    }
}
