//! Step 4: delete the moved rows from the source, once routing still sends the move to the
//! destination and every web replica's cache (directory entries, slot map) has had `grace`
//! to expire.

use std::time::Duration;

use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_control, on_shard};
use crate::moves::record::{self, MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::transfer;

pub async fn run(
    cx: &mut StepContext<'_>,
    m: &mut MoveRecord,
    grace: Duration,
) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    scope.still_routed_to_destination(cx, m).await?;
    let wait = record::until_repin_is(&mut *cx.control().await?, m.id, grace)
        .await
        .map_err(on_control("cannot read the re-pin time"))?;
    if wait > 0.0 {
        cx.progress.step(&format!(
            "waiting {wait:.1} s so that every web replica's routing cache has expired \
             (--grace)"
        ));
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    // The source refuses the range's writes since the fence, so this is what was verified.
    let tenants = scope.members(cx, Side::Source).await?;
    let pair = &mut *cx.pair;
    let deleted =
        transfer::delete_moved_rows(&mut pair.source, m.id, &tenants, &pair.tables, cx.delete)
            .await
            .map_err(on_shard(format!("cannot delete the rows on {}", m.from)));
    let cleared = transfer::clear_changes(&pair.source, m.id)
        .await
        .map_err(on_shard("cannot clear the change log"));
    let deleted = deleted?;
    cleared?;
    cx.advance(
        m,
        MoveState::Done,
        &[
            Set::Count("rows_deleted", deleted as i64),
            Set::Now("finished_at"),
        ],
    )
    .await?;
    cx.progress
        .step(&format!("deleted {deleted} row(s) from {}; done", m.from));
    Ok(())
}
