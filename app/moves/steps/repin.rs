//! Step 3: the destination takes over. The directory routes the tenants there (every web
//! replica hears at once), a reindex job per tenant is queued, and the source answers stale
//! writers "departed".

use crate::jobs::{self, Job, queue};
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_control, on_shard};
use crate::moves::pause::{PausePoint, pause_at};
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::tenant_guard::{self, GuardState};
use crate::sharding::directory::table;
use crate::tenancy::TenantId;

pub async fn run(cx: &mut StepContext<'_>, m: &mut MoveRecord) -> Result<(), MoveError> {
    tenant_guard::clear(&mut cx.pair.dest, m.id, &m.tenants)
        .await
        .map_err(on_shard(format!("cannot open {} to the tenants", m.to)))?;
    let note = format!("move_slot move {}", m.id);
    let mut directory = cx.control().await?;
    for tenant in &m.tenants {
        table::upsert(&mut directory, tenant, &m.to, Some(&note))
            .await
            .map_err(on_control("cannot re-pin in the directory"))?;
        // The destination's reindexer indexes rows as they are copied in; this rebuild
        // (routed to the new shard when it runs) makes the tenant's index and tag counts
        // exact there whatever happened during the copy. The key makes a resumed move
        // enqueue it once.
        let job = Job::ReindexTenant {
            tenant: TenantId::parse(tenant)
                .map_err(|e| MoveError::Setup(format!("tenant {tenant:?}: {e}")))?,
        };
        let key = format!("move-{}-reindex-{tenant}", m.id);
        queue::enqueue(
            &mut directory,
            &queue::NewJob {
                job: &job,
                idempotency_key: Some(&key),
                max_attempts: jobs::DEFAULT_MAX_ATTEMPTS,
            },
        )
        .await
        .map_err(on_control("cannot enqueue the reindex job"))?;
    }
    drop(directory);
    tenant_guard::set(
        &mut cx.pair.source,
        m.id,
        &m.tenants,
        GuardState::Departed,
        &m.to,
    )
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
