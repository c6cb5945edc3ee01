//! Embedded migrations and the multi-target migrator: control first, then every shard in
//! declaration order, failing fast. A half-migrated fleet that boots is worse than a
//! failed deploy, and already-applied migrations are skipped, so a retry is always safe.

use std::collections::BTreeSet;

use diesel::migration::MigrationSource;
use diesel::pg::Pg;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::pg::DbUrl;
use crate::sharding::Topology;

pub const CONTROL_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/control");
pub const SHARD_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/shard");

/// One database to migrate.
#[derive(Debug, Clone)]
pub struct Target {
    /// `control` or `shard:<name>`, as printed in `target=` log fields.
    pub label: String,
    pub url: DbUrl,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Control,
    Shard,
}

impl Kind {
    fn migrations(self) -> EmbeddedMigrations {
        match self {
            Kind::Control => CONTROL_MIGRATIONS,
            Kind::Shard => SHARD_MIGRATIONS,
        }
    }
}

/// Which targets a `migrate` run covers.
#[derive(Debug, Clone, Default)]
pub struct TargetFilter {
    pub shard: Option<String>,
    pub control_only: bool,
}

/// What one target looks like now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetStatus {
    pub target: String,
    pub applied: Vec<String>,
    pub pending: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("no shard is named {0:?}")]
    UnknownShard(String),
    #[error("target={target}: {message}")]
    Target { target: String, message: String },
}

/// The migration versions this build embeds for a kind of target.
pub fn expected_versions(kind: Kind) -> BTreeSet<String> {
    MigrationSource::<Pg>::migrations(&kind.migrations())
        .map(|ms| ms.iter().map(|m| m.name().version().to_string()).collect())
        .unwrap_or_default()
}

/// The targets a filter covers, control first then shards in declaration order.
pub fn targets(topology: &Topology, filter: &TargetFilter) -> Result<Vec<Target>, MigrateError> {
    let mut out = Vec::new();
    if filter.shard.is_none() {
        out.push(Target {
            label: "control".to_owned(),
            url: topology.control_url.clone(),
            kind: Kind::Control,
        });
    }
    if filter.control_only {
        return Ok(out);
    }
    if let Some(name) = &filter.shard
        && topology.shard_named(name).is_none()
    {
        return Err(MigrateError::UnknownShard(name.clone()));
    }
    for spec in &topology.shards {
        if filter
            .shard
            .as_deref()
            .is_none_or(|n| n == spec.name.as_str())
        {
            out.push(Target {
                label: format!("shard:{}", spec.name),
                url: spec.primary_url.clone(),
                kind: Kind::Shard,
            });
        }
    }
    Ok(out)
}

/// Applies pending migrations to each target in order, stopping at the first failure.
/// Returns the versions applied per target.
pub async fn run(targets: &[Target]) -> Result<Vec<(String, Vec<String>)>, MigrateError> {
    let mut report = Vec::new();
    for target in targets {
        tracing::info!(target = %target.label, "migrating");
        let applied = on_target(target, |conn, migrations| {
            conn.run_pending_migrations(migrations)
                .map(|vs| vs.iter().map(ToString::to_string).collect::<Vec<_>>())
        })
        .await?;
        if applied.is_empty() {
            tracing::info!(target = %target.label, "already up to date");
        } else {
            tracing::info!(target = %target.label, applied = ?applied, "applied");
        }
        report.push((target.label.clone(), applied));
    }
    Ok(report)
}

/// Reads each target's applied and pending migrations.
pub async fn status(targets: &[Target]) -> Result<Vec<TargetStatus>, MigrateError> {
    let mut out = Vec::new();
    for target in targets {
        let (applied, pending) = on_target(target, |conn, migrations| {
            let applied: Vec<String> = conn
                .applied_migrations()?
                .iter()
                .map(ToString::to_string)
                .collect();
            let pending: Vec<String> = conn
                .pending_migrations(migrations)?
                .iter()
                .map(|m| m.name().version().to_string())
                .collect();
            Ok((applied, pending))
        })
        .await?;
        out.push(TargetStatus {
            target: target.label.clone(),
            applied,
            pending,
        });
    }
    Ok(out)
}

type Harness = AsyncConnectionWrapper<AsyncPgConnection>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Diesel's migration harness is synchronous; it runs on a blocking thread.
async fn on_target<T: Send + 'static>(
    target: &Target,
    work: impl FnOnce(&mut Harness, EmbeddedMigrations) -> Result<T, BoxError> + Send + 'static,
) -> Result<T, MigrateError> {
    use diesel::Connection;
    let url = target.url.expose().to_owned();
    let migrations = target.kind.migrations();
    let label = target.label.clone();
    let fail = |message: String| MigrateError::Target {
        target: label.clone(),
        message,
    };
    tokio::task::spawn_blocking(move || {
        let mut conn = Harness::establish(&url).map_err(|e| format!("cannot connect: {e}"))?;
        work(&mut conn, migrations).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| fail(format!("migration task failed: {e}")))?
    .map_err(fail)
}

/// Records every configured shard in the control database's `known_shards` table, so an
/// operator can see when a shard was first and last deployed.
pub async fn record_known_shards(topology: &Topology) -> Result<(), MigrateError> {
    use diesel::sql_types::Text;
    use diesel_async::{AsyncConnection, RunQueryDsl};
    let fail = |message: String| MigrateError::Target {
        target: "control".to_owned(),
        message,
    };
    let mut conn = AsyncPgConnection::establish(topology.control_url.expose())
        .await
        .map_err(|e| fail(format!("cannot connect: {e}")))?;
    for spec in &topology.shards {
        diesel::sql_query(
            "INSERT INTO known_shards (name) VALUES ($1) \
             ON CONFLICT (name) DO UPDATE SET last_seen = now()",
        )
        .bind::<Text, _>(spec.name.as_str())
        .execute(&mut conn)
        .await
        .map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}
