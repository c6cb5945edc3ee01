//! The job that runs an import: the import's chunks in order, each applied to the tenant's
//! shard in one transaction through a tenant session (which waits out a move's fence and
//! follows the tenant to its new shard) and then recorded on the control database. A
//! worker that dies between the two leaves a chunk applied but not recorded; the next try
//! applies it again, which writes nothing twice (see [`super::apply`]). After each chunk the
//! job rests in proportion to the chunk's time, so that an import takes a bounded share of
//! its shard and the shard's other tenants keep their latency.

use std::time::Instant;

use serde_json::{Value, json};
use uuid::Uuid;

use super::apply::{self, Chunk, Counts};
use super::store;
use crate::pg::pool::{CheckoutError, PgPool};
use crate::sharding::access::{ShardError, Shards};
use crate::sharding::session::{Primary, SessionError};
use crate::tenancy::TenantId;

/// Why a try of an import stopped; kept on the import and on its job.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("control database: {0}")]
    Checkout(#[from] CheckoutError),
    #[error("control database: {0}")]
    Control(#[from] diesel::result::Error),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error("on shard {shard}: {source}")]
    Query {
        shard: String,
        source: diesel::result::Error,
    },
}

/// Runs import `import` of `tenant` from its first unrecorded chunk. `rest` is how long to
/// pause after each chunk, as a multiple of the chunk's own time.
pub async fn run(
    tenant: &TenantId,
    import: Uuid,
    shards: &Shards,
    control: &PgPool,
    rest: f64,
) -> Result<Value, RunError> {
    let outcome = chunks(tenant, import, shards, control, rest).await;
    if let Err(e) = &outcome
        && let Ok(mut conn) = control.get().await
    {
        let _ = store::note_failure(&mut conn, import, &e.to_string(), false).await;
    }
    outcome
}

async fn chunks(
    tenant: &TenantId,
    import: Uuid,
    shards: &Shards,
    control: &PgPool,
    rest: f64,
) -> Result<Value, RunError> {
    let Some(row) = store::start(&mut *control.get().await?, import).await? else {
        return Ok(json!({"import": import, "state": "finished before this try"}));
    };
    let folders = row.folder_paths();
    let begun_ms = row.created_at.timestamp_millis().max(0) as u64;
    let mut total = Counts::default();
    let mut n = row.chunks_done;
    while n < row.chunks {
        let entries = store::chunk(&mut *control.get().await?, import, n).await?;
        let started = Instant::now();
        let chunk = Chunk {
            tenant,
            import,
            begun_ms,
            author: row.member_id,
            on_duplicate: row.on_duplicate(),
            folders: &folders,
            all_folders: n == 0,
            entries: &entries,
        };
        let mut session = shards
            .session::<Primary>(tenant.as_str(), None, None)
            .await?;
        let counts = session
            .write(async |c| apply::apply(c, &chunk).await)
            .await
            .map_err(|e| match e {
                SessionError::Shard(e) => RunError::Shard(e),
                SessionError::Work(source) => RunError::Query {
                    shard: session.shard().to_owned(),
                    source,
                },
            })?;
        drop(session);
        if !store::record(&mut *control.get().await?, import, n, counts).await? {
            // Recorded by another try (a worker whose lease ran out while it applied this
            // chunk): go on from wherever the import is now.
            match store::start(&mut *control.get().await?, import).await? {
                Some(now) => n = now.chunks_done,
                None => return Ok(json!({"import": import, "state": "finished by another try"})),
            }
            continue;
        }
        total.created += counts.created;
        total.updated += counts.updated;
        total.skipped += counts.skipped;
        n += 1;
        tokio::time::sleep(started.elapsed().mul_f64(rest)).await;
    }
    store::finish(&mut *control.get().await?, import).await?;
    Ok(json!({"import": import, "chunks": row.chunks, "this_try": total}))
}
