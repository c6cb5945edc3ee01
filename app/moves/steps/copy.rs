//! Step 1: capture on (the source logs the keys of rows written from now on), one bulk
//! `COPY` per table from one snapshot, then catch-up rounds that re-copy logged keys. The
//! tenants stay writable throughout. A range move captures every key of its ranges, so a
//! tenant that first writes after the bulk copy is carried by the catch-up.

use super::routing;
use std::time::Instant;

use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_db};
use crate::moves::io::{At, MoveIo};
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::tenant_guard::GuardState;
use crate::moves::transfer::Keys;

/// Catch-up stops once a round has fewer changes than this left to copy: the rest is
/// copied behind the fence, whose length it bounds.
const CATCH_UP_SMALL: u64 = 200;
const CATCH_UP_ROUNDS: usize = 20;

/// Catch-up rounds while the tenants stay writable, until a round finds little left (or
/// after `CATCH_UP_ROUNDS`); returns the changes applied, adding their rows to `applied`.
pub async fn catch_up_until_small<Io: MoveIo>(
    io: &mut Io,
    move_id: i64,
    mut applied: Option<&mut Keys>,
) -> Result<u64, MoveError> {
    let mut total = 0;
    for _ in 0..CATCH_UP_ROUNDS {
        let n = io
            .catch_up(move_id, applied.as_deref_mut())
            .await
            .map_err(on_db("catch-up copy failed"))?;
        total += n;
        if n < CATCH_UP_SMALL {
            break;
        }
    }
    Ok(total)
}

pub async fn run<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
) -> Result<(), MoveError> {
    if m.state == MoveState::Planned {
        cx.advance(m, MoveState::Copying, &[Set::Now("copy_started_at")])
            .await?;
    }
    let scope = Scope::of(m);
    let staying = routing::keep_placed_on_source(&scope, cx.io, &m.from).await?;
    if staying > 0 {
        cx.progress.step(&format!(
            "{staying} tenant(s) of the range are placed on {} and stay there",
            m.from
        ));
    }
    cx.io
        .guard(Side::Dest, &scope, m.id, GuardState::Incoming, &m.from)
        .await
        .map_err(on_db(format!("cannot guard the tenants on {}", m.to)))?;
    cx.io
        .guard(Side::Source, &scope, m.id, GuardState::Capturing, &m.to)
        .await
        .map_err(on_db(format!("cannot start capturing on {}", m.from)))?;
    // Listed after capture is on: a tenant's rows are either here, or logged from now on.
    let tenants = routing::members(&scope, cx.io, m, At::Source).await?;
    let total = cx
        .io
        .row_count(At::Source, &tenants)
        .await
        .map_err(on_db(format!("cannot count rows on {}", m.from)))?;
    let started = Instant::now();
    cx.progress.start_copy(total as u64);
    let copied = cx
        .io
        .bulk_copy(m.id, &tenants, cx.progress)
        .await
        .map_err(on_db("bulk copy failed"));
    cx.progress.finish_copy();
    let copied = copied?;
    let took = started.elapsed();
    cx.progress.step(&format!(
        "copied {copied} row(s) in {} ms ({:.0} rows/s)",
        took.as_millis(),
        copied as f64 / took.as_secs_f64().max(1e-9)
    ));
    let applied = catch_up_until_small(cx.io, m.id, None).await?;
    cx.progress.step(&format!(
        "caught up with {applied} change(s) written meanwhile"
    ));
    cx.advance(
        m,
        MoveState::Copied,
        &[
            Set::Tenants(&tenants),
            Set::Count("rows_copied", copied as i64),
            Set::Count("changes_applied", m.changes_applied + applied as i64),
            Set::Now("copied_at"),
        ],
    )
    .await
}
