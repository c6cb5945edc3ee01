//! Step 3: the destination takes over. Routing sends the move there (each tenant's
//! directory row, or the ranges in the live slot map; every web replica hears at once), a
//! reindex job per tenant is queued, and the source answers stale writers "departed".

use super::verify::within_fence_cap;
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_shard};
use crate::moves::pause::{PausePoint, pause_at};
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{self, Scope};
use crate::moves::tenant_guard::GuardState;

pub async fn run(cx: &mut StepContext<'_>, m: &mut MoveRecord) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    // Run right after `verify` by this process, the re-pin ends the same fence.
    within_fence_cap(cx, m, &scope, "about to re-pin").await?;
    scope
        .open_destination(&mut cx.pair.dest, m.id)
        .await
        .map_err(on_shard(format!("cannot open {} to the tenants", m.to)))?;
    scope.route_to(cx, m, &m.to.clone()).await?;
    // The destination's reindexer indexes rows as they are copied in; this rebuild (routed
    // to the new shard when it runs) makes each tenant's index and tag counts exact there
    // whatever happened during the copy.
    scope::queue_reindex(cx, m, &m.tenants.clone()).await?;
    scope
        .guard(&mut cx.pair.source, m.id, GuardState::Departed, &m.to)
        .await
        .map_err(on_shard(format!(
            "cannot mark the tenants departed on {}",
            m.from
        )))?;
    cx.advance(
        m,
        MoveState::Repinned,
        &[Set::FenceWindow, Set::Now("repinned_at")],
    )
    .await?;
    cx.progress.step(&format!(
        "re-pinned to {}; the tenants' writes were refused for {} ms",
        m.to,
        m.fence_ms.unwrap_or_default()
    ));
    pause_at(PausePoint::AfterRepin);
    Ok(())
}
