//! Reading a page of the feed: the changed items after a seq, each with its row as it is
//! now (a deleted one as a tombstone), all read in the caller's snapshot.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::schema::{feed_changes as f, feed_horizons as h};
use crate::bookmarks::model::Bookmark;
use crate::bookmarks::schema::bookmarks::dsl as b;
use crate::collections::model::Collection;
use crate::collections::schema::collections::dsl as c;
use crate::tenancy::TenantId;

/// What changed about one item, and the item as it is now.
#[derive(Debug)]
pub enum Item {
    Bookmark(Bookmark),
    Collection(Collection),
    DeletedBookmark,
    DeletedCollection,
}

#[derive(Debug)]
pub struct Changed {
    pub seq: i64,
    pub id: Uuid,
    pub changed_at: DateTime<Utc>,
    pub item: Item,
}

#[derive(Debug)]
pub enum Page {
    /// Up to `limit` changes after the cursor, oldest first; `more` when others follow.
    Changes { changes: Vec<Changed>, more: bool },
    /// Tombstones after `since` have been purged: the client must start again.
    Expired { purged_through: i64 },
}

/// The page after `since` (0: from the start, which never expires). Run it in a snapshot
/// (`begin_snapshot`): its three reads must agree.
pub async fn page(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    since: i64,
    limit: i64,
) -> QueryResult<Page> {
    if since > 0 {
        let horizon: Option<i64> = h::table
            .filter(h::tenant_id.eq(tenant.as_str()))
            .select(h::purged_through)
            .first(conn)
            .await
            .optional()?;
        if let Some(purged_through) = horizon.filter(|&p| since < p) {
            return Ok(Page::Expired { purged_through });
        }
    }
    let mut rows: Vec<(i64, Uuid, String, bool, DateTime<Utc>)> = f::table
        .filter(f::tenant_id.eq(tenant.as_str()))
        .filter(f::seq.gt(since))
        .order(f::seq.asc())
        .limit(limit + 1)
        .select((f::seq, f::item_id, f::kind, f::deleted, f::changed_at))
        .load(conn)
        .await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let live = |kind: &str| -> Vec<Uuid> {
        rows.iter()
            .filter(|r| r.2 == kind && !r.3)
            .map(|r| r.1)
            .collect()
    };
    let (bookmark_ids, collection_ids) = (live("bookmark"), live("collection"));
    let mut bookmarks: HashMap<Uuid, Bookmark> = if bookmark_ids.is_empty() {
        HashMap::new()
    } else {
        b::bookmarks
            .filter(b::tenant_id.eq(tenant.as_str()))
            .filter(b::id.eq_any(&bookmark_ids))
            .select(Bookmark::as_select())
            .load(conn)
            .await?
            .into_iter()
            .map(|x| (x.id, x))
            .collect()
    };
    let mut collections: HashMap<Uuid, Collection> = if collection_ids.is_empty() {
        HashMap::new()
    } else {
        c::collections
            .filter(c::tenant_id.eq(tenant.as_str()))
            .filter(c::id.eq_any(&collection_ids))
            .select(Collection::as_select())
            .load(conn)
            .await?
            .into_iter()
            .map(|x| (x.id, x))
            .collect()
    };
    let changes = rows
        .into_iter()
        .map(|(seq, id, kind, _, changed_at)| {
            // The trigger records a row's state at commit, so in one snapshot a live entry
            // has its row; a missing one reads as the tombstone it must be.
            let item = if kind == "bookmark" {
                bookmarks
                    .remove(&id)
                    .map_or(Item::DeletedBookmark, Item::Bookmark)
            } else {
                collections
                    .remove(&id)
                    .map_or(Item::DeletedCollection, Item::Collection)
            };
            Changed {
                seq,
                id,
                changed_at,
                item,
            }
        })
        .collect();
    Ok(Page::Changes { changes, more })
}
