//! Where a tenant's rows are. Tools that place or move tenants (pin, move_slot, the admin
//! page) count a tenant's rows on each shard without knowing what the rows are: the
//! application describes its tenant-scoped tables, and this module only runs SQL over them.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

/// A tenant-scoped table on every shard: its name, the column holding the tenant key, a
/// column that identifies a row within its tenant (moved unchanged, never reused), and the
/// tables its rows point at.
///
/// An application lists its tables parents first: tools copy in that order and delete in
/// the reverse one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantTable {
    pub name: &'static str,
    pub tenant_column: &'static str,
    pub key_column: &'static str,
    pub parents: &'static [Parent],
}

/// A foreign key of a tenant table: `(tenant column, column)` references
/// `(tenant column, key column)` of `table`, so a row can only point at its own tenant's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    pub column: &'static str,
    pub table: &'static str,
}

/// Why a list of tenant tables cannot be copied parents first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    #[error("{table} is listed before its parent {parent}")]
    ChildFirst {
        table: &'static str,
        parent: &'static str,
    },
    #[error("{table}.{column} points at {parent}, which is not a listed tenant table")]
    UnknownParent {
        table: &'static str,
        column: &'static str,
        parent: &'static str,
    },
}

/// Checks that `tables` lists every table after the tables it points at (itself aside) and
/// names only tables it lists: the order copies and deletes rely on.
pub fn parents_first(tables: &[TenantTable]) -> Result<(), OrderError> {
    for (i, table) in tables.iter().enumerate() {
        for parent in table.parents {
            match tables.iter().position(|t| t.name == parent.table) {
                Some(at) if at <= i => {}
                Some(_) => {
                    return Err(OrderError::ChildFirst {
                        table: table.name,
                        parent: parent.table,
                    });
                }
                None => {
                    return Err(OrderError::UnknownParent {
                        table: table.name,
                        column: parent.column,
                        parent: parent.table,
                    });
                }
            }
        }
    }
    Ok(())
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// How many rows `tenant` has in each of `tables` on the connected shard, in order.
pub async fn count_per_table(
    conn: &mut AsyncPgConnection,
    tables: &[TenantTable],
    tenant: &str,
) -> diesel::QueryResult<Vec<i64>> {
    let mut counts = Vec::with_capacity(tables.len());
    for table in tables {
        // Identifiers come from the application's own constants, never from input.
        let sql = format!(
            "SELECT count(*) AS n FROM \"{}\" WHERE \"{}\" = $1",
            table.name, table.tenant_column
        );
        let c: Count = diesel::sql_query(sql)
            .bind::<Text, _>(tenant)
            .get_result(conn)
            .await?;
        counts.push(c.n);
    }
    Ok(counts)
}

/// How many rows `tenant` has across all of `tables` on the connected shard.
pub async fn count(
    conn: &mut AsyncPgConnection,
    tables: &[TenantTable],
    tenant: &str,
) -> diesel::QueryResult<i64> {
    Ok(count_per_table(conn, tables, tenant).await?.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn table(name: &'static str, parents: &'static [Parent]) -> TenantTable {
        TenantTable {
            name,
            tenant_column: "tenant_id",
            key_column: "id",
            parents,
        }
    }

    const FOLDERS: TenantTable = table(
        "folders",
        &[Parent {
            column: "parent_id",
            table: "folders",
        }],
    );
    const ITEMS: TenantTable = table(
        "items",
        &[Parent {
            column: "folder_id",
            table: "folders",
        }],
    );

    #[test]
    fn a_table_listed_after_its_parents_and_pointing_at_itself_is_in_order() {
        assert_eq!(parents_first(&[FOLDERS, ITEMS]), Ok(()));
    }

    #[test]
    fn a_child_listed_before_its_parent_is_refused() {
        assert_eq!(
            parents_first(&[ITEMS, FOLDERS]),
            Err(OrderError::ChildFirst {
                table: "items",
                parent: "folders"
            })
        );
        assert!(matches!(
            parents_first(&[ITEMS]),
            Err(OrderError::UnknownParent { .. })
        ));
    }
}
