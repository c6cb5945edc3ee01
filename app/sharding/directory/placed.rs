//! The shards' side of placement: `_autumn_placed_tenants` on a shard lists the tenants
//! the directory places there. A shard accepts their writes even in slots it gave away in
//! a range move (where it refuses everyone else's), so the directory and the shards agree
//! on who may be written where. `bookmarks pin`/`unpin`, the admin form and tenant moves
//! keep it in step with the directory; a range move adds the tenants pinned to its source.

use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, RunQueryDsl};

use crate::sharding::shard_set::ShardSet;

/// Lets `shard` accept `tenant`'s writes whatever its slot's guard says.
pub async fn place(shards: &ShardSet, shard: &str, tenant: &str) -> Result<(), String> {
    on_shard(shards, shard, tenant, true).await
}

/// Takes that exception away again. Waits for the shard's in-flight writes (the slot
/// guard's lock), so none that passed on the exception commits after it is gone.
pub async fn unplace(shards: &ShardSet, shard: &str, tenant: &str) -> Result<(), String> {
    on_shard(shards, shard, tenant, false).await
}

async fn on_shard(
    shards: &ShardSet,
    shard: &str,
    tenant: &str,
    placed: bool,
) -> Result<(), String> {
    let target = shards
        .by_name(shard)
        .ok_or_else(|| format!("shard {shard:?} is not configured"))?;
    let limit: Duration = shards.topology().acquire_timeout + shards.topology().query_timeout;
    let tenant = tenant.to_owned();
    let work = async {
        let mut conn = target
            .primary_pool()
            .get()
            .await
            .map_err(|e| e.to_string())?;
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
        .await
        .map_err(|e| e.to_string())
    };
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
        .map_err(|cause| format!("shard {shard}: {cause}"))
}
