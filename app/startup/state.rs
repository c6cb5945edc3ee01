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

use axum::extract::FromRef;
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{InfoBuilder, License, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::admin::{self, AdminState};
use crate::bookmarks;
use crate::bookmarks::stats::StatsCache;
use crate::changes;
use crate::collections;
use crate::fairness::{Admission, Fairness};
use crate::imports;
use crate::members;
use crate::pg::control::ControlLookups;
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
use crate::tenancy::auth::Authenticator;
use crate::web::around::AroundLayer;
use crate::web::authenticate::Authenticate;
use crate::web::drain::Draining;
use crate::web::edge_headers;
use crate::web::failed_credentials::FailedCredentials;
use crate::web::health::{self, Readiness};
use crate::web::metrics::{self, Metrics};
use crate::web::openapi::{self, Access, ApiDocument};
use crate::web::{self, HttpService, InstanceName};

/// The application's state; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Parts>);

/// Every part a handler may ask for, by type (see the `FromRef` impls below).
pub(super) struct Parts {
    pub(super) shards: Shards,
    pub(super) cross: CrossShard,
    pub(super) authenticator: Arc<Authenticator>,
    /// The failed credential limit, shared by every door that checks credentials.
    pub(super) failed_credentials: Arc<FailedCredentials>,
    pub(super) fairness: Fairness,
    pub(super) readiness: Readiness,
    pub(super) metrics: Metrics,
    pub(super) instance: InstanceName,
    pub(super) stats: StatsCache,
    pub(super) document: ApiDocument,
    /// The admin page's state, when it is mounted (`ADMIN_TOKEN`); its routes carry it.
    pub(super) admin: Option<AdminState>,
    /// The control database, for features that read or change what lives there.
    pub(super) control: ControlLookups,
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
    pub fn tenant_routes(&self, routes: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
        let me = self.parts();
        routes
            .route_layer(AroundLayer(Admission::new(me.fairness.clone())))
            .route_layer(AroundLayer(Authenticate::new(
                me.authenticator.clone(),
                me.failed_credentials.clone(),
            )))
    }

    /// Every route of the app, behind the layers every request passes, and the page that
    /// browses the API document.
    pub fn router(
        &self,
        request_timeout: Duration,
        max_in_flight: usize,
        draining: &Draining,
        tls_only: bool,
    ) -> HttpService {
        let me = self.parts();
        let routes = every_route(
            |tenant| self.tenant_routes(tenant),
            |pages_and_api| match &me.admin {
                Some(admin) => admin::router(admin.clone()),
                // Not mounted without `ADMIN_TOKEN`; the document still describes it.
                None => OpenApiRouter::with_openapi(pages_and_api.into_openapi()),
            },
        );
        let (routes, _document) = routes.split_for_parts();
        web::serve(
            routes
                .with_state(self.clone())
                .merge(edge_headers::docs(openapi::docs_page()))
                .merge(web::assets::routes()),
            &me.instance,
            request_timeout,
            max_in_flight,
            draining,
            tls_only,
        )
    }
}

/// Every route of the app: the one list that both the server ([`AppState::router`]) and the
/// API document ([`api_document`]) are built from, so neither can have a route the other
/// lacks. `tenant` puts the tenant's own routes behind their layers; `mount_admin` mounts the
/// admin's, which carry a state of their own.
fn every_route(
    tenant: impl FnOnce(OpenApiRouter<AppState>) -> OpenApiRouter<AppState>,
    mount_admin: impl FnOnce(OpenApiRouter<AdminState>) -> OpenApiRouter<AppState>,
) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(tenant(
            bookmarks::router()
                .merge(collections::routes())
                .merge(changes::routes())
                .merge(imports::routes())
                .merge(members::routes()),
        ))
        .merge(bookmarks::stats::routes())
        .merge(health::routes())
        .merge(metrics::routes())
        .merge(openapi::routes())
        .merge(mount_admin(admin::routes()))
}

/// The API's OpenAPI document, as `/api/openapi.json` serves it and `bookmarks openapi`
/// writes it to `docs/openapi.json`. Needs no database.
pub fn api_document() -> OpenApi {
    let routes = every_route(
        |tenant| tenant,
        |admin| OpenApiRouter::with_openapi(admin.into_openapi()),
    );
    let mut document = routes.into_openapi();
    // Ours, not the defaults `OpenApiRouter::new` takes from the crate that builds it.
    document.info = InfoBuilder::new()
        .title("bookmarks-sharded")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(API_DESCRIPTION))
        .license(Some(License::new(env!("CARGO_PKG_LICENSE"))))
        .build();
    document.tags = Some(
        [
            (
                bookmarks::api::TAG,
                "A tenant's own bookmarks, on its shard.",
            ),
            (
                collections::TAG,
                "A tenant's collections (nested folders of bookmarks), on its shard.",
            ),
            (
                changes::api::TAG,
                "A tenant's change feed: every create, update and delete of its bookmarks and \
                 collections since a cursor, in an order that skips none.",
            ),
            (
                imports::TAG,
                "Bookmark files imported into a tenant: read and checked when posted, then \
                 applied by a background job in chunks.",
            ),
            (
                members::TAG,
                "A tenant's members and their API keys, on the control database; changes need \
                 the `admin` role.",
            ),
            (
                admin::TAG,
                "The operator's view across shards (`ADMIN_TOKEN`).",
            ),
            (
                openapi::OPERATIONS_TAG,
                "Health, readiness, metrics and counts; no credentials.",
            ),
            (openapi::META_TAG, "This document."),
        ]
        .into_iter()
        .map(|(name, description)| {
            TagBuilder::new()
                .name(name)
                .description(Some(description))
                .build()
        })
        .collect(),
    );
    let access = |tag: &str| match tag {
        bookmarks::api::TAG
        | collections::TAG
        | changes::api::TAG
        | imports::TAG
        | members::TAG => Access::Tenant,
        admin::TAG => Access::Admin,
        _ => Access::Open,
    };
    let codes: Vec<&str> = [
        web::error::CODES,
        bookmarks::CODES,
        collections::CODES,
        changes::CODES,
        imports::CODES,
        members::CODES,
        admin::CODES,
        crate::fairness::CODES,
    ]
    .concat();
    openapi::complete(&mut document, &access, &codes);
    document
}

const API_DESCRIPTION: &str = "A multi-tenant bookmarks service whose tenants' data is \
    routed across several Postgres shards. A tenant's operations (the `bookmarks`, \
    `collections`, `changes` and `members` tags) take the API key of one of the tenant's members as a \
    Bearer token and act with that member's role: a viewer only reads, an editor also \
    writes bookmarks and collections, an admin also manages members and keys. The admin API (`admin` tag) is mounted only when the \
    server has an `ADMIN_TOKEN`, and takes it as a Bearer token or as the password of HTTP \
    Basic. Every error answer is `{\"error\": {\"code\", \"message\"}}`, and every 429 and \
    503 says when to retry (`Retry-After`). The HTML UI (`/`, `/signin`, `/bookmarks/…`) and \
    the admin page (`/admin`, its forms) are pages, not API, and are not described here. The \
    compose stack's nginx does not publish `/metrics` and `/actuator/*` (they are scraped on \
    the internal network).";

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
    control: ControlLookups,
    cross: CrossShard,
    authenticator: Arc<Authenticator>,
    failed_credentials: Arc<FailedCredentials>,
    fairness: Fairness,
    readiness: Readiness,
    metrics: Metrics,
    instance: InstanceName,
    stats: StatsCache,
    document: ApiDocument,
}
