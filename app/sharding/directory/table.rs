//! The directory table on the control database: one row per placed tenant, naming its
//! shard. A trigger (see the control migration) sends a notification on every change, so
//! a write from any client, psql included, reaches every process's cache.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::sharding::arrivals::Arrival;

/// The channel the table's trigger notifies on; the payload is the changed tenant key,
/// or empty when the whole table was truncated.
pub const CHANNEL: &str = "autumn_shard_directory";

diesel::table! {
    #[sql_name = "_autumn_shard_directory"]
    directory (tenant_key) {
        tenant_key -> Text,
        shard_name -> Text,
        updated_at -> Timestamptz,
        note -> Nullable<Text>,
    }
}

/// One row: a tenant placed on a shard by name.
#[derive(Debug, Clone, Queryable, Selectable, serde::Serialize)]
#[diesel(table_name = directory)]
pub struct DirectoryRow {
    pub tenant_key: String,
    pub shard_name: String,
    pub updated_at: DateTime<Utc>,
    pub note: Option<String>,
}

/// The shard named by `key`'s row, if it has one.
pub async fn shard_of(conn: &mut AsyncPgConnection, key: &str) -> QueryResult<Option<String>> {
    directory::table
        .find(key)
        .select(directory::shard_name)
        .first(conn)
        .await
        .optional()
}

#[derive(QueryableByName)]
struct Placement {
    #[diesel(sql_type = diesel::sql_types::Text)]
    shard_name: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    lsn: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    epoch: Option<i64>,
}

/// The shard named by `key`'s row, if it has one, with that shard's latest arrival (read
/// in the same snapshot: a move records the arrival before it writes the row).
pub async fn placement_of(
    conn: &mut AsyncPgConnection,
    key: &str,
) -> QueryResult<Option<(String, Option<Arrival>)>> {
    let row: Option<Placement> = diesel::sql_query(
        "SELECT d.shard_name, (a.arrival_lsn - '0/0'::pg_lsn)::bigint AS lsn, a.epoch \
         FROM _autumn_shard_directory d \
         LEFT JOIN _autumn_shard_arrivals a ON a.shard_name = d.shard_name \
         WHERE d.tenant_key = $1",
    )
    .bind::<diesel::sql_types::Text, _>(key)
    .get_result(conn)
    .await
    .optional()?;
    Ok(row.map(|p| {
        let arrival = match (p.lsn, p.epoch) {
            (Some(lsn), Some(epoch)) => Some(Arrival {
                shard_name: p.shard_name.clone(),
                lsn,
                epoch,
            }),
            _ => None,
        };
        (p.shard_name, arrival)
    }))
}

pub async fn get(conn: &mut AsyncPgConnection, key: &str) -> QueryResult<Option<DirectoryRow>> {
    directory::table
        .find(key)
        .select(DirectoryRow::as_select())
        .first(conn)
        .await
        .optional()
}

/// Every row, by tenant key.
pub async fn list(conn: &mut AsyncPgConnection) -> QueryResult<Vec<DirectoryRow>> {
    directory::table
        .select(DirectoryRow::as_select())
        .order(directory::tenant_key)
        .load(conn)
        .await
}

/// Places `key` on `shard` (inserting or replacing its row).
pub async fn upsert(
    conn: &mut AsyncPgConnection,
    key: &str,
    shard: &str,
    note: Option<&str>,
) -> QueryResult<()> {
    diesel::insert_into(directory::table)
        .values((
            directory::tenant_key.eq(key),
            directory::shard_name.eq(shard),
            directory::note.eq(note),
        ))
        .on_conflict(directory::tenant_key)
        .do_update()
        .set((
            directory::shard_name.eq(shard),
            directory::note.eq(note),
            directory::updated_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await
        .map(drop)
}

/// Removes `key`'s row; false when it had none.
pub async fn remove(conn: &mut AsyncPgConnection, key: &str) -> QueryResult<bool> {
    diesel::delete(directory::table.find(key))
        .execute(conn)
        .await
        .map(|n| n > 0)
}
