//! What every admin handler is handed: the shards, the control database and the figures the
//! other features keep in this process, plus the parsing every admin input shares.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::FromRef;

use super::auth::AdminToken;
use super::control::ControlDb;
use crate::fairness::Fairness;
use crate::fairness::advice::Advice;
use crate::fairness::busiest::BusiestReport;
use crate::jobs::worker::JobCounts;
use crate::search::reindexer::IndexStates;
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::TenantId;
use crate::web::InstanceName;
use crate::web::error::ApiError;
use crate::web::failed_credentials::FailedCredentials;

/// What the admin page reads: every shard and the control database, and the figures the
/// other features keep in this process. Cheap to clone.
#[derive(Clone)]
pub struct AdminState(Arc<Sources>);

/// The parts of an [`AdminState`], as the app's assembly hands them over.
pub struct Sources {
    pub token: AdminToken,
    /// Wrong admin credentials count against the client's address.
    pub failed_credentials: Arc<FailedCredentials>,
    pub shards: Shards,
    pub cross: CrossShard,
    pub control: ControlDb,
    /// Bound on one shard's probe.
    pub shard_timeout: std::time::Duration,
    pub expected_shard_migrations: Arc<BTreeSet<String>>,
    pub index: Arc<IndexStates>,
    pub jobs: Arc<JobCounts>,
    pub fairness: Fairness,
    pub instance: InstanceName,
}

impl AdminState {
    pub fn new(sources: Sources) -> Self {
        Self(Arc::new(sources))
    }
}

impl std::ops::Deref for AdminState {
    type Target = Sources;
    fn deref(&self) -> &Sources {
        &self.0
    }
}

impl FromRef<AdminState> for CrossShard {
    fn from_ref(state: &AdminState) -> CrossShard {
        state.cross.clone()
    }
}

/// The tag of the admin JSON API in the API document.
pub const TAG: &str = "admin";

/// The `code`s the admin's own answers carry, besides the framework's.
pub const CODES: &[&str] = &["invalid_cursor", "invalid_limit", "unauthorized"];

impl AdminState {
    /// This replica's busiest tenants and the placement advice drawn from them.
    pub fn busiest(&self) -> (BusiestReport, Vec<Advice>) {
        let set = self.shards.set();
        let names: Vec<&str> = set.iter().map(|s| s.name()).collect();
        self.fairness.report(&names)
    }
}

/// A tenant id in the admin API, exactly as the API document's pattern takes it; the error
/// names the field.
pub fn tenant_param(raw: &str) -> Result<TenantId, ApiError> {
    TenantId::parse(raw).map_err(|e| ApiError::BadRequest {
        code: "invalid_tenant",
        message: format!("tenant: {e}"),
    })
}

/// A tenant id typed by an operator into the admin page, whose stray spaces are forgiven.
pub fn typed_tenant(raw: &str) -> Result<TenantId, ApiError> {
    tenant_param(raw.trim())
}
