//! `GET /api/changes`: a page of the tenant's change feed. A client keeps the page's
//! `cursor` and asks again with `since=<cursor>`; applying each page in order leaves it with
//! exactly the tenant's bookmarks and collections.

use axum::Json;
use axum::extract::FromRef;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::store::{self, Changed, Item, Page};
use crate::bookmarks::model::Bookmark;
use crate::collections::model::Collection;
use crate::sharding::access::Shards;
use crate::web::error::{ApiError, Reply};
use crate::web::extract::{ApiQuery, ShardedDb, Tenant};

/// The API document's tag of the feed.
pub const TAG: &str = "changes";

/// The `code`s the feed's answers carry, besides the framework's.
pub const CODES: &[&str] = &["cursor_expired", "invalid_cursor", "invalid_limit"];

/// Changes per page unless the client asks otherwise, and at most.
pub const DEFAULT_PAGE: i64 = 100;
pub const MAX_PAGE: i64 = 1000;

/// The routes, for the app to put behind tenant authentication.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
{
    OpenApiRouter::new().routes(routes!(changes))
}

// The limits are literals (the derive takes no constants); a test holds them to
// `MAX_PAGE`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ChangesParams {
    /// The `cursor` of the last page applied. Absent or blank: from the start.
    #[param(pattern = "^([0-9]{1,18})?$")]
    since: Option<String>,
    /// Changes per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// Where a page starts: after this seq (0 is the start). Holds only what a `cursor` can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since(i64);

impl Since {
    /// Blank is the start; otherwise 1 to 18 digits, as the document's pattern says.
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        match raw {
            None | Some("") => Ok(Self(0)),
            Some(text)
                if (1..=18).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Ok(Self(text.parse().expect("18 digits fit an i64")))
            }
            Some(_) => Err(ApiError::BadRequest {
                code: "invalid_cursor",
                message: "since is not a cursor this feed returned".to_owned(),
            }),
        }
    }
}

/// A page of changes.
#[derive(Serialize, ToSchema)]
pub struct ChangePage<'a> {
    /// The shard that holds the tenant now.
    shard: &'a str,
    /// Oldest first. An item appears once, with its last change; a bookmark may name a
    /// collection that appears later in the feed.
    changes: Vec<ChangeView<'a>>,
    /// Pass as `since` for the next page (the same cursor when nothing changed).
    cursor: String,
    /// More changes follow this page now.
    more: bool,
}

/// `bookmark` or `collection`.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Bookmark,
    Collection,
}

/// One item's last change: the item as it is now, or its tombstone.
#[derive(Serialize, ToSchema)]
pub struct ChangeView<'a> {
    /// This change's place in the feed: `since` with it resumes after it.
    cursor: String,
    kind: ChangeKind,
    id: Uuid,
    /// The item is gone: delete it, if you have it.
    deleted: bool,
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    changed_at: DateTime<Utc>,
    /// The bookmark now (a bookmark that is not deleted).
    #[serde(skip_serializing_if = "Option::is_none")]
    bookmark: Option<&'a Bookmark>,
    /// The collection now (a collection that is not deleted).
    #[serde(skip_serializing_if = "Option::is_none")]
    collection: Option<&'a Collection>,
}

impl<'a> From<&'a Changed> for ChangeView<'a> {
    fn from(c: &'a Changed) -> Self {
        let (kind, deleted, bookmark, collection) = match &c.item {
            Item::Bookmark(b) => (ChangeKind::Bookmark, false, Some(b), None),
            Item::Collection(x) => (ChangeKind::Collection, false, None, Some(x)),
            Item::DeletedBookmark => (ChangeKind::Bookmark, true, None, None),
            Item::DeletedCollection => (ChangeKind::Collection, true, None, None),
        };
        Self {
            cursor: c.seq.to_string(),
            kind,
            id: c.id,
            deleted,
            changed_at: c.changed_at,
            bookmark,
            collection,
        }
    }
}

/// The tenant's changes after `since`, read from one snapshot of its shard.
#[utoipa::path(
    get,
    path = "/api/changes",
    tag = TAG,
    params(ChangesParams),
    responses(
        (status = 200, description = "Up to `limit` changes after `since`, oldest first.", body = ChangePage),
        (status = 410, description = "`cursor_expired`: tombstones after `since` are past their retention and were purged; start again from an export, or from the start of the feed.", body = crate::web::openapi::ErrorBody),
    )
)]
async fn changes(
    Tenant(tenant): Tenant,
    ApiQuery(params): ApiQuery<ChangesParams>,
    mut db: ShardedDb,
) -> Result<Response, ApiError> {
    let since = Since::parse(params.since.as_deref())?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest {
            code: "invalid_limit",
            message: format!("limit must be between 1 and {MAX_PAGE}"),
        });
    }
    db.begin_snapshot().await?;
    let page = db
        .read(async |c| store::page(c, &tenant, since.0, limit).await)
        .await?;
    db.end_snapshot().await?;
    match page {
        Page::Expired { purged_through } => Err(ApiError::Feature(Box::new(
            Reply::new(
                StatusCode::GONE,
                "cursor_expired",
                format!(
                    "changes after this cursor were purged (tombstones through {purged_through}); \
                     start again from an export or from the start of the feed"
                ),
            )
            .detail("purged_through", purged_through.to_string()),
        ))),
        Page::Changes { changes, more } => {
            let cursor = changes.last().map_or(since.0, |c| c.seq).to_string();
            Ok(Json(ChangePage {
                shard: db.shard(),
                changes: changes.iter().map(ChangeView::from).collect(),
                cursor,
                more,
            })
            .into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_blank_or_one_to_eighteen_digits() {
        assert_eq!(Since::parse(None).unwrap(), Since(0));
        assert_eq!(Since::parse(Some("")).unwrap(), Since(0));
        assert_eq!(Since::parse(Some("0")).unwrap(), Since(0));
        assert_eq!(Since::parse(Some("42")).unwrap(), Since(42));
        assert_eq!(
            Since::parse(Some("999999999999999999")).unwrap(),
            Since(999_999_999_999_999_999)
        );
        for refused in ["-1", "+1", " 1", "1e3", "0x10", "1234567890123456789", "٣"] {
            assert!(Since::parse(Some(refused)).is_err(), "{refused:?}");
        }
    }
}
