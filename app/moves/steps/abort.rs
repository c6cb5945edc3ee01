//! Undoing a move from wherever it stopped: routing as before, the source writable again,
//! the copied rows removed from the destination. Refused once the move is done, once the
//! destination has taken writes after the re-pin (undoing would lose them), and once an
//! interrupted delete has begun removing the source rows.
//!
//! A move killed inside its re-pin is still "verified" by its record while routing may
//! already send some of its tenants to the destination; so from "verified" on, an abort
//! takes the careful path that puts routing back.

use super::routing;
use crate::moves::checksum::TableSum;
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_db};
use crate::moves::io::{At, MoveIo};
use crate::moves::record::{self, MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::tenant_guard::GuardState;
use crate::moves::transfer::Keys;

/// Puts the shards back as they were before the move, then records it aborted.
pub async fn run<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
) -> Result<(), MoveError> {
    if matches!(m.state, MoveState::Verified | MoveState::Repinned) {
        undo_repin(cx, m).await?;
    } else {
        undo_copy(cx, m).await?;
    }
    finish(cx, m).await
}

/// Records the move aborted.
pub async fn finish<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
) -> Result<(), MoveError> {
    cx.advance(m, MoveState::Aborted, &[Set::Now("finished_at")])
        .await?;
    cx.progress
        .step("aborted: routing and data are as before the move");
    Ok(())
}

/// Before the re-pin the source is authoritative: lift its guard, forget the change log,
/// remove what was copied.
pub async fn undo_copy<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &MoveRecord,
) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    cx.io
        .unguard(Side::Source, &scope, m.id)
        .await
        .map_err(on_db(format!("cannot lift the guard on {}", m.from)))?;
    cx.io
        .clear_changes(m.id)
        .await
        .map_err(on_db("cannot clear the change log"))?;
    remove_copy(cx, m, &scope).await?;
    cx.io
        .unguard(Side::Dest, &scope, m.id)
        .await
        .map_err(on_db(format!("cannot lift the guard on {}", m.to)))?;
    Ok(())
}

/// After the re-pin (or one that may have begun), only if both shards are exactly as
/// verified: fence the destination, route back, reopen the source, remove the copy and
/// leave "departed" on the destination for any replica still routing there.
async fn undo_repin<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &MoveRecord,
) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    cx.io
        .guard(Side::Dest, &scope, m.id, GuardState::Fenced, &m.from)
        .await
        .map_err(on_db(format!("cannot fence the tenants on {}", m.to)))?;
    // A range's new tenants may have written on the destination since the flip: they
    // count as writes too.
    let tenants = routing::members(&scope, cx.io, m, At::Dest).await?;
    let now = cx
        .io
        .sums_except(At::Dest, &tenants, &Keys::new())
        .await
        .map_err(on_db(format!("cannot checksum {}", m.to)))?;
    let verified: Option<Vec<TableSum>> = m
        .checksums
        .clone()
        .and_then(|v| serde_json::from_value(v).ok());
    let unchanged = verified.as_deref() == Some(now.as_slice())
        && (m.slots.is_none() || record::same_tenants(&tenants, &m.tenants));
    // The source refuses the tenants' writes since the fence: only the delete step
    // changes it.
    let source = if unchanged {
        let sums = cx
            .io
            .sums_except(At::Source, &m.tenants, &Keys::new())
            .await
            .map_err(on_db(format!("cannot checksum {}", m.from)))?;
        Some(verified.as_deref() == Some(sums.as_slice()))
    } else {
        None
    };
    if source != Some(true) {
        cx.io
            .unguard(Side::Dest, &scope, m.id)
            .await
            .map_err(on_db(format!("cannot reopen {}", m.to)))?;
        let record = Box::new(m.clone());
        return Err(match source {
            None => MoveError::AbortAfterWrites { record },
            Some(_) => MoveError::AbortDuringDelete { record },
        });
    }
    routing::route_back(&scope, cx.io, m).await?;
    cx.io
        .unguard(Side::Source, &scope, m.id)
        .await
        .map_err(on_db(format!("cannot reopen {}", m.from)))?;
    remove_copy(cx, m, &scope).await?;
    cx.io
        .guard(Side::Dest, &scope, m.id, GuardState::Departed, &m.from)
        .await
        .map_err(on_db(format!(
            "cannot mark the tenants departed on {}",
            m.to
        )))?;
    Ok(())
}

/// Removes the move's copied rows from the destination.
async fn remove_copy<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &MoveRecord,
    scope: &Scope,
) -> Result<(), MoveError> {
    let tenants = routing::members(scope, cx.io, m, At::Dest).await?;
    cx.io
        .delete_moved_rows(Side::Dest, m.id, &tenants)
        .await
        .map_err(on_db(format!(
            "cannot remove the copied rows from {}",
            m.to
        )))?;
    Ok(())
}
