//! Undoing a move from wherever it stopped: routing as before, the source writable again,
//! the copied rows removed from the destination. Refused once the move is done, or once the
//! destination has taken writes after the re-pin (undoing would lose them).

use crate::moves::checksum::{self, TableSum};
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_shard};
use crate::moves::record::{self, MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::tenant_guard::GuardState;
use crate::moves::transfer;

/// Puts the shards back as they were before the move, then records it aborted.
pub async fn run(cx: &mut StepContext<'_>, m: &mut MoveRecord) -> Result<(), MoveError> {
    if m.state == MoveState::Repinned {
        undo_repin(cx, m).await?;
    } else {
        undo_copy(cx, m).await?;
    }
    finish(cx, m).await
}

/// Records the move aborted.
pub async fn finish(cx: &StepContext<'_>, m: &mut MoveRecord) -> Result<(), MoveError> {
    cx.advance(m, MoveState::Aborted, &[Set::Now("finished_at")])
        .await?;
    cx.progress
        .step("aborted: routing and data are as before the move");
    Ok(())
}

/// Before the re-pin the source is authoritative: lift its guard, forget the change log,
/// remove what was copied.
pub async fn undo_copy(cx: &mut StepContext<'_>, m: &MoveRecord) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    scope
        .unguard(&mut cx.pair.source, m.id)
        .await
        .map_err(on_shard(format!("cannot lift the guard on {}", m.from)))?;
    transfer::clear_changes(&cx.pair.source, m.id)
        .await
        .map_err(on_shard("cannot clear the change log"))?;
    remove_copy(cx, m, &scope).await?;
    scope
        .unguard(&mut cx.pair.dest, m.id)
        .await
        .map_err(on_shard(format!("cannot lift the guard on {}", m.to)))?;
    Ok(())
}

/// After the re-pin, only if the destination is exactly as verified: fence it, route back,
/// reopen the source, remove the copy and leave "departed" on the destination for any
/// replica still routing there.
async fn undo_repin(cx: &mut StepContext<'_>, m: &MoveRecord) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    scope
        .guard(&mut cx.pair.dest, m.id, GuardState::Fenced, &m.from)
        .await
        .map_err(on_shard(format!("cannot fence the tenants on {}", m.to)))?;
    // A range's new tenants may have written on the destination since the flip: they
    // count as writes too.
    let tenants = scope.members(cx, Side::Dest).await?;
    let now = checksum::sums(&cx.pair.dest, &cx.pair.tables, &tenants)
        .await
        .map_err(on_shard(format!("cannot checksum {}", m.to)))?;
    let verified: Option<Vec<TableSum>> = m
        .checksums
        .clone()
        .and_then(|v| serde_json::from_value(v).ok());
    let unchanged = verified.as_deref() == Some(now.as_slice())
        && (m.slots.is_none() || record::same_tenants(&tenants, &m.tenants));
    if !unchanged {
        scope
            .unguard(&mut cx.pair.dest, m.id)
            .await
            .map_err(on_shard(format!("cannot reopen {}", m.to)))?;
        return Err(MoveError::AbortAfterWrites {
            record: Box::new(m.clone()),
        });
    }
    scope.route_back(cx, m).await?;
    scope
        .unguard(&mut cx.pair.source, m.id)
        .await
        .map_err(on_shard(format!("cannot reopen {}", m.from)))?;
    remove_copy(cx, m, &scope).await?;
    scope
        .guard(&mut cx.pair.dest, m.id, GuardState::Departed, &m.from)
        .await
        .map_err(on_shard(format!(
            "cannot mark the tenants departed on {}",
            m.to
        )))?;
    Ok(())
}

/// Removes the move's copied rows from the destination.
async fn remove_copy(
    cx: &mut StepContext<'_>,
    m: &MoveRecord,
    scope: &Scope,
) -> Result<(), MoveError> {
    let tenants = scope.members(cx, Side::Dest).await?;
    let pair = &mut *cx.pair;
    transfer::delete_moved_rows(&mut pair.dest, m.id, &tenants, &pair.tables, cx.delete)
        .await
        .map_err(on_shard(format!(
            "cannot remove the copied rows from {}",
            m.to
        )))?;
    Ok(())
}
