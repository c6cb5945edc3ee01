//! The tenant guard on a shard: changing a tenant's guard state (see the shard migration
//! `create_tenant_guard`).
//!
//! Each change takes the tenant's advisory lock exclusively, which the guard trigger takes
//! shared in every writing transaction: the change waits for the writes already past the
//! trigger to commit, and writes arriving meanwhile wait for the change and then obey it.

use tokio_postgres::Client;

/// The advisory lock class the guard trigger uses (with `hashtext(tenant)`).
const LOCK_CLASS: i32 = 1_836_021_349;
/// How long a guard change waits for a tenant's in-flight writes before giving up.
const LOCK_TIMEOUT: &str = "5s";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardState {
    /// Writes pass and their keys are logged for the catch-up copy.
    Capturing,
    /// Writes are refused: the final copy and verification are running.
    Fenced,
    /// Writes are refused, naming the shard the tenant went to.
    Departed,
    /// The tenant is being copied here: only the mover writes.
    Incoming,
}

impl GuardState {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardState::Capturing => "capturing",
            GuardState::Fenced => "fenced",
            GuardState::Departed => "departed",
            GuardState::Incoming => "incoming",
        }
    }
}

/// Sets `tenants`' guard on the connected shard, replacing whatever was there (the
/// members table guarantees no other unfinished move holds these tenants).
pub async fn set(
    shard: &mut Client,
    move_id: i64,
    tenants: &[String],
    guard: GuardState,
    peer_shard: &str,
) -> Result<(), tokio_postgres::Error> {
    let tx = barrier(shard, tenants).await?;
    tx.execute(
        "INSERT INTO _autumn_tenant_guard (tenant_key, move_id, state, peer_shard) \
         SELECT unnest($1::text[]), $2, $3, $4 \
         ON CONFLICT (tenant_key) DO UPDATE SET move_id = EXCLUDED.move_id, \
         state = EXCLUDED.state, peer_shard = EXCLUDED.peer_shard, updated_at = now()",
        &[&tenants, &move_id, &guard.as_str(), &peer_shard],
    )
    .await?;
    tx.commit().await
}

/// Removes this move's guard rows for `tenants` on the connected shard.
pub async fn clear(
    shard: &mut Client,
    move_id: i64,
    tenants: &[String],
) -> Result<(), tokio_postgres::Error> {
    let tx = barrier(shard, tenants).await?;
    tx.execute(
        "DELETE FROM _autumn_tenant_guard WHERE tenant_key = ANY($1) AND move_id = $2",
        &[&tenants, &move_id],
    )
    .await?;
    tx.commit().await
}

/// Opens a transaction holding every tenant's lock exclusively (in a fixed order, so two
/// barriers can never deadlock).
async fn barrier<'c>(
    shard: &'c mut Client,
    tenants: &[String],
) -> Result<tokio_postgres::Transaction<'c>, tokio_postgres::Error> {
    let tx = shard.transaction().await?;
    tx.batch_execute(&format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
        .await?;
    let mut sorted: Vec<&String> = tenants.iter().collect();
    sorted.sort();
    sorted.dedup();
    for tenant in sorted {
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&LOCK_CLASS, tenant],
        )
        .await?;
    }
    Ok(tx)
}

/// Turns the guard off for the mover's own statements in `tx` (copying rows in, deleting
/// them out): the trigger lets any session with this setting through.
pub async fn bypass(
    tx: &tokio_postgres::Transaction<'_>,
    move_id: i64,
) -> Result<(), tokio_postgres::Error> {
    tx.batch_execute(&format!("SET LOCAL autumn.move_bypass = '{move_id}'"))
        .await
}
