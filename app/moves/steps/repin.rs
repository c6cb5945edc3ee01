//! Step 3: the destination takes over. Routing sends the move there (each tenant's
//! directory row, or the ranges in the live slot map; every web replica hears at once), a
//! reindex job per tenant is queued, and the source answers stale writers "departed".

use super::routing;
use super::verify::within_fence_cap;
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_db};
use crate::moves::io::MoveIo;
use crate::moves::pause::PausePoint;
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::tenant_guard::GuardState;

pub async fn run<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    // Run right after `verify` by this process, the re-pin ends the same fence.
    within_fence_cap(cx, m, &scope, "about to re-pin").await?;
    cx.io
        .open_destination(&scope, m.id)
        .await
        .map_err(on_db(format!("cannot open {} to the tenants", m.to)))?;
    // Before routing changes: whoever learns the new route learns the arrival with it.
    cx.io
        .record_arrival(&m.to)
        .await
        .map_err(on_db(format!("cannot record the arrival on {}", m.to)))?;
    routing::route_to(&scope, cx.io, m, &m.to.clone()).await?;
    // The destination's reindexer indexes rows as they are copied in; this rebuild (routed
    // to the new shard when it runs) makes each tenant's index and tag counts exact there
    // whatever happened during the copy.
    routing::queue_reindex(cx.io, m, &m.tenants.clone()).await?;
    cx.io
        .guard(Side::Source, &scope, m.id, GuardState::Departed, &m.to)
        .await
        .map_err(on_db(format!(
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
    cx.io
        .pause(PausePoint::AfterRepin)
        .await
        .map_err(on_db("paused after the re-pin"))
}
