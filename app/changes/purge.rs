//! Ends tombstones' retention: every process that runs background work asks each shard,
//! now and then, to delete the tombstones older than `[changes] tombstone_retention_days`
//! (`_feed_purge`, which also raises each tenant's horizon so that a cursor from before
//! them answers 410). Running it in several processes at once is harmless: the shard takes
//! each tenant's feed lock, and a second run finds nothing left to do.

use std::time::Duration;

use crate::sharding::ShardSet;
use crate::sharding::row_security;

/// `application_name` of the purge's sessions.
pub const APPLICATION_NAME: &str = "bookmarks-feed-purge";

/// How the purge runs.
#[derive(Debug, Clone, Copy)]
pub struct PurgeOptions {
    /// Tombstones older than this are deleted.
    pub retention: Duration,
    /// Pause between rounds on one shard.
    pub every: Duration,
    /// Tenants one call deals with (one transaction holds their feed locks).
    pub tenants_per_call: i32,
}

impl PurgeOptions {
    pub fn new(retention: Duration) -> Self {
        Self {
            retention,
            every: Duration::from_secs(600),
            tenants_per_call: 100,
        }
    }
}

/// One task per shard, until the process stops.
pub fn spawn_all(set: &ShardSet, options: PurgeOptions) -> Vec<tokio::task::JoinHandle<()>> {
    let connect_timeout = set.topology().connect_timeout;
    set.iter()
        .map(|shard| {
            let url = shard.spec().primary_url.clone();
            let name = shard.name().to_owned();
            tokio::spawn(async move {
                loop {
                    match round(&url, connect_timeout, options).await {
                        Ok(0) => {}
                        Ok(deleted) => {
                            tracing::info!(shard = %name, deleted, "purged expired tombstones");
                        }
                        Err(e) => {
                            tracing::warn!(shard = %name, error = %e, "tombstone purge failed");
                        }
                    }
                    tokio::time::sleep(options.every).await;
                }
            })
        })
        .collect()
}

/// Purges one shard until a call finds no tenant left to do; returns the rows deleted.
async fn round(
    url: &crate::pg::DbUrl,
    connect_timeout: Duration,
    options: PurgeOptions,
) -> anyhow::Result<i64> {
    let client = url
        .connect_session(APPLICATION_NAME, connect_timeout)
        .await?;
    client
        .batch_execute(&row_security::worker_session())
        .await?;
    let retention = options.retention.as_secs_f64();
    let mut total = 0;
    // Bounded: a shard with more to do than this finishes in the next round.
    for _ in 0..100 {
        let row = client
            .query_one(
                "SELECT _feed_purge(make_interval(secs => $1), $2)",
                &[&retention, &options.tenants_per_call],
            )
            .await?;
        let deleted: i64 = row.get(0);
        total += deleted;
        if deleted == 0 {
            break;
        }
    }
    Ok(total)
}
