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

pub use api::{CODES, TAG, routes};
pub use store::IMPORT_JOB;
