//! The collections feature: a tenant's folders of bookmarks, nested up to 8 deep, on the
//! tenant's shard beside its bookmarks. A bookmark is in at most one collection
//! (`bookmarks.collection_id`); the composite foreign keys keep every reference inside
//! its tenant, so no handler can file a bookmark in another tenant's collection.

pub mod api;
mod error;
pub mod model;
pub mod schema;
pub mod store;

pub use api::{CODES, TAG, routes};

use crate::sharding::tenant_rows::{Parent, TenantTable};

/// The collections table as moves, checks and counts see it: each row may point at its
/// parent collection.
pub const TABLE: TenantTable = TenantTable {
    name: "collections",
    tenant_column: "tenant_id",
    key_column: "id",
    parents: &[Parent {
        column: "parent_id",
        table: "collections",
    }],
};
