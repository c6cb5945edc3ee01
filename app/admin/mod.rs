//! The operator's admin page (`/admin`) and its JSON twins (`/admin/api/*`): every shard at
//! a glance, the slot map, a browse across shards, tenant lookup and placement.
//!
//! Mounted only when `ADMIN_TOKEN` is set, behind [`auth::require`]. Reads go through
//! [`CrossShard`](crate::sharding::cross_shard::CrossShard) (read-only, bounded, and honest about
//! which shards answered); the only write is placement, through the same `Placer` rules as
//! `bookmarks pin`. It draws on what the other features keep in this process (search lag, job
//! counts, the busiest tenants), all handed to it in an [`AdminState`].

mod api;
pub mod auth;
mod browse;
mod control;
mod key_forms;
mod keys;
mod lookup;
mod moves;
mod overview;
mod page;
mod state;

pub use auth::AdminToken;
pub use control::{ControlDb, ControlError};
pub use state::{AdminState, CODES, Sources, TAG};

use axum::routing::{get, post};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The admin page (its forms are pages, not API) and the JSON API, each API route mounted
/// with its description; not yet behind the token (see [`router`]).
pub fn routes() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .route("/admin", get(page::show))
        .route("/admin/pin", post(page::pin))
        .route("/admin/unpin", post(page::unpin))
        .route("/admin/keys/create", post(key_forms::form_create))
        .route("/admin/keys/revoke", post(key_forms::form_revoke))
        .routes(routes!(api::api_shards))
        .routes(routes!(api::api_slots))
        .routes(routes!(api::api_bookmarks))
        .routes(routes!(api::api_tenant))
        .routes(routes!(keys::api_list, keys::api_create))
        .routes(routes!(keys::api_revoke))
        .routes(routes!(api::api_pins))
        .routes(routes!(api::api_moves))
        .routes(routes!(api::api_busiest))
}

/// The admin page and its JSON API, behind the token, with their own state.
pub fn router<S>(state: AdminState) -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    let door = auth::Door {
        token: state.token.clone(),
        failed_credentials: state.failed_credentials.clone(),
    };
    routes()
        .route_layer(axum::middleware::from_fn_with_state(door, auth::require))
        .with_state(state)
}
