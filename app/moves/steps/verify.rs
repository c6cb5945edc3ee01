//! Step 2: fence the source (it refuses the tenants' writes), copy the last logged changes,
//! then compare per table the row count and a checksum of every column on both shards. A
//! mismatch aborts the move: the source stays authoritative and nothing of it is deleted.

use std::time::Instant;

use super::abort::undo_copy;
use super::copy::CATCH_UP_BATCH;
use crate::moves::checksum;
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_shard};
use crate::moves::pause::{PausePoint, pause_at};
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::tenant_guard::GuardState;

pub async fn run(cx: &mut StepContext<'_>, m: &mut MoveRecord) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    if m.state == MoveState::Copied {
        scope
            .guard(&mut cx.pair.source, m.id, GuardState::Fenced, &m.to)
            .await
            .map_err(on_shard(format!("cannot fence the tenants on {}", m.from)))?;
        cx.advance(m, MoveState::Fenced, &[Set::Now("fenced_at")])
            .await?;
        cx.progress
            .step(&format!("fenced: {} refuses the tenants' writes", m.from));
        pause_at(PausePoint::AfterFence);
    }
    let final_copy = Instant::now();
    let mut applied = 0;
    let pair = &mut *cx.pair;
    loop {
        let n = pair
            .catch_up(m.id, CATCH_UP_BATCH)
            .await
            .map_err(on_shard("final copy failed"))?;
        applied += n;
        if n == 0 {
            break;
        }
    }
    let final_copy = final_copy.elapsed();
    let checksumming = Instant::now();
    // Fenced: the members cannot change any more (a range's new tenants included).
    let tenants = scope.members(cx, Side::Source).await?;
    let pair = &mut *cx.pair;
    let (at_source, at_dest) = tokio::join!(
        checksum::sums(&pair.source, &pair.tables, &tenants),
        checksum::sums(&pair.dest, &pair.tables, &tenants)
    );
    let at_source = at_source.map_err(on_shard(format!("cannot checksum {}", m.from)))?;
    let at_dest = at_dest.map_err(on_shard(format!("cannot checksum {}", m.to)))?;
    let differences = checksum::differences(&at_source, &at_dest);
    if !differences.is_empty() {
        let failure = MoveError::VerificationFailed {
            differences: differences.join("; "),
        };
        undo_copy(cx, m).await?;
        let why = failure.to_string();
        cx.advance(
            m,
            MoveState::Aborted,
            &[Set::Error(Some(&why)), Set::Now("finished_at")],
        )
        .await?;
        return Err(failure);
    }
    let rows: i64 = at_source.iter().map(|s| s.rows).sum();
    let sums = serde_json::to_value(&at_source).expect("sums serialize");
    cx.advance(
        m,
        MoveState::Verified,
        &[
            Set::Tenants(&tenants),
            Set::Count("rows_verified", rows),
            Set::Count("changes_applied", m.changes_applied + applied as i64),
            Set::Json("checksums", &sums),
            Set::Now("verified_at"),
        ],
    )
    .await?;
    cx.progress.step(&format!(
        "verified {rows} row(s) after copying the last {applied} change(s) (final copy \
         {} ms, checksums {} ms)",
        final_copy.as_millis(),
        checksumming.elapsed().as_millis()
    ));
    Ok(())
}
