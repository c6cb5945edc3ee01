//! The application's state and routes, assembled: the one place that knows every feature.
//!
//! Handlers never see this struct. Each asks for the part it uses (`State<Fairness>`,
//! `Shards`, `CrossShard`, …) and axum hands it over through the `FromRef` impls below; each
//! feature builds its own routes against those parts, and [`AppState::router`] merges them.

use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;

use crate::admin::{self, AdminState};
use crate::bookmarks;
use crate::fairness::{Admission, Fairness};
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::TenantHeader;
use crate::web::around::AroundLayer;
use crate::web::health::{self, Readiness};
use crate::web::metrics::{self, Metrics};
use crate::web::{self, HttpService, InstanceName};

/// Every part a handler may ask for, by type (`#[derive(FromRef)]` writes a `FromRef` impl
/// per field).
#[derive(Clone, FromRef)]
pub struct AppState {
    pub(super) shards: Shards,
    pub(super) cross: CrossShard,
    pub(super) tenant_header: TenantHeader,
    pub(super) fairness: Fairness,
    pub(super) readiness: Readiness,
    pub(super) metrics: Metrics,
    pub(super) instance: InstanceName,
    /// The admin page's state, when it is mounted (`ADMIN_TOKEN`); its routes carry it.
    #[from_ref(skip)]
    pub(super) admin: Option<AdminState>,
}

impl AppState {
    /// Every route of the app, behind the layers every request passes.
    pub fn router(&self, request_timeout: Duration) -> HttpService {
        // The tenant's own routes pass its bulkhead; admin, stats, health and metrics do not.
        let admission = Admission::new(self.fairness.clone(), self.tenant_header.clone());
        let tenant_routes = bookmarks::router().route_layer(AroundLayer(admission));
        let mut routes = Router::new()
            .merge(tenant_routes)
            .merge(bookmarks::stats::routes())
            .merge(health::routes())
            .merge(metrics::routes());
        if let Some(admin) = &self.admin {
            routes = routes.merge(admin::router(admin.clone()));
        }
        web::serve(
            routes.with_state(self.clone()),
            &self.instance,
            request_timeout,
        )
    }
}
