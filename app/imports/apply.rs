//! Applying one chunk of an import to the tenant's shard, in one transaction. Applying the
//! same chunk again changes nothing and counts the same: each entry's bookmark id is derived
//! from the import and the entry's place in the file ([`entry_id`]), so an entry whose
//! bookmark exists already was created by this import, in an earlier try of this chunk.

use std::collections::HashMap;

use chrono::Utc;
use diesel::QueryableByName;
use diesel::result::Error as DbError;
use diesel::sql_types::{Array, Jsonb, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use super::entry::{Entry, OnDuplicate};
use crate::collections::store::ensure_path;
use crate::tenancy::TenantId;

/// What one chunk did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub created: i32,
    pub updated: i32,
    pub skipped: i32,
}

/// The bookmark id of the entry at `index` of import `import`, begun at `begun_ms`: a
/// version 7 UUID (time first, as every bookmark id here) whose time is the import's and
/// whose next bits are the entry's place, so an import's bookmarks sort in file order.
pub fn entry_id(import: Uuid, begun_ms: u64, index: u32) -> Uuid {
    let from_import = import.as_bytes();
    let bytes = [
        ((index >> 16) & 0x0f) as u8,
        (index >> 8) as u8,
        0,
        index as u8,
        from_import[10],
        from_import[11],
        from_import[12],
        from_import[13],
        from_import[14],
        from_import[15],
    ];
    uuid::Builder::from_unix_timestamp_millis(begun_ms, &bytes).into_uuid()
}

/// One chunk to apply.
pub struct Chunk<'a> {
    pub tenant: &'a TenantId,
    pub import: Uuid,
    pub begun_ms: u64,
    pub author: Option<Uuid>,
    pub on_duplicate: OnDuplicate,
    pub folders: &'a [Vec<String>],
    /// Creates every folder of the file, empty ones included (the first chunk does).
    pub all_folders: bool,
    pub entries: &'a [Entry],
}

#[derive(QueryableByName)]
struct Existing {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    url: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// What to do with one entry.
enum Plan<'e> {
    Insert(Uuid, &'e Entry),
    /// An earlier try of this chunk created it.
    Done,
    Skip,
    Update(Uuid, &'e Entry),
}

/// Applies `chunk` in one transaction.
pub async fn apply(conn: &mut AsyncPgConnection, chunk: &Chunk<'_>) -> Result<Counts, DbError> {
    conn.transaction(async move |tx| apply_in(tx, chunk).await)
        .await
}

async fn apply_in(tx: &mut AsyncPgConnection, chunk: &Chunk<'_>) -> Result<Counts, DbError> {
    let tenant = chunk.tenant;
    // The chunk's folders, found or created.
    let mut collections: HashMap<u32, Option<Uuid>> = HashMap::new();
    if chunk.all_folders {
        for (f, names) in chunk.folders.iter().enumerate() {
            collections.insert(f as u32, ensure_path(tx, tenant, names).await?);
        }
    }
    for e in chunk.entries {
        if let Some(f) = e.folder
            && !collections.contains_key(&f)
        {
            let names = chunk.folders.get(f as usize).map_or(&[][..], Vec::as_slice);
            collections.insert(f, ensure_path(tx, tenant, names).await?);
        }
    }
    let ids: Vec<Uuid> = chunk
        .entries
        .iter()
        .map(|e| entry_id(chunk.import, chunk.begun_ms, e.index))
        .collect();
    let urls: Vec<&str> = chunk.entries.iter().map(|e| e.url.as_str()).collect();
    let existing: Vec<Existing> = diesel::sql_query(
        "SELECT id, url FROM bookmarks WHERE tenant_id = $1 \
         AND (id = ANY($2) OR url = ANY($3))",
    )
    .bind::<Text, _>(tenant.as_str())
    .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
    .bind::<Array<Text>, _>(&urls)
    .load(tx)
    .await?;
    let present: std::collections::HashSet<Uuid> = existing.iter().map(|e| e.id).collect();
    let mut by_url: HashMap<&str, Uuid> = existing.iter().map(|e| (e.url.as_str(), e.id)).collect();

    let mut plans = Vec::with_capacity(chunk.entries.len());
    for (entry, id) in chunk.entries.iter().zip(&ids) {
        let plan = if present.contains(id) {
            Plan::Done
        } else if let Some(owner) = by_url.get(entry.url.as_str()) {
            match chunk.on_duplicate {
                OnDuplicate::Skip => Plan::Skip,
                OnDuplicate::Update => Plan::Update(*owner, entry),
            }
        } else {
            by_url.insert(&entry.url, *id);
            Plan::Insert(*id, entry)
        };
        plans.push(plan);
    }

    let mut counts = Counts::default();
    let rows: Vec<serde_json::Value> = plans
        .iter()
        .filter_map(|p| match p {
            Plan::Insert(id, e) => Some(row(*id, e, &collections)),
            _ => None,
        })
        .collect();
    let wanted = rows.len();
    let inserted = if rows.is_empty() {
        0
    } else {
        diesel::sql_query(
            "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, created_at, \
                                    updated_at, collection_id, unread, archived, favorite, \
                                    created_by) \
             SELECT $1, r.id, r.url, r.title, r.notes, \
                    ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.created_at, \
                    r.updated_at, r.collection_id, r.unread, r.archived, r.favorite, $3 \
             FROM jsonb_to_recordset($2) AS r(id uuid, url text, title text, notes text, \
                  tags jsonb, created_at timestamptz, updated_at timestamptz, \
                  collection_id uuid, unread boolean, archived boolean, favorite boolean) \
             ON CONFLICT DO NOTHING",
        )
        .bind::<Text, _>(tenant.as_str())
        .bind::<Jsonb, _>(serde_json::Value::Array(rows))
        .bind::<Nullable<diesel::sql_types::Uuid>, _>(chunk.author)
        .execute(tx)
        .await?
    };
    // A row not inserted is one whose id another try of this chunk wrote meanwhile (it is
    // this import's, created), or whose URL someone saved since this chunk looked (a
    // duplicate like any other).
    let created = if inserted == wanted {
        inserted
    } else {
        let wanted_ids: Vec<Uuid> = plans
            .iter()
            .filter_map(|p| match p {
                Plan::Insert(id, _) => Some(*id),
                _ => None,
            })
            .collect();
        let present: Count = diesel::sql_query(
            "SELECT count(*) AS n FROM bookmarks WHERE tenant_id = $1 AND id = ANY($2)",
        )
        .bind::<Text, _>(tenant.as_str())
        .bind::<Array<diesel::sql_types::Uuid>, _>(&wanted_ids)
        .get_result(tx)
        .await?;
        present.n as usize
    };
    counts.created += created as i32;
    counts.skipped += (wanted - created) as i32;
    for plan in &plans {
        match plan {
            Plan::Done => counts.created += 1,
            Plan::Skip => counts.skipped += 1,
            Plan::Insert(..) => {}
            Plan::Update(id, e) => {
                let collection = e
                    .folder
                    .and_then(|f| collections.get(&f).copied().flatten());
                let n = diesel::sql_query(
                    "UPDATE bookmarks SET title = $3, notes = $4, tags = $5, \
                     collection_id = $6, unread = $7, archived = $8, favorite = $9, \
                     updated_at = $10 WHERE tenant_id = $1 AND id = $2",
                )
                .bind::<Text, _>(tenant.as_str())
                .bind::<diesel::sql_types::Uuid, _>(id)
                .bind::<Text, _>(&e.title)
                .bind::<Text, _>(&e.notes)
                .bind::<Array<Text>, _>(&e.tags)
                .bind::<Nullable<diesel::sql_types::Uuid>, _>(collection)
                .bind::<diesel::sql_types::Bool, _>(e.unread)
                .bind::<diesel::sql_types::Bool, _>(e.archived)
                .bind::<diesel::sql_types::Bool, _>(e.favorite)
                .bind::<diesel::sql_types::Timestamptz, _>(Utc::now())
                .execute(tx)
                .await?;
                if n == 1 {
                    counts.updated += 1;
                } else {
                    counts.skipped += 1;
                }
            }
        }
    }
    Ok(counts)
}

fn row(id: Uuid, e: &Entry, collections: &HashMap<u32, Option<Uuid>>) -> serde_json::Value {
    let now = Utc::now();
    let created = e.created_at.unwrap_or(now);
    json!({
        "id": id,
        "url": e.url,
        "title": e.title,
        "notes": e.notes,
        "tags": e.tags,
        "created_at": created,
        "updated_at": e.updated_at.unwrap_or(created).max(created),
        "collection_id": e.folder.and_then(|f| collections.get(&f).copied().flatten()),
        "unread": e.unread,
        "archived": e.archived,
        "favorite": e.favorite,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_are_stable_distinct_and_in_file_order() {
        let import = Uuid::new_v4();
        let ms = 1_760_000_000_000;
        let ids: Vec<Uuid> = (0..600_000)
            .step_by(997)
            .map(|i| entry_id(import, ms, i))
            .collect();
        assert_eq!(entry_id(import, ms, 5), entry_id(import, ms, 5));
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "file order");
        assert_eq!(ids[0].get_version_num(), 7);
        assert_ne!(entry_id(Uuid::new_v4(), ms, 5), entry_id(import, ms, 5));
    }
}
