//! Background jobs: a queue on the control database ([`queue`]) and the workers that run
//! it ([`worker`]) in every web replica and in `bookmarks worker`.
//!
//! A job names its tenant, not its shard: it is routed when it runs, through the same
//! router as requests, so a job enqueued before its tenant moved runs on the new shard.

pub mod queue;
pub mod worker;

use serde_json::{Value, json};

use uuid::Uuid;

use crate::imports::{self, IMPORT_JOB};
use crate::pg::pool::PgPool;
use crate::search;
use crate::sharding::access::{ShardError, Shards};
use crate::sharding::row_security::RowScope;
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
    #[error("{kind} job: {field} is not a UUID")]
    NotAUuid { kind: String, field: &'static str },
    #[error("unknown job kind {0:?} (known: {REINDEX_TENANT}, {REINDEX_SHARD}, {IMPORT_JOB})")]
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
    #[error(transparent)]
    Import(#[from] imports::job::RunError),
    #[error("the job's lease ran out and another worker took it over")]
    LeaseLost,
}

/// A job as the code knows it: parsed from (and written as) a kind and a JSON payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Rebuild one tenant's search documents and tag counts where the tenant lives now.
    ReindexTenant { tenant: TenantId },
    /// Rebuild every tenant's on one shard.
    ReindexShard { shard: String },
    /// Apply an import's chunks to its tenant's shard (enqueued by the import itself, with
    /// the import's row: see `imports::store::create`).
    Import { tenant: TenantId, import: Uuid },
}

/// What a job may use while it runs.
#[derive(Clone, Copy)]
pub struct JobContext<'a> {
    pub shards: &'a Shards,
    pub control: &'a PgPool,
    /// An import's pause after each chunk, as a multiple of the chunk's time.
    pub import_rest: f64,
}

impl Job {
    pub fn kind(&self) -> &'static str {
        match self {
            Job::ReindexTenant { .. } => REINDEX_TENANT,
            Job::ReindexShard { .. } => REINDEX_SHARD,
            Job::Import { .. } => IMPORT_JOB,
        }
    }

    pub fn payload(&self) -> Value {
        match self {
            Job::ReindexTenant { tenant } => json!({ "tenant": tenant }),
            Job::ReindexShard { shard } => json!({ "shard": shard }),
            Job::Import { tenant, import } => json!({ "tenant": tenant, "import": import }),
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
        let tenant = || {
            TenantId::parse(field("tenant")?).map_err(|source| JobParseError::Tenant {
                kind: kind.to_owned(),
                source,
            })
        };
        match kind {
            REINDEX_TENANT => Ok(Job::ReindexTenant { tenant: tenant()? }),
            IMPORT_JOB => Ok(Job::Import {
                tenant: tenant()?,
                import: Uuid::parse_str(field("import")?).map_err(|_| JobParseError::NotAUuid {
                    kind: kind.to_owned(),
                    field: "import",
                })?,
            }),
            REINDEX_SHARD => Ok(Job::ReindexShard {
                shard: field("shard")?.to_owned(),
            }),
            other => Err(JobParseError::UnknownKind(other.to_owned())),
        }
    }

    /// Runs the job; the result is kept on the job row.
    pub async fn run(&self, cx: JobContext<'_>) -> Result<Value, JobError> {
        let shards = cx.shards;
        match self {
            Job::ReindexTenant { tenant } => {
                // A tenant session, as requests use: the job waits out a move's fence and
                // follows a tenant that departed.
                let mut session = shards
                    .session::<Primary>(tenant.as_str(), None, None)
                    .await?;
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
                let mut conn = shards.db_on(shard, RowScope::EveryTenant).await?;
                let on = |source| JobError::Query {
                    shard: shard.clone(),
                    source,
                };
                let raw = conn.raw().await?;
                let tenants = search::tenants_on_shard(raw).await.map_err(on)?;
                let mut documents = 0i64;
                for tenant in &tenants {
                    documents += i64::from(search::reindex_tenant(raw, tenant).await.map_err(on)?);
                }
                Ok(json!({ "shard": shard, "tenants": tenants.len(), "documents": documents }))
            }
            Job::Import { tenant, import } => {
                Ok(imports::job::run(tenant, *import, shards, cx.control, cx.import_rest).await?)
            }
        }
    }

    /// What is left to do once the job has failed for good: an import is marked failed,
    /// which lets its tenant start another.
    pub async fn buried(&self, control: &PgPool, error: &str) {
        if let Job::Import { import, .. } = self
            && let Ok(mut conn) = control.get().await
            && let Err(e) = imports::store::note_failure(&mut conn, *import, error, true).await
        {
            tracing::warn!(error = %e, %import, "a failed import could not be marked failed");
        }
    }
}
