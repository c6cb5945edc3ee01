//! What a tenant owns on its shard, declared once: every tenant table, parents first.
//! Moves copy in this order and delete in the reverse one, and verify each table; the
//! admin's row counts, `bookmarks pin`'s checks and the drained-shard checks count them.
//! Adding a table is one entry here plus its migration, which gives it the move guard's
//! trigger and foreign keys that lead with `tenant_id` (`tests/contracts/tenant_tables.rs`
//! holds the two to each other).

use crate::sharding::tenant_rows::TenantTable;
use crate::{bookmarks, changes, collections};

pub const TENANT_TABLES: &[TenantTable] = &[
    collections::TABLE,
    bookmarks::TABLE,
    changes::CHANGES_TABLE,
    changes::HORIZONS_TABLE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::tenant_rows::parents_first;

    #[test]
    fn every_tenant_table_comes_after_the_tables_it_points_at() {
        assert_eq!(parents_first(TENANT_TABLES), Ok(()));
    }
}
