//! Applying a batch of bookmark operations: one shard transaction, all or nothing.
//!
//! Every operation runs in its own savepoint, so that one the database refuses (a URL the
//! tenant has saved already, a collection it does not have) does not abort the rest: all of
//! them are tried, every refusal is reported, and then the whole transaction is rolled
//! back. Any other database error (a move's fence, a lost connection) ends the batch at
//! once and is the shard session's to classify, as for a single write.

use std::collections::HashSet;

use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DbError};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::{StoreError, delete, insert, saved_with_url, update_row};
use crate::bookmarks::model::{Bookmark, BookmarkDraft, BookmarkPatch, MAX_TAGS};
use crate::bookmarks::schema::bookmarks::dsl as b;
use crate::tenancy::TenantId;

/// One validated operation.
#[derive(Debug, Clone)]
pub enum Step {
    Create(BookmarkDraft),
    Update {
        id: Uuid,
        patch: BookmarkPatch,
    },
    Delete(Uuid),
    /// Adds the tags the bookmark does not have yet, after its own.
    Tag {
        id: Uuid,
        tags: Vec<String>,
    },
    /// Takes the tags away; ones it does not have are ignored.
    Untag {
        id: Uuid,
        tags: Vec<String>,
    },
}

/// What an applied operation left.
#[derive(Debug)]
pub enum Done {
    Saved(Bookmark),
    Deleted(Uuid),
}

/// Why the database side refused one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NoSuchBookmark,
    DuplicateUrl {
        existing: Uuid,
    },
    NoSuchCollection,
    /// Tagging would leave the bookmark with more than [`MAX_TAGS`] tags.
    TooManyTags {
        count: usize,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// Operations refused, each with its index; nothing was stored.
    #[error("{} operations refused", .0.len())]
    Refused(Vec<(usize, Refusal)>),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// How one operation ended inside its savepoint.
#[derive(Debug)]
enum StepError {
    Refused(Refusal),
    /// An update's URL is another bookmark's, which is looked up once the savepoint is
    /// rolled back (the failed statement aborted it).
    UrlTaken(String),
    Db(DbError),
}

impl From<DbError> for StepError {
    fn from(e: DbError) -> Self {
        match StoreError::from(e) {
            StoreError::NoSuchCollection => StepError::Refused(Refusal::NoSuchCollection),
            StoreError::Duplicate { existing } => {
                StepError::Refused(Refusal::DuplicateUrl { existing })
            }
            StoreError::Db(e) => StepError::Db(e),
        }
    }
}

/// Applies `steps` in order in one transaction, saved bookmarks written as by `author`.
/// Either every step is applied and committed, or none is and every refusal is returned.
pub async fn apply(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    author: Option<Uuid>,
    steps: &[Step],
) -> Result<Vec<Done>, BatchError> {
    conn.transaction(async move |tx| {
        let mut done = Vec::with_capacity(steps.len());
        let mut refused = Vec::new();
        for (index, step) in steps.iter().enumerate() {
            let outcome = tx
                .transaction(async move |sp| one(sp, tenant, author, step).await)
                .await;
            match outcome {
                Ok(d) => done.push(d),
                Err(StepError::Refused(r)) => refused.push((index, r)),
                Err(StepError::UrlTaken(url)) => {
                    let existing = saved_with_url(tx, tenant, &url).await?;
                    refused.push((index, Refusal::DuplicateUrl { existing }));
                }
                Err(StepError::Db(e)) => return Err(BatchError::Db(e)),
            }
        }
        if refused.is_empty() {
            Ok(done)
        } else {
            Err(BatchError::Refused(refused))
        }
    })
    .await
}

async fn one(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    author: Option<Uuid>,
    step: &Step,
) -> Result<Done, StepError> {
    match step {
        Step::Create(draft) => match insert(conn, tenant, draft, author).await {
            Ok(saved) => Ok(Done::Saved(saved)),
            Err(StoreError::Duplicate { existing }) => {
                Err(StepError::Refused(Refusal::DuplicateUrl { existing }))
            }
            Err(StoreError::NoSuchCollection) => Err(StepError::Refused(Refusal::NoSuchCollection)),
            Err(StoreError::Db(e)) => Err(StepError::Db(e)),
        },
        Step::Update { id, patch } => match update_row(conn, tenant, *id, patch).await {
            Ok(Some(saved)) => Ok(Done::Saved(saved)),
            Ok(None) => Err(StepError::Refused(Refusal::NoSuchBookmark)),
            Err(DbError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
                Err(StepError::UrlTaken(patch.url.clone().unwrap_or_default()))
            }
            Err(e) => Err(e.into()),
        },
        Step::Delete(id) => match delete(conn, tenant, *id).await? {
            true => Ok(Done::Deleted(*id)),
            false => Err(StepError::Refused(Refusal::NoSuchBookmark)),
        },
        Step::Tag { id, tags } => {
            let current = locked(conn, tenant, *id).await?;
            let mut merged = current.tags.clone();
            merged.extend(tags.iter().filter(|t| !current.tags.contains(t)).cloned());
            if merged.len() > MAX_TAGS {
                return Err(StepError::Refused(Refusal::TooManyTags {
                    count: merged.len(),
                }));
            }
            retag(conn, tenant, current, merged).await
        }
        Step::Untag { id, tags } => {
            let current = locked(conn, tenant, *id).await?;
            let gone: HashSet<&String> = tags.iter().collect();
            let kept = current
                .tags
                .iter()
                .filter(|t| !gone.contains(t))
                .cloned()
                .collect();
            retag(conn, tenant, current, kept).await
        }
    }
}

/// The bookmark, locked until the batch ends so that its tags are changed from what they
/// are.
async fn locked(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<Bookmark, StepError> {
    b::bookmarks
        .filter(b::tenant_id.eq(tenant.as_str()))
        .filter(b::id.eq(id))
        .select(Bookmark::as_select())
        .for_update()
        .first(conn)
        .await
        .optional()?
        .ok_or(StepError::Refused(Refusal::NoSuchBookmark))
}

/// Writes `tags` when they differ from the bookmark's: a tag it has already, or an untag of
/// tags it does not have, changes nothing (not even `updated_at`).
async fn retag(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    current: Bookmark,
    tags: Vec<String>,
) -> Result<Done, StepError> {
    if tags == current.tags {
        return Ok(Done::Saved(current));
    }
    let patch = BookmarkPatch {
        tags: Some(tags),
        ..BookmarkPatch::default()
    };
    match update_row(conn, tenant, current.id, &patch).await? {
        Some(saved) => Ok(Done::Saved(saved)),
        None => Err(StepError::Refused(Refusal::NoSuchBookmark)),
    }
}
