//! The control database's side of imports (`tenant_imports`, `tenant_import_chunks`): an
//! import is stored with its entries and its job in one transaction, so there is never an
//! import without the job that runs it, nor a job whose entries are missing.

use chrono::{DateTime, Utc};
use diesel::result::{DatabaseErrorKind, Error as DbError};
use diesel::sql_types::{BigInt, Integer, Jsonb, Nullable, Text, Timestamptz};
use diesel::{OptionalExtension, QueryableByName};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde_json::{Value, json};
use uuid::Uuid;

use super::apply::Counts;
use super::entry::{Entry, Format, OnDuplicate, Parsed};
use crate::tenancy::TenantId;

/// The job kind that runs an import.
pub const IMPORT_JOB: &str = "import";
/// Entries per chunk: one shard transaction's worth.
pub const CHUNK: usize = 1000;
/// Tries before an import's job (and so the import) fails for good.
const MAX_ATTEMPTS: i32 = 8;

/// One import row.
#[derive(Debug, Clone, QueryableByName)]
pub struct ImportRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    pub id: Uuid,
    #[diesel(sql_type = Text)]
    pub tenant_key: String,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    pub member_id: Option<Uuid>,
    #[diesel(sql_type = Text)]
    pub format: String,
    #[diesel(sql_type = Text)]
    pub on_duplicate: String,
    #[diesel(sql_type = Text)]
    pub state: String,
    #[diesel(sql_type = Jsonb)]
    pub folders: Value,
    #[diesel(sql_type = Integer)]
    pub parsed: i32,
    #[diesel(sql_type = Integer)]
    pub chunks: i32,
    #[diesel(sql_type = Integer)]
    pub chunks_done: i32,
    #[diesel(sql_type = Integer)]
    pub created: i32,
    #[diesel(sql_type = Integer)]
    pub updated: i32,
    #[diesel(sql_type = Integer)]
    pub skipped: i32,
    #[diesel(sql_type = Integer)]
    pub refused: i32,
    #[diesel(sql_type = Jsonb)]
    pub refusals: Value,
    #[diesel(sql_type = Nullable<Text>)]
    pub last_error: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub started_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub finished_at: Option<DateTime<Utc>>,
}

impl ImportRow {
    pub fn on_duplicate(&self) -> OnDuplicate {
        OnDuplicate::parse(&self.on_duplicate)
    }

    /// The folder paths, as stored.
    pub fn folder_paths(&self) -> Vec<Vec<String>> {
        serde_json::from_value(self.folders.clone()).unwrap_or_default()
    }
}

const COLUMNS: &str = "id, tenant_key, member_id, format, on_duplicate, state, folders, parsed, \
     chunks, chunks_done, created, updated, skipped, refused, refusals, last_error, \
     created_at, started_at, finished_at";

/// Why an import was not stored.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("import {0} of this tenant is not finished yet")]
    Unfinished(Uuid),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A file read, to store as an import of `tenant` by `member`.
pub struct NewImport<'a> {
    pub tenant: &'a TenantId,
    pub member: Option<Uuid>,
    pub format: Format,
    pub on_duplicate: OnDuplicate,
    pub parsed: &'a Parsed,
}

/// Stores the import, its chunks of entries and its job, in one transaction.
pub async fn create(
    conn: &mut AsyncPgConnection,
    new: &NewImport<'_>,
) -> Result<ImportRow, CreateError> {
    let id = Uuid::now_v7();
    let tenant = new.tenant.as_str().to_owned();
    let outcome = conn
        .transaction(async |tx| {
            // At least one, which creates the file's folders even when it has no entries.
            let chunks = new.parsed.entries.chunks(CHUNK).len().max(1) as i32;
            let row: ImportRow = diesel::sql_query(format!(
                "INSERT INTO tenant_imports (id, tenant_key, member_id, format, on_duplicate, \
                 folders, parsed, chunks, refused, refusals) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
            ))
            .bind::<diesel::sql_types::Uuid, _>(id)
            .bind::<Text, _>(&tenant)
            .bind::<Nullable<diesel::sql_types::Uuid>, _>(new.member)
            .bind::<Text, _>(new.format.as_str())
            .bind::<Text, _>(new.on_duplicate.as_str())
            .bind::<Jsonb, _>(json!(new.parsed.folders))
            .bind::<Integer, _>((new.parsed.entries.len() + new.parsed.refused) as i32)
            .bind::<Integer, _>(chunks)
            .bind::<Integer, _>(new.parsed.refused as i32)
            .bind::<Jsonb, _>(json!(new.parsed.refusals))
            .get_result(tx)
            .await?;
            let mut pieces: Vec<&[Entry]> = new.parsed.entries.chunks(CHUNK).collect();
            if pieces.is_empty() {
                pieces.push(&[]);
            }
            for (n, entries) in pieces.into_iter().enumerate() {
                diesel::sql_query(
                    "INSERT INTO tenant_import_chunks (import_id, chunk, entries) VALUES ($1, $2, $3)",
                )
                .bind::<diesel::sql_types::Uuid, _>(id)
                .bind::<Integer, _>(n as i32)
                .bind::<Jsonb, _>(json!(entries))
                .execute(tx)
                .await?;
            }
            diesel::sql_query(
                "INSERT INTO autumn_jobs (kind, payload, idempotency_key, max_attempts) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind::<Text, _>(IMPORT_JOB)
            .bind::<Jsonb, _>(json!({"tenant": tenant, "import": id}))
            .bind::<Text, _>(format!("import:{id}"))
            .bind::<Integer, _>(MAX_ATTEMPTS)
            .execute(tx)
            .await?;
            Ok::<_, DbError>(row)
        })
        .await;
    match outcome {
        Ok(row) => Ok(row),
        Err(DbError::DatabaseError(DatabaseErrorKind::UniqueViolation, info))
            if info.constraint_name() == Some("tenant_imports_one_unfinished") =>
        {
            match unfinished(conn, new.tenant).await? {
                Some(running) => Err(CreateError::Unfinished(running)),
                // It finished in between: the caller may try again.
                None => Err(CreateError::Db(DbError::DatabaseError(
                    DatabaseErrorKind::SerializationFailure,
                    info,
                ))),
            }
        }
        Err(e) => Err(e.into()),
    }
}

async fn unfinished(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
) -> Result<Option<Uuid>, DbError> {
    #[derive(QueryableByName)]
    struct Id {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: Uuid,
    }
    let row: Option<Id> = diesel::sql_query(
        "SELECT id FROM tenant_imports WHERE tenant_key = $1 AND state IN ('queued', 'running')",
    )
    .bind::<Text, _>(tenant.as_str())
    .get_result(conn)
    .await
    .optional()?;
    Ok(row.map(|r| r.id))
}

/// One of the tenant's imports.
pub async fn get(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<Option<ImportRow>, DbError> {
    diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM tenant_imports WHERE tenant_key = $1 AND id = $2"
    ))
    .bind::<Text, _>(tenant.as_str())
    .bind::<diesel::sql_types::Uuid, _>(id)
    .get_result(conn)
    .await
    .optional()
}

/// The tenant's newest imports.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    limit: i64,
) -> Result<Vec<ImportRow>, DbError> {
    diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM tenant_imports WHERE tenant_key = $1 \
         ORDER BY created_at DESC, id DESC LIMIT $2"
    ))
    .bind::<Text, _>(tenant.as_str())
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// The import, marked running (its start time kept from the first try).
pub async fn start(conn: &mut AsyncPgConnection, id: Uuid) -> Result<Option<ImportRow>, DbError> {
    diesel::sql_query(format!(
        "UPDATE tenant_imports SET state = 'running', started_at = coalesce(started_at, now()) \
         WHERE id = $1 AND state IN ('queued', 'running') RETURNING {COLUMNS}"
    ))
    .bind::<diesel::sql_types::Uuid, _>(id)
    .get_result(conn)
    .await
    .optional()
}

/// Chunk `n`'s entries.
pub async fn chunk(conn: &mut AsyncPgConnection, id: Uuid, n: i32) -> Result<Vec<Entry>, DbError> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Jsonb)]
        entries: Value,
    }
    let row: Row = diesel::sql_query(
        "SELECT entries FROM tenant_import_chunks WHERE import_id = $1 AND chunk = $2",
    )
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Integer, _>(n)
    .get_result(conn)
    .await?;
    serde_json::from_value(row.entries).map_err(|e| DbError::DeserializationError(Box::new(e)))
}

/// Records chunk `n` as applied with `counts`; false when it was recorded already (another
/// worker took the job over), which adds nothing.
pub async fn record(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    n: i32,
    counts: Counts,
) -> Result<bool, DbError> {
    let changed = diesel::sql_query(
        "UPDATE tenant_imports SET chunks_done = $2 + 1, created = created + $3, \
         updated = updated + $4, skipped = skipped + $5, last_error = NULL \
         WHERE id = $1 AND chunks_done = $2 AND state = 'running'",
    )
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Integer, _>(n)
    .bind::<Integer, _>(counts.created)
    .bind::<Integer, _>(counts.updated)
    .bind::<Integer, _>(counts.skipped)
    .execute(conn)
    .await?;
    Ok(changed == 1)
}

/// Marks the import done and drops its entries.
pub async fn finish(conn: &mut AsyncPgConnection, id: Uuid) -> Result<(), DbError> {
    conn.transaction(async |tx| {
        diesel::sql_query(
            "UPDATE tenant_imports SET state = 'done', finished_at = now(), last_error = NULL \
             WHERE id = $1 AND state = 'running' AND chunks_done = chunks",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .execute(tx)
        .await?;
        diesel::sql_query("DELETE FROM tenant_import_chunks WHERE import_id = $1")
            .bind::<diesel::sql_types::Uuid, _>(id)
            .execute(tx)
            .await?;
        Ok(())
    })
    .await
}

/// Keeps why the last try failed (`failed`: for good, which frees the tenant for another
/// import and drops the entries).
pub async fn note_failure(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    error: &str,
    failed: bool,
) -> Result<(), DbError> {
    conn.transaction(async |tx| {
        diesel::sql_query(
            "UPDATE tenant_imports SET last_error = $2, \
             state = CASE WHEN $3 THEN 'failed' ELSE state END, \
             finished_at = CASE WHEN $3 THEN now() ELSE finished_at END \
             WHERE id = $1 AND state IN ('queued', 'running')",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .bind::<Text, _>(error)
        .bind::<diesel::sql_types::Bool, _>(failed)
        .execute(tx)
        .await?;
        if failed {
            diesel::sql_query("DELETE FROM tenant_import_chunks WHERE import_id = $1")
                .bind::<diesel::sql_types::Uuid, _>(id)
                .execute(tx)
                .await?;
        }
        Ok(())
    })
    .await
}
