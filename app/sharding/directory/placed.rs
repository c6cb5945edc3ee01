//! The shards' side of placement: `_autumn_placed_tenants` on a shard lists the tenants
//! the directory places there. A shard accepts their writes even in slots it gave away in
//! a range move (where it refuses everyone else's), so the directory and the shards agree
//! on who may be written where. `bookmarks pin`/`unpin`, the admin form and tenant moves
//! keep it in step with the directory; a range move adds the tenants pinned to its source.

use crate::sharding::row_security::{self, RowScope};
use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, RunQueryDsl};

use crate::pg::bounded::{ServerError, within};
use crate::sharding::shard_set::ShardSet;

/// Why a shard's copy of placement was not changed.
#[derive(Debug, thiserror::Error)]
pub enum PlacedError {
    #[error("shard {0:?} is not configured")]
    UnknownShard(String),
    #[error("shard {shard}: {cause}")]
    Shard { shard: String, cause: ServerError },
}

/// Lets `shard` accept `tenant`'s writes whatever its slot's guard says.
pub async fn place(shards: &ShardSet, shard: &str, tenant: &str) -> Result<(), PlacedError> {
    on_shard(shards, shard, tenant, true).await
}

/// Takes that exception away again. Waits for the shard's in-flight writes (the slot
/// guard's lock), so none that passed on the exception commits after it is gone.
pub async fn unplace(shards: &ShardSet, shard: &str, tenant: &str) -> Result<(), PlacedError> {
    on_shard(shards, shard, tenant, false).await
}

async fn on_shard(
    shards: &ShardSet,
    shard: &str,
    tenant: &str,
    placed: bool,
) -> Result<(), PlacedError> {
    let target = shards
        .by_name(shard)
        .ok_or_else(|| PlacedError::UnknownShard(shard.to_owned()))?;
    let limit: Duration = shards.topology().acquire_timeout + shards.topology().query_timeout;
    let tenant = tenant.to_owned();
    let work = async {
        let mut conn = target.primary_pool().get().await?;
        // The framework's own table: no tenant's rows, as the app's role whatever the
        // connection's last checkout declared.
        row_security::declare(&mut conn, RowScope::NoTenant).await?;
        conn.transaction(async |c| {
            if placed {
                diesel::sql_query(
                    "INSERT INTO _autumn_placed_tenants (tenant_key) VALUES ($1) \
                     ON CONFLICT (tenant_key) DO NOTHING",
                )
                .bind::<Text, _>(&tenant)
                .execute(c)
                .await?;
            } else {
                diesel::sql_query("SET LOCAL lock_timeout = '5s'")
                    .execute(c)
                    .await?;
                diesel::sql_query("LOCK TABLE _autumn_slot_guard IN ACCESS EXCLUSIVE MODE")
                    .execute(c)
                    .await?;
                diesel::sql_query("DELETE FROM _autumn_placed_tenants WHERE tenant_key = $1")
                    .bind::<Text, _>(&tenant)
                    .execute(c)
                    .await?;
            }
            Ok::<_, diesel::result::Error>(())
        })
        .await?;
        Ok(())
    };
    within(limit, work)
        .await
        .map_err(|cause| PlacedError::Shard {
            shard: shard.to_owned(),
            cause,
        })
}
