//! The change feed: `GET /api/changes` hands a client every create, update and delete of
//! the tenant's bookmarks and collections since its cursor, in an order that never skips a
//! change (see `docs/changes.md`), and the purge that ends old tombstones' retention.
//!
//! The shard keeps the feed itself, in triggers (migration `create_change_feed`): every
//! writer, this service's or not, is in it, and a move carries it with the tenant.

pub mod api;
pub mod purge;
pub mod schema;
pub mod store;

use crate::sharding::tenant_rows::TenantTable;

pub use api::{CODES, routes};

/// One row per bookmark or collection the tenant has had: its last change and whether it
/// is gone.
pub const CHANGES_TABLE: TenantTable = TenantTable {
    name: "feed_changes",
    tenant_column: "tenant_id",
    key_column: "item_id",
    parents: &[],
};

/// The tenant's purge horizon: one row, keyed by the tenant itself.
pub const HORIZONS_TABLE: TenantTable = TenantTable {
    name: "feed_horizons",
    tenant_column: "tenant_id",
    key_column: "tenant_id",
    parents: &[],
};
