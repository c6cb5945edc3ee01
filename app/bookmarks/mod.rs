//! The bookmarks feature: model and validation, queries, the JSON API (with batches of
//! writes and the export), the HTML UI and cross-shard stats. It reaches shards only
//! through the web extractors; it never computes a slot.

pub mod api;
pub mod batch;
pub mod error;
pub mod export;
pub mod model;
pub mod schema;
pub mod stats;
pub mod store;
pub mod ui;

use std::sync::Arc;

use axum::extract::FromRef;
use utoipa_axum::router::OpenApiRouter;

use crate::sharding::access::Shards;
use crate::sharding::tenant_rows::{Parent, TenantTable};
use crate::tenancy::auth::Authenticator;
use crate::web::failed_credentials::FailedCredentials;

/// The tenant's own routes: the JSON API (described in the API document) and the HTML UI
/// with its sign-in (pages, not API). They expect the app to put them behind tenant
/// authentication (`AppState::tenant_routes`); without it no request has a tenant.
/// (`stats::routes` is the feature's one route without a tenant.)
pub fn router<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
    Arc<Authenticator>: FromRef<S>,
    Arc<FailedCredentials>: FromRef<S>,
{
    api::routes()
        .merge(batch::routes())
        .merge(export::routes())
        .merge(ui::routes().into())
}

/// The `code`s the feature's answers carry, besides the framework's.
pub use api::CODES;

/// The bookmarks table as moves, checks and counts see it: a bookmark may be filed in a
/// collection.
pub const TABLE: TenantTable = TenantTable {
    name: "bookmarks",
    tenant_column: "tenant_id",
    key_column: "id",
    parents: &[Parent {
        column: "collection_id",
        table: "collections",
    }],
};
