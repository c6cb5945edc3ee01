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
use crate::sharding::session::{Primary, SessionError};
use crate::tenancy::{TenantId, TenantIdError};

pub const REINDEX_TENANT: &str = "reindex_tenant";
pub const REINDEX_SHARD: &str = "reindex_shard";
/// Attempts before a job is dead, unless its enqueuer says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 5;

/// Why a stored job cannot be read back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobParseError {
    #[error("{kind} job: payload has no text field {field:?}")]
    MissingField { kind: String, field: &'static str },
    #[error("{kind} job: tenant: {source}")]
    Tenant { kind: String, source: TenantIdError },
    #[error("unknown job kind {0:?} (known: {REINDEX_TENANT}, {REINDEX_SHARD})")]
    UnknownKind(String),
}

/// Why a job failed; its text is kept on the job row.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Parse(#[from] JobParseError),
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error("on shard {shard}: {source}")]
    Query {
        shard: String,
        source: diesel::result::Error,
    },
}

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
    pub fn parse(kind: &str, payload: &Value) -> Result<Self, JobParseError> {
        let field = |name: &'static str| {
            payload[name]
                .as_str()
                .ok_or_else(|| JobParseError::MissingField {
                    kind: kind.to_owned(),
                    field: name,
                })
        };
        match kind {
            REINDEX_TENANT => {
                let tenant =
                    TenantId::parse(field("tenant")?).map_err(|source| JobParseError::Tenant {
                        kind: kind.to_owned(),
                        source,
                    })?;
                Ok(Job::ReindexTenant { tenant })
            }
            REINDEX_SHARD => Ok(Job::ReindexShard {
                shard: field("shard")?.to_owned(),
            }),
            other => Err(JobParseError::UnknownKind(other.to_owned())),
        }
    }

    /// Runs the job; the result is kept on the job row.
    pub async fn run(&self, shards: &Shards) -> Result<Value, JobError> {
        match self {
            Job::ReindexTenant { tenant } => {
                // A tenant session, as requests use: the job waits out a move's fence and
                // follows a tenant that departed.
                let mut session = shards.session::<Primary>(tenant.as_str(), None).await?;
                let outcome = session
                    .write(async |c| search::reindex_tenant(c, tenant.as_str()).await)
                    .await;
                let documents = outcome.map_err(|e| match e {
                    SessionError::Shard(e) => JobError::Shard(e),
                    SessionError::Work(source) => JobError::Query {
                        shard: session.shard().to_owned(),
                        source,
                    },
                })?;
                Ok(json!({ "shard": session.shard(), "documents": documents }))
            }
            Job::ReindexShard { shard } => {
                let mut conn = shards.db_on(shard).await?;
                let on = |source| JobError::Query {
                    shard: shard.clone(),
                    source,
                };
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
