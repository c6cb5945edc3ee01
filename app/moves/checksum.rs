//! Verification: per table, the moving tenants' row count and an order-independent
//! checksum of every column, compared between the two shards.
//!
//! The checksum sums a 64-bit hash of each row (`hash_record_extended`, which hashes every
//! column with its type's own hash function: no text conversion, so it is about three times
//! cheaper than hashing each row's text, and it runs inside the fence). Both shards run the
//! same Postgres major version, whose hash functions are stable. Ids move unchanged
//! (UUIDv7), so they are part of what is compared.

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::transfer::TableInfo;

/// One table's fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSum {
    pub table: String,
    pub rows: i64,
    pub checksum: String,
}

/// Fingerprints `tenants`' rows in each table on the connected shard.
pub async fn sums(
    shard: &Client,
    tables: &[TableInfo],
    tenants: &[String],
) -> Result<Vec<TableSum>, tokio_postgres::Error> {
    let mut out = Vec::with_capacity(tables.len());
    for table in tables {
        let row = shard
            .query_one(
                &format!(
                    "SELECT count(*), coalesce(sum(hash_record_extended(ROW({}), 0)), 0)::text \
                     FROM {} WHERE {} = ANY($1)",
                    table.column_list(),
                    table.name(),
                    table.tenant_column()
                ),
                &[&tenants],
            )
            .await?;
        out.push(TableSum {
            table: table.table.name.to_owned(),
            rows: row.get(0),
            checksum: row.get(1),
        });
    }
    Ok(out)
}

/// What differs between the source's and the destination's fingerprints, table by table.
pub fn differences(source: &[TableSum], dest: &[TableSum]) -> Vec<String> {
    source
        .iter()
        .zip(dest)
        .filter(|(s, d)| s != d)
        .map(|(s, d)| {
            format!(
                "{}: source has {} rows (checksum {}), destination {} rows (checksum {})",
                s.table, s.rows, s.checksum, d.rows, d.checksum
            )
        })
        .collect()
}
