//! Step 4: delete the moved rows from the source, once routing still sends the move to the
//! destination and every web replica's cache (directory entries, slot map) has had `grace`
//! to expire.

use super::routing;
use std::time::Duration;

use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_db};
use crate::moves::io::{At, MoveIo};
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};

pub async fn run<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
    grace: Duration,
) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    routing::still_routed_to_destination(&scope, cx.io, m).await?;
    let wait = cx
        .io
        .until_repin_is(m.id, grace)
        .await
        .map_err(on_db("cannot read the re-pin time"))?;
    if !wait.is_zero() {
        cx.progress.step(&format!(
            "waiting {:.1} s so that every web replica's routing cache has expired \
             (--grace)",
            wait.as_secs_f64()
        ));
        tokio::time::sleep(wait).await;
    }
    // The source refuses the range's writes since the fence, so this is what was verified.
    let tenants = routing::members(&scope, cx.io, m, At::Source).await?;
    let deleted = cx
        .io
        .delete_moved_rows(Side::Source, m.id, &tenants)
        .await
        .map_err(on_db(format!("cannot delete the rows on {}", m.from)));
    let cleared = cx
        .io
        .clear_changes(m.id)
        .await
        .map_err(on_db("cannot clear the change log"));
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
