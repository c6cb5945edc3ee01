//! The bookmarks feature: model and validation, queries, the JSON API, the HTML UI and
//! cross-shard stats. It reaches shards only through the web extractors; it never
//! computes a slot.

pub mod api;
pub mod model;
pub mod schema;
pub mod stats;
pub mod store;
pub mod ui;
