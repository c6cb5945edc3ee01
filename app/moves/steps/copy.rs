//! Step 1: capture on (the source logs the keys of rows written from now on), one bulk
//! `COPY` per table from one snapshot, then catch-up rounds that re-copy logged keys. The
//! tenants stay writable throughout.

use std::time::Instant;

use crate::moves::context::{StepContext, rows_on};
use crate::moves::error::{MoveError, on_shard};
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::tenant_guard::{self, GuardState};
use crate::moves::transfer;

/// Catch-up rounds copy at most this many logged changes each.
pub const CATCH_UP_BATCH: i64 = 10_000;
/// Catch-up stops once a round has fewer changes than this left to copy: the rest is
/// copied behind the fence, whose length it bounds.
const CATCH_UP_SMALL: u64 = 200;
const CATCH_UP_ROUNDS: usize = 20;

pub async fn run(cx: &mut StepContext<'_>, m: &mut MoveRecord) -> Result<(), MoveError> {
    if m.state == MoveState::Planned {
        cx.advance(m, MoveState::Copying, &[Set::Now("copy_started_at")])
            .await?;
    }
    let pair = &mut *cx.pair;
    tenant_guard::set(
        &mut pair.dest,
        m.id,
        &m.tenants,
        GuardState::Incoming,
        &m.from,
    )
    .await
    .map_err(on_shard(format!("cannot guard the tenants on {}", m.to)))?;
    tenant_guard::set(
        &mut pair.source,
        m.id,
        &m.tenants,
        GuardState::Capturing,
        &m.to,
    )
    .await
    .map_err(on_shard(format!("cannot start capturing on {}", m.from)))?;
    let mut total = 0;
    for tenant in &m.tenants {
        total += rows_on(cx.shards, cx.tables, &m.from, tenant)
            .await?
            .iter()
            .map(|(_, n)| n)
            .sum::<i64>();
    }
    let started = Instant::now();
    cx.progress.start_copy(total as u64);
    let pair = &mut *cx.pair;
    let copied = transfer::bulk(
        &mut pair.source,
        &mut pair.dest,
        m.id,
        &m.tenants,
        &pair.tables,
        cx.progress,
    )
    .await
    .map_err(on_shard("bulk copy failed"));
    cx.progress.finish_copy();
    let copied = copied?;
    let took = started.elapsed();
    cx.progress.step(&format!(
        "copied {copied} row(s) in {} ms ({:.0} rows/s)",
        took.as_millis(),
        copied as f64 / took.as_secs_f64().max(1e-9)
    ));
    let mut applied = 0;
    for _ in 0..CATCH_UP_ROUNDS {
        let n = pair
            .catch_up(m.id, CATCH_UP_BATCH)
            .await
            .map_err(on_shard("catch-up copy failed"))?;
        applied += n;
        if n < CATCH_UP_SMALL {
            break;
        }
    }
    cx.progress.step(&format!(
        "caught up with {applied} change(s) written meanwhile"
    ));
    cx.advance(
        m,
        MoveState::Copied,
        &[
            Set::Count("rows_copied", copied as i64),
            Set::Count("changes_applied", m.changes_applied + applied as i64),
            Set::Now("copied_at"),
        ],
    )
    .await
}
