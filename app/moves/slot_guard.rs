//! The slot guard on a shard: what a range move sets for a whole slot range at once (see
//! the shard migration `create_slot_guard`).
//!
//! Each change takes `_autumn_slot_guard`'s ACCESS EXCLUSIVE lock, which conflicts with the
//! ACCESS SHARE lock every writing transaction holds from its guard check to its commit:
//! the change waits for the writes already past the check, and writes arriving meanwhile
//! wait for it and then obey it. One lock, whatever the number of tenants in the range.

use tokio_postgres::Client;

use super::tenant_guard::GuardState;
use crate::sharding::SlotRange;

/// How long a guard change waits for the shard's in-flight writes before giving up.
const LOCK_TIMEOUT: &str = "5s";

/// The ranges as two arrays (first slots, last slots), as the statements below take them.
fn bounds(ranges: &[SlotRange]) -> (Vec<i32>, Vec<i32>) {
    ranges
        .iter()
        .map(|r| (i32::from(r.start()), i32::from(r.end())))
        .unzip()
}

/// Opens a transaction that holds the slot guard against every write on the shard.
async fn barrier(
    shard: &mut Client,
) -> Result<tokio_postgres::Transaction<'_>, tokio_postgres::Error> {
    let tx = shard.transaction().await?;
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'; \
         LOCK TABLE _autumn_slot_guard IN ACCESS EXCLUSIVE MODE"
    ))
    .await?;
    Ok(tx)
}

/// Sets `ranges`' guard on the connected shard, replacing whatever was there. An
/// `Incoming` guard sets nothing: nobody routes a range's keys to its destination before
/// the flip, and tenants placed there by the directory are not part of the move.
pub async fn set(
    shard: &mut Client,
    move_id: i64,
    ranges: &[SlotRange],
    guard: GuardState,
    peer_shard: &str,
) -> Result<(), tokio_postgres::Error> {
    if guard == GuardState::Incoming {
        return Ok(());
    }
    let (first, last) = bounds(ranges);
    let tx = barrier(shard).await?;
    tx.execute(
        "INSERT INTO _autumn_slot_guard (slot, move_id, state, peer_shard) \
         SELECT generate_series(r.a, r.b), $3, $4, $5 FROM unnest($1::int[], $2::int[]) AS r(a, b) \
         ON CONFLICT (slot) DO UPDATE SET move_id = EXCLUDED.move_id, state = EXCLUDED.state, \
         peer_shard = EXCLUDED.peer_shard, updated_at = now()",
        &[&first, &last, &move_id, &guard.as_str(), &peer_shard],
    )
    .await?;
    tx.commit().await
}

/// Removes the guard rows of `ranges` on the connected shard: this move's only, or (with
/// `move_id` `None`) whichever move left them, as when a range comes back to a shard that
/// gave it away earlier.
pub async fn clear(
    shard: &mut Client,
    move_id: Option<i64>,
    ranges: &[SlotRange],
) -> Result<(), tokio_postgres::Error> {
    let (first, last) = bounds(ranges);
    let tx = barrier(shard).await?;
    tx.execute(
        "DELETE FROM _autumn_slot_guard g USING unnest($1::int[], $2::int[]) AS r(a, b) \
         WHERE g.slot BETWEEN r.a AND r.b AND ($3::bigint IS NULL OR g.move_id = $3)",
        &[&first, &last, &move_id],
    )
    .await?;
    tx.commit().await
}
