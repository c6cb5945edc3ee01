//! Verification: per table, the moving tenants' row count and an order-independent
//! checksum of every column, compared between the two shards; and the same per row, for
//! the rows changed while a move copied (see `steps::verify`).
//!
//! The checksum sums a 64-bit hash of each row (`hash_record_extended`, which hashes every
//! column with its type's own hash function: no text conversion, so it is about three times
//! cheaper than hashing each row's text, and it runs inside the fence). Both shards run the
//! same Postgres major version, whose hash functions are stable. Ids move unchanged
//! (UUIDv7), so they are part of what is compared.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::transfer::{Keys, TableInfo};

/// One table's fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSum {
    pub table: String,
    pub rows: i64,
    pub checksum: String,
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

/// Fingerprints `tenants`' rows in each table on the connected shard, leaving out the rows
/// `except` names (rows with a change not yet copied,
/// compared one by one later). `tables` and `except` are the same on both shards, so the
/// two fingerprints cover the same rows.
pub async fn sums_except(
    shard: &Client,
    tables: &[TableInfo],
    tenants: &[String],
    except: &Keys,
) -> Result<Vec<TableSum>, tokio_postgres::Error> {
    let mut out = Vec::with_capacity(tables.len());
    for table in tables {
        let (skip_tenants, skip_keys) = columns(except.get(table.table.name));
        let mut query = format!(
            "SELECT count(*), coalesce(sum(hash_record_extended(ROW({cols}), 0)), 0)::text \
             FROM {name} WHERE {tenant} = ANY($1)",
            cols = table.column_list(),
            name = table.name(),
            tenant = table.tenant_column(),
        );
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&tenants];
        // Nothing to leave out: the plain scan, without an anti-join on an empty list.
        if !skip_keys.is_empty() {
            query.push_str(&format!(
                " AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) \
                 AS skip(_tenant, _key) WHERE skip._tenant = {name}.{tenant} \
                 AND skip._key = {name}.{key}::text)",
                name = table.name(),
                tenant = table.tenant_column(),
                key = table.key_column(),
            ));
            params.push(&skip_tenants);
            params.push(&skip_keys);
        }
        let row = shard.query_one(&query, &params).await?;
        out.push(TableSum {
            table: table.table.name.to_owned(),
            rows: row.get(0),
            checksum: row.get(1),
        });
    }
    Ok(out)
}

/// Each row `keys` names that the connected shard has: its 64-bit hash (the same as
/// [`sums_except`] adds up), by table, tenant and key. Rows it does not have are absent.
pub async fn row_hashes(
    shard: &Client,
    tables: &[TableInfo],
    keys: &Keys,
) -> Result<BTreeMap<String, BTreeMap<(String, String), i64>>, tokio_postgres::Error> {
    let mut out = BTreeMap::new();
    for table in tables {
        let Some(named) = keys.get(table.table.name).filter(|k| !k.is_empty()) else {
            continue;
        };
        let (tenants, row_keys) = columns(Some(named));
        let rows = shard
            .query(
                &format!(
                    "SELECT {name}.{tenant}::text, {name}.{key}::text, \
                     hash_record_extended(ROW({cols}), 0) \
                     FROM unnest($1::text[], $2::text[]) AS want(_tenant, _key) \
                     JOIN {name} ON {name}.{tenant} = want._tenant \
                     AND {name}.{key} = want._key::{key_type}",
                    cols = table
                        .columns
                        .iter()
                        .map(|c| format!("{}.{}", table.name(), super::conn::ident(c)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    name = table.name(),
                    tenant = table.tenant_column(),
                    key = table.key_column(),
                    key_type = table.key_type,
                ),
                &[&tenants, &row_keys],
            )
            .await?;
        let hashes: BTreeMap<(String, String), i64> = rows
            .iter()
            .map(|r| ((r.get(0), r.get(1)), r.get(2)))
            .collect();
        out.insert(table.table.name.to_owned(), hashes);
    }
    Ok(out)
}

/// What differs between two shards' [`row_hashes`] of the same keys, table by table.
pub fn row_differences(
    source: &BTreeMap<String, BTreeMap<(String, String), i64>>,
    dest: &BTreeMap<String, BTreeMap<(String, String), i64>>,
) -> Vec<String> {
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    let tables: BTreeSet<&String> = source.keys().chain(dest.keys()).collect();
    for table in tables {
        let s = source.get(table).unwrap_or(&empty);
        let d = dest.get(table).unwrap_or(&empty);
        let keys: BTreeSet<&(String, String)> = s.keys().chain(d.keys()).collect();
        let differing: Vec<String> = keys
            .into_iter()
            .filter(|k| s.get(*k) != d.get(*k))
            .map(|k| {
                let side = match (s.contains_key(k), d.contains_key(k)) {
                    (true, false) => "missing on the destination",
                    (false, true) => "only on the destination",
                    _ => "different on the destination",
                };
                format!("{} of {} ({side})", k.1, k.0)
            })
            .collect();
        if !differing.is_empty() {
            out.push(format!(
                "{table}: {} row(s) changed during the copy differ: {}",
                differing.len(),
                differing.join(", ")
            ));
        }
    }
    out
}

/// `sums` with rows taken out and others added: the fingerprint of a table after the
/// rows of `removed` (their hashes then) changed into the rows of `added` (now).
pub fn adjust(
    sums: &[TableSum],
    removed: &BTreeMap<String, BTreeMap<(String, String), i64>>,
    added: &BTreeMap<String, BTreeMap<(String, String), i64>>,
) -> Vec<TableSum> {
    sums.iter()
        .map(|s| {
            let total = |side: &BTreeMap<String, BTreeMap<(String, String), i64>>| {
                side.get(&s.table).map_or((0i64, 0i128), |rows| {
                    (
                        rows.len() as i64,
                        rows.values().map(|&h| i128::from(h)).sum(),
                    )
                })
            };
            let (out_rows, out_sum) = total(removed);
            let (in_rows, in_sum) = total(added);
            // Sums of 64-bit hashes: numeric in Postgres, i128 here (no overflow below
            // 2^64 rows).
            let base: i128 = s.checksum.parse().unwrap_or_default();
            TableSum {
                table: s.table.clone(),
                rows: s.rows - out_rows + in_rows,
                checksum: (base - out_sum + in_sum).to_string(),
            }
        })
        .collect()
}

/// A key set as two parallel arrays (tenants, keys), for `unnest`.
fn columns(keys: Option<&BTreeSet<(String, String)>>) -> (Vec<&str>, Vec<&str>) {
    keys.into_iter()
        .flatten()
        .map(|(t, k)| (t.as_str(), k.as_str()))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(rows: &[(&str, &str, i64)]) -> BTreeMap<String, BTreeMap<(String, String), i64>> {
        let mut out: BTreeMap<String, BTreeMap<(String, String), i64>> = BTreeMap::new();
        for (tenant, key, h) in rows {
            out.entry("bookmarks".to_owned())
                .or_default()
                .insert((tenant.to_string(), key.to_string()), *h);
        }
        out
    }

    #[test]
    fn a_fingerprint_adjusted_for_changed_rows_is_that_of_the_changed_table() {
        // The table had rows 1, 2 (hashes 10, -20) and 3 (7); row 2 changed to 5, row 3
        // went, row 4 (i64::MAX) came.
        let before = vec![TableSum {
            table: "bookmarks".to_owned(),
            rows: 3,
            checksum: (10 - 20 + 7).to_string(),
        }];
        let was = hashes(&[("t", "2", -20), ("t", "3", 7)]);
        let now = hashes(&[("t", "2", 5), ("t", "4", i64::MAX)]);
        let after = adjust(&before, &was, &now);
        assert_eq!(after[0].rows, 3);
        assert_eq!(
            after[0].checksum,
            (10i128 + 5 + i128::from(i64::MAX)).to_string()
        );
    }

    #[test]
    fn differing_changed_rows_are_named_with_the_side_that_differs() {
        let source = hashes(&[("t", "a", 1), ("t", "b", 2), ("t", "c", 3)]);
        let dest = hashes(&[("t", "a", 1), ("t", "b", 9), ("t", "d", 4)]);
        let found = row_differences(&source, &dest);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("bookmarks: 3 row(s)"), "{found:?}");
        assert!(found[0].contains("b of t (different on the destination)"));
        assert!(found[0].contains("c of t (missing on the destination)"));
        assert!(found[0].contains("d of t (only on the destination)"));
        assert!(row_differences(&source, &source).is_empty());
    }
}
