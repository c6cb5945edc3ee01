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
use crate::bookmarks::stats::StatsCache;
use crate::fairness::{Admission, Fairness};
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::auth::Authenticator;
use crate::web::around::AroundLayer;
use crate::web::authenticate::Authenticate;
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
    pub(super) authenticator: Arc<Authenticator>,
    pub(super) fairness: Fairness,
    pub(super) readiness: Readiness,
    pub(super) metrics: Metrics,
    pub(super) instance: InstanceName,
    pub(super) stats: StatsCache,
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

    /// `routes` as a tenant's own: each request proves its tenant first (the
    /// authentication layer), then passes that tenant's bulkhead. Admin, stats, health and
    /// metrics routes do neither.
    pub fn tenant_routes(&self, routes: Router<AppState>) -> Router<AppState> {
        let me = self.parts();
        routes
            .route_layer(AroundLayer(Admission::new(me.fairness.clone())))
            .route_layer(AroundLayer(Authenticate::new(me.authenticator.clone())))
    }

    /// Every route of the app, behind the layers every request passes.
    pub fn router(&self, request_timeout: Duration, max_in_flight: usize) -> HttpService {
        let me = self.parts();
        let mut routes = Router::new()
            .merge(self.tenant_routes(bookmarks::router()))
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
            max_in_flight,
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
    authenticator: Arc<Authenticator>,
    fairness: Fairness,
    readiness: Readiness,
    metrics: Metrics,
    instance: InstanceName,
    stats: StatsCache,
}
