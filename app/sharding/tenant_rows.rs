//! Where a tenant's rows are. Tools that place or move tenants (pin, move_slot, the admin
//! page) count a tenant's rows on each shard without knowing what the rows are: the
//! application describes its tenant-scoped tables, and this module only runs SQL over them.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

/// A tenant-scoped table on every shard: its name, the column holding the tenant key, and
/// a column that identifies a row within its tenant (moved unchanged, never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantTable {
    pub name: &'static str,
    pub tenant_column: &'static str,
    pub key_column: &'static str,
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
