//! Shared application state handed to every handler.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::admin::AdminToken;
use crate::configuration::Settings;
use crate::fairness::Fairness;
use crate::jobs::worker::JobCounts;
use crate::search::reindexer::IndexStates;
use crate::sharding::DirectoryRouter;
use crate::sharding::access::Shards;
use crate::sharding::breaker::Breaker;
use crate::sharding::shard_set::PgPool;

#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

pub struct Inner {
    pub settings: Settings,
    pub shards: Shards,
    /// The control database (framework state; never sharded).
    pub control: PgPool,
    /// The directory router, when `[sharding] directory_router` is on (also installed in
    /// `shards`); kept here for its metrics and health.
    pub directory: Option<Arc<DirectoryRouter>>,
    /// Turns the admin page on (`ADMIN_TOKEN`); `None` leaves `/admin` unmounted.
    pub admin_token: Option<AdminToken>,
    /// `X-Served-By` value.
    pub instance_name: String,
    /// Bound on one shard's part of a fan-out and of one readiness probe.
    pub shard_timeout: Duration,
    pub expected_control_migrations: BTreeSet<String>,
    pub expected_shard_migrations: Arc<BTreeSet<String>>,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// This process's view of each shard's search index (backlog, lag, leadership).
    pub index: Arc<IndexStates>,
    /// Job counts by state, as this process's worker last read them.
    pub jobs: Arc<JobCounts>,
    /// The per-tenant bulkhead and the busiest-tenant summary.
    pub fairness: Fairness,
}

impl Inner {
    /// Every circuit breaker this process keeps, with the name its metrics carry: each
    /// shard's servers' (the shard's name), then the control database's ("control", kept
    /// by the directory router when directory routing is on).
    pub fn breakers(&self) -> Vec<(&str, &Arc<Breaker>)> {
        let shards = self.shards.set().iter();
        let mut all: Vec<_> = shards
            .flat_map(|shard| shard.breakers().map(move |b| (shard.name(), b)))
            .collect();
        all.extend(self.directory.iter().map(|d| ("control", d.breaker())));
        all
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
