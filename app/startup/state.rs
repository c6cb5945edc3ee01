//! The application's state and routes, assembled: the one place that knows every feature.
//!
//! Handlers never see this struct. Each asks for the part it uses (`State<Fairness>`,
//! `Shards`, `CrossShard`, …) and axum hands it over through the `FromRef` impls below; each
//! feature builds its own routes against those parts, and [`AppState::router`] merges them.
//!
//! The parts sit behind one `Arc`: axum clones the state for every request, and a clone of
//! a struct of parts would be a dozen reference counts instead of one.

use std::sync::Arc;
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

/// The application's state; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Parts>);

/// Every part a handler may ask for, by type (see the `FromRef` impls below).
pub(super) struct Parts {
    pub(super) shards: Shards,
    pub(super) cross: CrossShard,
    pub(super) tenant_header: TenantHeader,
    pub(super) fairness: Fairness,
    pub(super) readiness: Readiness,
    pub(super) metrics: Metrics,
    pub(super) instance: InstanceName,
    /// The admin page's state, when it is mounted (`ADMIN_TOKEN`); its routes carry it.
    pub(super) admin: Option<AdminState>,
}

impl AppState {
    pub(super) fn new(parts: Parts) -> Self {
        Self(Arc::new(parts))
    }

    pub(super) fn parts(&self) -> &Parts {
        &self.0
    }

    /// Every route of the app, behind the layers every request passes.
    pub fn router(&self, request_timeout: Duration) -> HttpService {
        let me = self.parts();
        // The tenant's own routes pass its bulkhead; admin, stats, health and metrics do not.
        let admission = Admission::new(me.fairness.clone(), me.tenant_header.clone());
        let tenant_routes = bookmarks::router().route_layer(AroundLayer(admission));
        let mut routes = Router::new()
            .merge(tenant_routes)
            .merge(bookmarks::stats::routes())
            .merge(health::routes())
            .merge(metrics::routes());
        if let Some(admin) = &me.admin {
            routes = routes.merge(admin::router(admin.clone()));
        }
        web::serve(
            routes.with_state(self.clone()),
            &me.instance,
            request_timeout,
        )
    }
}

/// `FromRef` for each part: `State<Part>` and the extractors built on it.
macro_rules! parts_by_type {
    ($($field:ident: $part:ty),* $(,)?) => {
        $(impl FromRef<AppState> for $part {
            fn from_ref(state: &AppState) -> $part {
                state.0.$field.clone()
            }
        })*
    };
}

parts_by_type! {
    shards: Shards,
    cross: CrossShard,
    tenant_header: TenantHeader,
    fairness: Fairness,
    readiness: Readiness,
    metrics: Metrics,
    instance: InstanceName,
}
