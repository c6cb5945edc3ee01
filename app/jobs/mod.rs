//! Background jobs: a queue on the control database ([`queue`]) and the workers that run
//! it ([`worker`]) in every web replica and in `bookmarks worker`.
//!
//! A job names its tenant, not its shard: it is routed when it runs, through the same
//! router as requests, so a job enqueued before its tenant moved runs on the new shard.

pub mod queue;
pub mod worker;

use serde_json::{Value, json};

use crate::search;
use crate::sharding::access::{ShardError, Shards};
use crate::tenancy::TenantId;

pub const REINDEX_TENANT: &str = "reindex_tenant";
pub const REINDEX_SHARD: &str = "reindex_shard";
/// Attempts before a job is dead, unless its enqueuer says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 5;

/// A job as the code knows it: parsed from (and written as) a kind and a JSON payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Rebuild one tenant's search documents and tag counts where the tenant lives now.
    ReindexTenant { tenant: TenantId },
    /// Rebuild every tenant's on one shard.
    ReindexShard { shard: String },
}

impl Job {
    pub fn kind(&self) -> &'static str {
        match self {
            Job::ReindexTenant { .. } => REINDEX_TENANT,
            Job::ReindexShard { .. } => REINDEX_SHARD,
        }
    }

    pub fn payload(&self) -> Value {
        match self {
            Job::ReindexTenant { tenant } => json!({ "tenant": tenant }),
            Job::ReindexShard { shard } => json!({ "shard": shard }),
        }
    }

    /// Reads a stored job back; the error says what is wrong with it.
    pub fn parse(kind: &str, payload: &Value) -> Result<Self, String> {
        let field = |name: &str| {
            payload[name]
                .as_str()
                .ok_or_else(|| format!("{kind} job: payload has no text field {name:?}"))
        };
        match kind {
            REINDEX_TENANT => {
                let tenant = TenantId::parse(field("tenant")?)
                    .map_err(|e| format!("{kind} job: tenant: {e}"))?;
                Ok(Job::ReindexTenant { tenant })
            }
            REINDEX_SHARD => Ok(Job::ReindexShard {
                shard: field("shard")?.to_owned(),
            }),
            other => Err(format!(
                "unknown job kind {other:?} (known: {REINDEX_TENANT}, {REINDEX_SHARD})"
            )),
        }
    }

    /// Runs the job; the result is kept on the job row.
    pub async fn run(&self, shards: &Shards) -> Result<Value, String> {
        let fail = |e: ShardError| e.to_string();
        match self {
            Job::ReindexTenant { tenant } => {
                let mut conn = shards.db_for(tenant.as_str()).await.map_err(fail)?;
                let documents = search::reindex_tenant(conn.raw(), tenant.as_str())
                    .await
                    .map_err(|e| format!("on shard {}: {e}", conn.name))?;
                Ok(json!({ "shard": conn.name.as_str(), "documents": documents }))
            }
            Job::ReindexShard { shard } => {
                let mut conn = shards.db_on(shard).await.map_err(fail)?;
                let on = |e: diesel::result::Error| format!("on shard {shard}: {e}");
                let tenants = search::tenants_on_shard(conn.raw()).await.map_err(on)?;
                let mut documents = 0i64;
                for tenant in &tenants {
                    documents += i64::from(
                        search::reindex_tenant(conn.raw(), tenant)
                            .await
                            .map_err(on)?,
                    );
                }
                Ok(json!({ "shard": shard, "tenants": tenants.len(), "documents": documents }))
            }
        }
    }
}
