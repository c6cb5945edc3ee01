//! The bookmarks feature: model and validation, queries, the JSON API, the HTML UI and
//! cross-shard stats. It reaches shards only through the web extractors; it never
//! computes a slot.

pub mod api;
pub mod model;
pub mod schema;
pub mod stats;
pub mod store;
pub mod ui;

use crate::sharding::tenant_rows::TenantTable;

/// Every shard table holding tenant rows, for tools that count, copy or verify a tenant's
/// data without knowing what it is (placement checks, moves).
pub const TENANT_TABLES: &[TenantTable] = &[TenantTable {
    name: "bookmarks",
    tenant_column: "tenant_id",
    key_column: "id",
}];
