//! Browsing every tenant's bookmarks across all shards, newest first.
//!
//! Each shard returns its own first `limit + 1` rows after the cursor in one total order,
//! `(created_at, id)`; merging those lists and keeping the first `limit` gives exactly the
//! page a single database would have returned, because no row of any shard that belongs on
//! this page can be beyond its shard's first `limit + 1`. The cursor is a position in that
//! order, not an offset, so pages stay correct while rows are added or moved between shards.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::bookmarks::model::Bookmark;
use crate::bookmarks::store::{self, AllTenantsQuery, Direction, Position};
use crate::sharding::cross_shard::{Coverage, CrossShard};
use crate::web::error::ApiError;

pub const DEFAULT_PAGE: i64 = 20;
pub const MAX_PAGE: i64 = 100;

/// A position in the browse order, written `<microseconds since epoch>_<id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor(pub Position);

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.0.created_at.timestamp_micros(), self.0.id)
    }
}

impl FromStr for Cursor {
    type Err = ApiError;
    fn from_str(s: &str) -> Result<Self, ApiError> {
        let bad = || ApiError::BadRequest {
            code: "invalid_cursor",
            message: "cursor must be a value from next_cursor or prev_cursor".to_owned(),
        };
        let (micros, id) = s.split_once('_').ok_or_else(bad)?;
        let micros: i64 = micros.parse().map_err(|_| bad())?;
        let created_at = DateTime::<Utc>::from_timestamp_micros(micros).ok_or_else(bad)?;
        let id = Uuid::parse_str(id).map_err(|_| bad())?;
        Ok(Cursor(Position { created_at, id }))
    }
}

impl Serialize for Cursor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Query parameters of the browse section and of `/admin/api/bookmarks`.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BrowseParams {
    /// Older than this (the next page): a `next_cursor`.
    pub cursor: Option<String>,
    /// Newer than this (the previous page): a `prev_cursor`. Not with `cursor`.
    pub prev: Option<String>,
    /// Only this tenant's bookmarks.
    pub tenant: Option<String>,
    /// Only bookmarks with this tag.
    #[param(pattern = "^[^\\u0000]*$")]
    pub tag: Option<String>,
    /// Page size, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// A checked browse request.
#[derive(Debug, Clone)]
pub struct Browse {
    pub query: AllTenantsQuery,
    pub limit: i64,
}

impl BrowseParams {
    pub fn parse(&self) -> Result<Browse, ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::BadRequest {
                code: "invalid_limit",
                message: format!("limit must be between 1 and {MAX_PAGE}"),
            });
        }
        let from = match (given(&self.cursor), given(&self.prev)) {
            (Some(_), Some(_)) => {
                return Err(ApiError::BadRequest {
                    code: "invalid_cursor",
                    message: "give cursor (older) or prev (newer), not both".to_owned(),
                });
            }
            (Some(c), None) => Some((c.parse::<Cursor>()?.0, Direction::Older)),
            (None, Some(c)) => Some((c.parse::<Cursor>()?.0, Direction::Newer)),
            (None, None) => None,
        };
        crate::web::extract::refuse_nul("tag", given(&self.tag))?;
        let tenant = given(&self.tenant)
            .map(|t| super::state::tenant_param(t).map(|t| t.to_string()))
            .transpose()?;
        Ok(Browse {
            query: AllTenantsQuery {
                tenant,
                tag: given(&self.tag).map(str::to_owned),
                from,
                // One more than a page, to know whether there is another.
                limit: limit + 1,
            },
            limit,
        })
    }
}

/// One row of the browse table.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BrowseItem {
    pub shard: String,
    pub tenant: String,
    pub id: Uuid,
    pub url: String,
    pub title: String,
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BrowsePage {
    pub items: Vec<BrowseItem>,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    #[schema(value_type = Option<String>)]
    pub next_cursor: Option<Cursor>,
    /// Pass as `prev` for the previous (newer) page; absent on the first page.
    #[schema(value_type = Option<String>)]
    pub prev_cursor: Option<Cursor>,
    pub shards: Vec<Coverage>,
    /// False when a shard did not answer: its rows are missing from this page.
    pub complete: bool,
}

/// One page of the merged, newest-first order across every shard that answers.
pub async fn page(cross: &CrossShard, browse: &Browse) -> BrowsePage {
    let query = browse.query.clone();
    let fan_out = cross
        .read(move |conn| {
            let query = query.clone();
            Box::pin(async move { store::all_tenants(conn, &query).await })
        })
        .await;
    let shards = fan_out.coverage();
    let complete = fan_out.answers.iter().all(|a| a.outcome.is_ok());
    let mut rows: Vec<(String, Bookmark)> = fan_out
        .into_values()
        .flat_map(|(shard, rows)| rows.into_iter().map(move |b| (shard.clone(), b)))
        .collect();
    let newer = matches!(browse.query.from, Some((_, Direction::Newer)));
    // Merge in the direction read, newest first for `cursor` and oldest first for `prev`.
    rows.sort_by(|a, b| {
        let order = Position::of(&b.1).cmp(&Position::of(&a.1));
        if newer { order.reverse() } else { order }
    });
    let more = rows.len() as i64 > browse.limit;
    rows.truncate(browse.limit as usize);
    if newer {
        rows.reverse();
    }
    let first = rows.first().map(|(_, b)| Cursor(Position::of(b)));
    let last = rows.last().map(|(_, b)| Cursor(Position::of(b)));
    let (next_cursor, prev_cursor) = match browse.query.from {
        None => (last.filter(|_| more), None),
        Some((from, Direction::Older)) => (
            last.filter(|_| more),
            // Everything newer than this page is the page we came from.
            Some(first.unwrap_or(Cursor(from))),
        ),
        Some((from, Direction::Newer)) => {
            (Some(last.unwrap_or(Cursor(from))), first.filter(|_| more))
        }
    };
    let items = rows
        .into_iter()
        .map(|(shard, b)| BrowseItem {
            shard,
            tenant: b.tenant_id,
            id: b.id,
            url: b.url,
            title: b.title,
            tags: b.tags,
            created_at: b.created_at,
        })
        .collect();
    BrowsePage {
        items,
        next_cursor,
        prev_cursor,
        shards,
        complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_itself_and_junk_is_refused() {
        let c = Cursor(Position {
            created_at: DateTime::<Utc>::from_timestamp_micros(1_764_554_400_123_456).unwrap(),
            id: Uuid::now_v7(),
        });
        assert_eq!(c.to_string().parse::<Cursor>().unwrap(), c);
        for junk in [
            "",
            "12",
            "x_y",
            "12_not-a-uuid",
            "_0193a000-0000-7000-8000-000000000000",
        ] {
            assert!(junk.parse::<Cursor>().is_err(), "{junk:?}");
        }
    }
}
