//! Collection queries. Every change to a tenant's tree runs in one transaction holding the
//! tenant's tree lock, so that two concurrent re-parentings cannot build a cycle between
//! them and the depth and count limits hold; the composite foreign keys keep every
//! reference inside the tenant whatever this code does.

use chrono::Utc;
use diesel::prelude::*;
use diesel::result::Error as DbError;
use diesel::sql_types::{Array, BigInt, Integer, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::model::{Collection, CollectionName, MAX_COLLECTIONS, MAX_DEPTH};
use super::schema::collections::dsl as c;
use crate::tenancy::TenantId;

/// Why a collection operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CollectionError {
    #[error("no collection has that id")]
    NotFound,
    #[error("parent_id names no collection of this tenant")]
    NoSuchParent,
    #[error("a collection cannot be nested inside itself or its own subtree")]
    Cycle,
    #[error("collections nest at most {MAX_DEPTH} deep; this would make {depth}")]
    TooDeep { depth: usize },
    #[error("a sibling collection already has that name")]
    DuplicateName { existing: Uuid },
    #[error(
        "the collection holds {collections} collection(s) and {bookmarks} bookmark(s); \
         delete it with ?with_contents=true to delete them too"
    )]
    NotEmpty { collections: i64, bookmarks: i64 },
    #[error("a tenant has at most {MAX_COLLECTIONS} collections")]
    Full,
    #[error(transparent)]
    Db(#[from] DbError),
}

/// What deleting a collection removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Removed {
    pub collections: i64,
    pub bookmarks: i64,
}

/// A class of advisory locks of this module's own ("coll"): one lock per tenant.
const TREE_LOCK: i32 = 0x636f_6c6c;

async fn lock_tree(tx: &mut AsyncPgConnection, tenant: &str) -> Result<(), DbError> {
    diesel::sql_query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind::<Integer, _>(TREE_LOCK)
        .bind::<Text, _>(tenant)
        .execute(tx)
        .await
        .map(drop)
}

/// The tenant's collections, by name within each level's order of creation. Bounded by
/// [`MAX_COLLECTIONS`].
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
) -> Result<Vec<Collection>, DbError> {
    c::collections
        .filter(c::tenant_id.eq(tenant.as_str()))
        .select(Collection::as_select())
        .order((c::name.asc(), c::id.asc()))
        .load(conn)
        .await
}

pub async fn get(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<Option<Collection>, DbError> {
    c::collections
        .filter(c::tenant_id.eq(tenant.as_str()))
        .filter(c::id.eq(id))
        .select(Collection::as_select())
        .first(conn)
        .await
        .optional()
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Walks are cut off this deep, so that even a cycle someone wrote past this module (the
/// schema cannot forbid one) ends.
const WALK_LIMIT: i32 = 64;

/// `id` and its ancestors, nearest first; empty when the tenant has no such collection.
async fn ancestors(
    conn: &mut AsyncPgConnection,
    tenant: &str,
    id: Uuid,
) -> Result<Vec<Uuid>, DbError> {
    let rows: Vec<Id> = diesel::sql_query(
        "WITH RECURSIVE up AS ( \
             SELECT id, parent_id, 1 AS depth FROM collections WHERE tenant_id = $1 AND id = $2 \
             UNION ALL \
             SELECT p.id, p.parent_id, up.depth + 1 FROM collections p JOIN up \
                 ON p.tenant_id = $1 AND p.id = up.parent_id WHERE up.depth < $3) \
         SELECT id FROM up ORDER BY depth",
    )
    .bind::<Text, _>(tenant)
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Integer, _>(WALK_LIMIT)
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// `id` and every collection nested in it, with how many levels the subtree spans (1: no
/// children); empty when the tenant has no such collection.
pub async fn subtree(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<(Vec<Uuid>, usize), DbError> {
    #[derive(QueryableByName)]
    struct Node {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: Uuid,
        #[diesel(sql_type = Integer)]
        level: i32,
    }
    let rows: Vec<Node> = diesel::sql_query(
        "WITH RECURSIVE down AS ( \
             SELECT id, 1 AS level FROM collections WHERE tenant_id = $1 AND id = $2 \
             UNION ALL \
             SELECT k.id, down.level + 1 FROM collections k JOIN down \
                 ON k.tenant_id = $1 AND k.parent_id = down.id WHERE down.level < $3) \
         SELECT id, level FROM down",
    )
    .bind::<Text, _>(tenant.as_str())
    .bind::<diesel::sql_types::Uuid, _>(id)
    .bind::<Integer, _>(WALK_LIMIT)
    .load(conn)
    .await?;
    let levels = rows.iter().map(|n| n.level as usize).max().unwrap_or(0);
    Ok((rows.into_iter().map(|n| n.id).collect(), levels))
}

/// The sibling (under `parent`) that already has `name`, ignoring case.
async fn sibling_named(
    conn: &mut AsyncPgConnection,
    tenant: &str,
    parent: Option<Uuid>,
    name: &str,
) -> Result<Option<Uuid>, DbError> {
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT id FROM collections WHERE tenant_id = $1 \
         AND parent_id IS NOT DISTINCT FROM $2 AND lower(name) = lower($3)",
    )
    .bind::<Text, _>(tenant)
    .bind::<diesel::sql_types::Nullable<diesel::sql_types::Uuid>, _>(parent)
    .bind::<Text, _>(name)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next().map(|r| r.id))
}

/// The collections a collection placed under `parent` would sit in: `parent` and its
/// ancestors (none at the top level; their count is the new collection's depth less one).
/// Refused when the tenant has no such parent.
async fn ancestors_of_parent(
    conn: &mut AsyncPgConnection,
    tenant: &str,
    parent: Option<Uuid>,
) -> Result<Vec<Uuid>, CollectionError> {
    let Some(parent) = parent else {
        return Ok(Vec::new());
    };
    let chain = ancestors(conn, tenant, parent).await?;
    if chain.is_empty() {
        return Err(CollectionError::NoSuchParent);
    }
    Ok(chain)
}

/// Creates a collection under `parent` (or at the top level).
pub async fn create(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    name: &CollectionName,
    parent: Option<Uuid>,
) -> Result<Collection, CollectionError> {
    let (tenant, name) = (tenant.as_str().to_owned(), name.clone());
    conn.transaction(async move |tx| {
        lock_tree(tx, &tenant).await?;
        let count: Count =
            diesel::sql_query("SELECT count(*) AS n FROM collections WHERE tenant_id = $1")
                .bind::<Text, _>(&tenant)
                .get_result(tx)
                .await?;
        if count.n >= MAX_COLLECTIONS {
            return Err(CollectionError::Full);
        }
        let above = ancestors_of_parent(tx, &tenant, parent).await?;
        if above.len() + 1 > MAX_DEPTH {
            return Err(CollectionError::TooDeep {
                depth: above.len() + 1,
            });
        }
        if let Some(existing) = sibling_named(tx, &tenant, parent, name.as_str()).await? {
            return Err(CollectionError::DuplicateName { existing });
        }
        let now = Utc::now();
        Ok(diesel::insert_into(c::collections)
            .values((
                c::tenant_id.eq(&tenant),
                c::id.eq(Uuid::now_v7()),
                c::name.eq(name.as_str()),
                c::parent_id.eq(parent),
                c::created_at.eq(now),
                c::updated_at.eq(now),
            ))
            .returning(Collection::as_returning())
            .get_result(tx)
            .await?)
    })
    .await
}

/// The collection at `names` (top-level name first), each level found by name (ignoring
/// case) or created: an importer's folders. Where the tenant's limits stop it (too many
/// collections, too deep) it answers the deepest level it reached, so that what cannot be
/// filed where it was is filed as near as the limits allow.
pub async fn ensure_path(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    names: &[String],
) -> Result<Option<Uuid>, DbError> {
    let mut parent = None;
    for raw in names {
        let Ok(name) = CollectionName::parse(raw) else {
            break;
        };
        if let Some(id) = sibling_named(conn, tenant.as_str(), parent, name.as_str()).await? {
            parent = Some(id);
            continue;
        }
        parent = match create(conn, tenant, &name, parent).await {
            Ok(made) => Some(made.id),
            Err(CollectionError::DuplicateName { existing }) => Some(existing),
            Err(CollectionError::Db(e)) => return Err(e),
            Err(_) => break,
        };
    }
    Ok(parent)
}

/// Renames a collection, moves it (with its subtree) under `parent` (`Some(None)`: to the
/// top level), or both.
pub async fn update(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
    name: Option<&CollectionName>,
    parent: Option<Option<Uuid>>,
) -> Result<Collection, CollectionError> {
    let (tenant_id, name) = (tenant.clone(), name.cloned());
    conn.transaction(async move |tx| {
        let tenant = tenant_id.as_str();
        lock_tree(tx, tenant).await?;
        let current = get(tx, &tenant_id, id)
            .await?
            .ok_or(CollectionError::NotFound)?;
        let new_parent = parent.unwrap_or(current.parent_id);
        if parent.is_some() && new_parent != current.parent_id {
            let above = ancestors_of_parent(tx, tenant, new_parent).await?;
            if above.contains(&id) {
                return Err(CollectionError::Cycle);
            }
            let (_, levels) = subtree(tx, &tenant_id, id).await?;
            if above.len() + levels > MAX_DEPTH {
                return Err(CollectionError::TooDeep {
                    depth: above.len() + levels,
                });
            }
        }
        // The stored name as it is when unchanged: it is not parsed again.
        let new_name = name.map_or(current.name, |n| n.as_str().to_owned());
        if let Some(existing) = sibling_named(tx, tenant, new_parent, &new_name).await?
            && existing != id
        {
            return Err(CollectionError::DuplicateName { existing });
        }
        Ok(diesel::update(
            c::collections
                .filter(c::tenant_id.eq(tenant))
                .filter(c::id.eq(id)),
        )
        .set((
            c::name.eq(&new_name),
            c::parent_id.eq(new_parent),
            c::updated_at.eq(Utc::now()),
        ))
        .returning(Collection::as_returning())
        .get_result(tx)
        .await?)
    })
    .await
}

/// Deletes a collection. One that holds collections or bookmarks is refused unless
/// `with_contents`, which deletes its whole subtree and every bookmark in it.
pub async fn delete(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
    with_contents: bool,
) -> Result<Removed, CollectionError> {
    let tenant_id = tenant.clone();
    conn.transaction(async move |tx| {
        let tenant = tenant_id.as_str();
        lock_tree(tx, tenant).await?;
        let (ids, _) = subtree(tx, &tenant_id, id).await?;
        if ids.is_empty() {
            return Err(CollectionError::NotFound);
        }
        let filed: Count = diesel::sql_query(
            "SELECT count(*) AS n FROM bookmarks WHERE tenant_id = $1 AND collection_id = ANY($2)",
        )
        .bind::<Text, _>(tenant)
        .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
        .get_result(tx)
        .await?;
        let nested = ids.len() as i64 - 1;
        if !with_contents && (nested > 0 || filed.n > 0) {
            return Err(CollectionError::NotEmpty {
                collections: nested,
                bookmarks: filed.n,
            });
        }
        let bookmarks = diesel::sql_query(
            "DELETE FROM bookmarks WHERE tenant_id = $1 AND collection_id = ANY($2)",
        )
        .bind::<Text, _>(tenant)
        .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
        .execute(tx)
        .await? as i64;
        // One statement for the whole subtree: its foreign key is checked once, at its end.
        let collections = diesel::delete(
            c::collections
                .filter(c::tenant_id.eq(tenant))
                .filter(c::id.eq_any(&ids)),
        )
        .execute(tx)
        .await? as i64;
        Ok(Removed {
            collections,
            bookmarks,
        })
    })
    .await
}
