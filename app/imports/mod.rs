//! Imports: a bookmark file (Netscape HTML or this service's JSON export) read and checked
//! when it is posted ([`netscape`], [`json_file`], [`entry`]), kept on the control database
//! in chunks ([`store`]), and applied to the tenant's shard by a job ([`job`]), one chunk per
//! transaction, each chunk safe to apply twice ([`apply`]). See `docs/imports.md`.

pub mod api;
pub mod apply;
pub mod entry;
pub mod job;
pub mod json_file;
pub mod netscape;
pub mod store;
pub mod ui;

pub use api::{CODES, TAG};

use axum::extract::FromRef;
use utoipa_axum::router::OpenApiRouter;

use crate::pg::control::ControlLookups;

/// The API's routes and the HTML UI's pages.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    ControlLookups: FromRef<S>,
{
    api::routes().merge(ui::routes().into())
}
pub use store::IMPORT_JOB;
