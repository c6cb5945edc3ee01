//! Copying tenants' rows between shards: the bulk copy (one `COPY` stream per table, from
//! one source snapshot, into one destination transaction) and the catch-up copy of the
//! rows written meanwhile (the keys the source's guard logged).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;

use futures::{SinkExt, StreamExt};
use tokio_postgres::Client;
use tokio_postgres::IsolationLevel;

use super::conn::{ident, literal};
use super::pause::{PausePoint, pause_at};
use super::progress::MoveProgress;
use super::tenant_guard;
use crate::sharding::tenant_rows::TenantTable;

/// A tenant table as the mover needs it: its columns (in the source's order) and the SQL
/// type of its key column.
#[derive(Clone, Debug)]
pub struct TableInfo {
    pub table: TenantTable,
    pub columns: Vec<String>,
    pub key_type: String,
}

impl TableInfo {
    pub fn name(&self) -> String {
        ident(self.table.name)
    }

    pub fn tenant_column(&self) -> String {
        ident(self.table.tenant_column)
    }

    pub fn key_column(&self) -> String {
        ident(self.table.key_column)
    }

    /// The columns through which this table's rows point at other rows of the same table.
    pub fn self_references(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.table
            .parents
            .iter()
            .filter(|p| p.table == self.table.name)
            .map(|p| p.column)
    }

    /// `"a", "b", …`
    pub fn column_list(&self) -> String {
        self.columns
            .iter()
            .map(|c| ident(c))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Rows named by key: table name → (tenant, key as text).
pub type Keys = BTreeMap<String, BTreeSet<(String, String)>>;

/// Adds one logged change's row to `keys`.
pub fn note(keys: &mut Keys, table: &str, tenant: &str, key: &str) {
    keys.entry(table.to_owned())
        .or_default()
        .insert((tenant.to_owned(), key.to_owned()));
}

/// The number of rows `keys` names.
pub fn key_count(keys: &Keys) -> usize {
    keys.values().map(BTreeSet::len).sum()
}

/// Reads each table's columns and key type from the shard's catalog.
pub async fn describe(
    shard: &Client,
    tables: &[TenantTable],
) -> Result<Vec<TableInfo>, tokio_postgres::Error> {
    let mut out = Vec::with_capacity(tables.len());
    for table in tables {
        let rows = shard
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                 FROM pg_attribute a WHERE a.attrelid = $1::text::regclass \
                 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[&table.name],
            )
            .await?;
        let columns: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        let key_type = rows
            .iter()
            .find(|r| r.get::<_, String>(0) == table.key_column)
            .map(|r| r.get(1))
            .unwrap_or_else(|| "text".to_owned());
        out.push(TableInfo {
            table: *table,
            columns,
            key_type,
        });
    }
    Ok(out)
}

/// Opens one of the mover's own write transactions on `shard`: the guard lets it through,
/// and foreign keys are checked at its commit rather than after each statement, so rows
/// may arrive (or be replaced) in any order as long as the tenant's rows agree when it
/// commits. The tables' foreign keys are declared DEFERRABLE for this.
async fn mover_tx(
    shard: &mut Client,
    move_id: i64,
) -> Result<tokio_postgres::Transaction<'_>, tokio_postgres::Error> {
    let tx = shard.transaction().await?;
    tenant_guard::bypass(&tx, move_id).await?;
    tx.batch_execute("SET CONSTRAINTS ALL DEFERRED").await?;
    Ok(tx)
}

/// Copies every row of `tenants` from `source` to `dest`, replacing whatever an earlier,
/// interrupted attempt of this move left there. Returns the rows copied.
///
/// The source is read in one repeatable-read snapshot, so all tables agree; the
/// destination is written in one transaction, so a killed copy leaves nothing behind.
pub async fn bulk(
    source: &mut Client,
    dest: &mut Client,
    move_id: i64,
    tenants: &[String],
    tables: &[TableInfo],
    progress: &MoveProgress,
) -> Result<u64, tokio_postgres::Error> {
    if tenants.is_empty() {
        // A range with no tenant yet: the catch-up carries whoever arrives.
        return Ok(0);
    }
    let snapshot = source
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let into = mover_tx(dest, move_id).await?;
    let owned_by = tenants
        .iter()
        .map(|t| literal(t))
        .collect::<Vec<_>>()
        .join(", ");
    delete_tenants(&into, tables, tenants).await?;
    let mut copied = 0;
    // Parents before children (the registry's order), though the deferred checks would
    // accept any order.
    for table in tables {
        let out = snapshot
            .copy_out(&format!(
                "COPY (SELECT {} FROM {} WHERE {} IN ({owned_by})) TO STDOUT",
                table.column_list(),
                table.name(),
                table.tenant_column()
            ))
            .await?;
        let sink = into
            .copy_in(&format!(
                "COPY {} ({}) FROM STDIN",
                table.name(),
                table.column_list()
            ))
            .await?;
        let mut out = pin!(out);
        let mut sink = pin!(sink);
        while let Some(chunk) = out.next().await {
            let chunk = chunk?;
            // Text format: one line per row (newlines inside values are escaped).
            progress.advance(bytecount(&chunk));
            // Feed without flushing: the server sends one message per row, and flushing
            // each would cost a socket write per row.
            sink.feed(chunk).await?;
            pause_at(PausePoint::DuringCopy);
        }
        copied += sink.as_mut().finish().await?;
    }
    into.commit().await?;
    snapshot.commit().await?;
    Ok(copied)
}

/// Deletes `tenants`' rows from every table, children before parents, in `tx` (which must
/// bypass the guard).
async fn delete_tenants(
    tx: &tokio_postgres::Transaction<'_>,
    tables: &[TableInfo],
    tenants: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let mut deleted = 0;
    for table in tables.iter().rev() {
        let sql = format!(
            "DELETE FROM {} WHERE {} = ANY($1)",
            table.name(),
            table.tenant_column()
        );
        deleted += tx.execute(&sql, &[&tenants]).await?;
    }
    Ok(deleted)
}

/// Where a batched delete has got to in one table: the last (tenant, key as text) deleted.
type Position = Option<(String, String)>;

/// Deletes up to `limit` of `tenants`' rows of `table` after `after`, in key order, in
/// `tx` (which must bypass the guard); returns how many and where it stopped. Starting
/// after the last batch (not from the first row again) keeps each batch's index scan from
/// stepping over the rows the earlier batches deleted. In a table whose rows point at its
/// own rows (a collection's parent), only rows nothing points at are deleted, so that each
/// batch commits with its foreign keys whole: the tree goes leaves first, in as many
/// batches as it is deep at least.
async fn delete_batch(
    tx: &tokio_postgres::Transaction<'_>,
    table: &TableInfo,
    tenants: &[String],
    after: &Position,
    limit: i64,
) -> Result<(u64, Position), tokio_postgres::Error> {
    let (name, tenant, key) = (table.name(), table.tenant_column(), table.key_column());
    let from = match after {
        Some(_) => format!(
            "AND ({tenant}, {key}) > ($3::text, $4::text::{})",
            table.key_type
        ),
        None => "AND $3::text IS NULL AND $4::text IS NULL".to_owned(),
    };
    let leaves: String = table
        .self_references()
        .map(|column| {
            format!(
                " AND NOT EXISTS (SELECT 1 FROM {name} c WHERE c.{tenant} = r.{tenant} \
                 AND c.{} = r.{key})",
                ident(column)
            )
        })
        .collect();
    let sql = format!(
        "WITH doomed AS (SELECT r.ctid, {tenant} AS t, {key} AS k FROM {name} r \
         WHERE {tenant} = ANY($1) {from}{leaves} ORDER BY {tenant}, {key} LIMIT $2), \
         gone AS (DELETE FROM {name} WHERE ctid IN (SELECT ctid FROM doomed)) \
         SELECT count(*), (SELECT t FROM doomed ORDER BY t DESC, k DESC LIMIT 1), \
         (SELECT k::text FROM doomed ORDER BY t DESC, k DESC LIMIT 1) FROM doomed"
    );
    let (t, k) = match after {
        Some((t, k)) => (Some(t.as_str()), Some(k.as_str())),
        None => (None, None),
    };
    let row = tx.query_one(&sql, &[&tenants, &limit, &t, &k]).await?;
    let n: i64 = row.get(0);
    let last = row
        .get::<_, Option<String>>(1)
        .zip(row.get::<_, Option<String>>(2));
    Ok((n as u64, last))
}

fn bytecount(chunk: &[u8]) -> u64 {
    chunk.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Forgets a move's change log on the source (the move is finished or undone).
pub async fn clear_changes(source: &Client, move_id: i64) -> Result<u64, tokio_postgres::Error> {
    source
        .execute(
            "DELETE FROM _autumn_move_changes WHERE move_id = $1",
            &[&move_id],
        )
        .await
}

/// Keys re-read from the source per statement in a catch-up round.
const CATCH_UP_CHUNK: usize = 1_000;

/// One catch-up round: every change logged and committed when the round starts is
/// applied. Each logged key's row is re-read on the source and replaces the
/// destination's (or is deleted there, when the source no longer has it), then the log
/// entries are removed. Returns the entries applied; adds the rows they named to
/// `applied`, when given.
///
/// The log and the rows are read in one source snapshot and written in one destination
/// transaction, so that the tenant's rows on the destination equal the snapshot when it
/// commits: any row that changed since the previous round is logged, and its entry is
/// visible in this snapshot. A round of only some entries would not keep that promise: a
/// bookmark read as it is now could point at a collection whose entry the round left out,
/// and the destination would hold a child without its parent.
pub async fn catch_up(
    source: &mut Client,
    dest: &mut Client,
    move_id: i64,
    tables: &[TableInfo],
    applied: Option<&mut Keys>,
) -> Result<u64, tokio_postgres::Error> {
    let snapshot = source
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let log = snapshot
        .query(
            "SELECT seq, table_name, tenant_key, row_key FROM _autumn_move_changes \
             WHERE move_id = $1 ORDER BY seq",
            &[&move_id],
        )
        .await?;
    if log.is_empty() {
        snapshot.commit().await?;
        return Ok(0);
    }
    let mut keys: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut seqs: Vec<i64> = Vec::with_capacity(log.len());
    for row in &log {
        seqs.push(row.get(0));
        keys.entry((row.get(1), row.get(2)))
            .or_default()
            .push(row.get(3));
    }
    let into = mover_tx(dest, move_id).await?;
    for table in tables {
        for ((table_name, tenant), row_keys) in keys.iter_mut() {
            if *table_name != table.table.name {
                continue;
            }
            row_keys.sort();
            row_keys.dedup();
            for chunk in row_keys.chunks(CATCH_UP_CHUNK) {
                replace_rows(&snapshot, &into, table, tenant, chunk).await?;
            }
        }
    }
    into.commit().await?;
    snapshot.commit().await?;
    source
        .execute(
            "DELETE FROM _autumn_move_changes WHERE seq = ANY($1)",
            &[&seqs],
        )
        .await?;
    if let Some(applied) = applied {
        for row in &log {
            note(applied, row.get(1), row.get(2), row.get(3));
        }
    }
    Ok(seqs.len() as u64)
}

/// Makes `row_keys` of one tenant's `table` on the destination what they are in the
/// source's snapshot: present with the same values, or absent.
async fn replace_rows(
    snapshot: &tokio_postgres::Transaction<'_>,
    into: &tokio_postgres::Transaction<'_>,
    table: &TableInfo,
    tenant: &str,
    row_keys: &[String],
) -> Result<(), tokio_postgres::Error> {
    let matching = format!(
        "{} = $1 AND {} = ANY($2::text[]::{}[])",
        table.tenant_column(),
        table.key_column(),
        table.key_type
    );
    let rows: String = snapshot
        .query_one(
            &format!(
                "SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb)::text FROM {} t WHERE {matching}",
                table.name()
            ),
            &[&tenant, &row_keys],
        )
        .await?
        .get(0);
    into.execute(
        &format!("DELETE FROM {} WHERE {matching}", table.name()),
        &[&tenant, &row_keys],
    )
    .await?;
    into.execute(
        &format!(
            "INSERT INTO {name} ({cols}) SELECT {cols} FROM jsonb_populate_recordset(NULL::{name}, $1::text::jsonb)",
            name = table.name(),
            cols = table.column_list()
        ),
        &[&rows],
    )
    .await?;
    Ok(())
}

/// How the delete step clears the source: `batch_rows` rows per transaction, each batch
/// followed by a pause [`DeletePacing::REST`] times as long as it took (0: one transaction
/// for everything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeletePacing {
    pub batch_rows: u32,
}

impl DeletePacing {
    /// The pause after a batch, in multiples of the batch's own time: deleting takes a
    /// quarter of the time at most. Nothing waits for these rows to go (no route leads to
    /// them any more), so the source's other tenants come first.
    pub const REST: f64 = 3.0;
}

impl Default for DeletePacing {
    fn default() -> Self {
        Self { batch_rows: 500 }
    }
}

/// Deletes `tenants`' rows on the connected shard (the guard lets the mover through), in
/// batches as `pacing` says. Returns the rows deleted.
pub async fn delete_moved_rows(
    shard: &mut Client,
    move_id: i64,
    tenants: &[String],
    tables: &[TableInfo],
    pacing: DeletePacing,
) -> Result<u64, tokio_postgres::Error> {
    if pacing.batch_rows == 0 {
        let tx = mover_tx(shard, move_id).await?;
        let deleted = delete_tenants(&tx, tables, tenants).await?;
        tx.commit().await?;
        return Ok(deleted);
    }
    // One short transaction per batch, then a pause: the shard's other tenants keep most of
    // its time, and no transaction holds a whole tenant's row locks and WAL. Nobody writes
    // these rows meanwhile (the guard refuses them), so a delete resumed after a crash
    // simply deletes what is left.
    let limit = i64::from(pacing.batch_rows);
    let mut deleted = 0;
    for table in tables.iter().rev() {
        let tree = table.self_references().next().is_some();
        let mut after = None;
        loop {
            let started = std::time::Instant::now();
            let tx = mover_tx(shard, move_id).await?;
            let (n, last) = delete_batch(&tx, table, tenants, &after, limit).await?;
            tx.commit().await?;
            deleted += n;
            // A tree's next leaves were inner rows of this batch: it starts over each time.
            if n == 0 || (!tree && (n as i64) < limit) {
                break;
            }
            if !tree {
                after = last;
            }
            tokio::time::sleep(started.elapsed().mul_f64(DeletePacing::REST)).await;
        }
    }
    Ok(deleted)
}
