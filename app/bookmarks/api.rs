//! The JSON API for the request's tenant. `/api/bookmarks` reads and writes both use the
//! shard primary, so a tenant always sees its own writes at once (read-your-own-writes);
//! `/api/tags` is an aggregate that tolerates lag and reads from the shard's replica.

use axum::extract::FromRef;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::{BookmarkError, BookmarkPath, NO_SUCH_BOOKMARK};
use super::model::{Bookmark, NewBookmarkInput, PatchInput};
use super::store::{self, ListQuery, Listed, StoreError};
use crate::sharding::access::Shards;
use crate::web::error::ApiError;
use crate::web::extract::{ApiJson, ApiQuery, QueryFailure, ShardedDb, ShardedReadDb, Tenant};

pub const DEFAULT_PAGE: i64 = 20;
pub const MAX_PAGE: i64 = 100;

/// The tenant's JSON API.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Shards: FromRef<S>,
{
    Router::new()
        .route("/api/bookmarks", get(list).post(create))
        .route(
            "/api/bookmarks/{id}",
            get(show).patch(update).delete(remove),
        )
        .route("/api/tags", get(tags))
}

/// A bookmark as the API shows it, with the shard that holds it.
#[derive(Serialize)]
pub struct BookmarkView<'a> {
    pub shard: &'a str,
    #[serde(flatten)]
    pub bookmark: &'a Bookmark,
}

#[derive(Serialize)]
struct ListView<'a> {
    shard: &'a str,
    tenant: &'a str,
    items: &'a [Listed],
    next_cursor: Option<Uuid>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    pub tag: Option<String>,
    pub q: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

impl ListParams {
    /// Checks the page parameters; blank `tag`/`q`/`cursor` mean "not given" (HTML forms send them).
    pub fn parse(self) -> Result<ListQuery, ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::BadRequest {
                code: "invalid_limit",
                message: format!("limit must be between 1 and {MAX_PAGE}"),
            });
        }
        let cursor = match self
            .cursor
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
        {
            None => None,
            Some(c) => Some(Uuid::parse_str(c).map_err(|_| ApiError::BadRequest {
                code: "invalid_cursor",
                message: "cursor is not a value returned as next_cursor".to_owned(),
            })?),
        };
        let clean = |s: Option<String>| s.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let q = clean(self.q);
        if let Some(q) = &q {
            check_search(q).map_err(|message| ApiError::BadRequest {
                code: "invalid_query",
                message,
            })?;
        }
        Ok(ListQuery {
            tag: clean(self.tag).map(|t| t.to_lowercase()),
            q,
            limit,
            cursor,
        })
    }
}

/// Longest accepted search, in characters: longer ones cost the database more to parse
/// and match, and nobody types them.
pub const MAX_SEARCH_CHARS: usize = 256;

/// Refuses a search that is too long, or that only excludes words (`-zzzz`): that would
/// match nearly every bookmark without narrowing anything, and cost a scan of the tenant.
fn check_search(q: &str) -> Result<(), String> {
    if q.chars().count() > MAX_SEARCH_CHARS {
        return Err(format!("q is longer than {MAX_SEARCH_CHARS} characters"));
    }
    let looks_for_something = search_terms(q).any(|(negated, term)| {
        !negated && !term.eq_ignore_ascii_case("or") && term.chars().any(char::is_alphanumeric)
    });
    if !looks_for_something {
        return Err(
            "q must contain a word or phrase to find, not only words to leave out".to_owned(),
        );
    }
    Ok(())
}

/// The terms of a web-search query as `websearch_to_tsquery` reads them: words and quoted
/// phrases, each with whether it is negated (`-word`, `-"a phrase"`).
fn search_terms(q: &str) -> impl Iterator<Item = (bool, &str)> {
    let mut rest = q;
    std::iter::from_fn(move || {
        rest = rest.trim_start();
        if rest.is_empty() {
            return None;
        }
        let negated = rest.starts_with('-');
        if negated {
            rest = &rest[1..];
        }
        let (term, after) = match rest.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        rest = after;
        Some((negated, term))
    })
}

/// Store errors on a known shard: the shard classifies database errors, a duplicate stays a 409.
impl QueryFailure for StoreError {
    fn into_api(self, classify: &dyn Fn(diesel::result::Error) -> ApiError) -> ApiError {
        match self {
            StoreError::Db(e) => classify(e),
            StoreError::Duplicate { existing } => BookmarkError::DuplicateUrl { existing }.into(),
        }
    }
}

fn view(db: &ShardedDb, bookmark: &Bookmark) -> Response {
    Json(BookmarkView {
        shard: db.shard(),
        bookmark,
    })
    .into_response()
}

async fn create(
    Tenant(tenant): Tenant,
    mut db: ShardedDb,
    ApiJson(input): ApiJson<NewBookmarkInput>,
) -> Result<Response, ApiError> {
    let draft = input.validate().map_err(BookmarkError::Validation)?;
    let created = db
        .write(async |c| store::insert(c, &tenant, &draft).await)
        .await?;
    Ok((StatusCode::CREATED, view(&db, &created)).into_response())
}

async fn list(
    Tenant(tenant): Tenant,
    ApiQuery(params): ApiQuery<ListParams>,
    mut db: ShardedDb,
) -> Result<Response, ApiError> {
    let query = params.parse()?;
    let page = db
        .read(async |c| store::list(c, &tenant, &query).await)
        .await?;
    Ok(Json(ListView {
        shard: db.shard(),
        tenant: tenant.as_str(),
        items: &page.items,
        next_cursor: page.next_cursor,
    })
    .into_response())
}

async fn show(
    Tenant(tenant): Tenant,
    BookmarkPath(id): BookmarkPath<Uuid>,
    mut db: ShardedDb,
) -> Result<Response, ApiError> {
    match db.read(async |c| store::get(c, &tenant, id).await).await? {
        Some(b) => Ok(view(&db, &b)),
        None => Err(ApiError::NotFound(NO_SUCH_BOOKMARK)),
    }
}

async fn update(
    Tenant(tenant): Tenant,
    BookmarkPath(id): BookmarkPath<Uuid>,
    mut db: ShardedDb,
    ApiJson(input): ApiJson<PatchInput>,
) -> Result<Response, ApiError> {
    let patch = input.validate().map_err(BookmarkError::Validation)?;
    match db
        .write(async |c| store::update(c, &tenant, id, &patch).await)
        .await?
    {
        Some(b) => Ok(view(&db, &b)),
        None => Err(ApiError::NotFound(NO_SUCH_BOOKMARK)),
    }
}

async fn remove(
    Tenant(tenant): Tenant,
    BookmarkPath(id): BookmarkPath<Uuid>,
    mut db: ShardedDb,
) -> Result<Response, ApiError> {
    if db
        .write(async |c| store::delete(c, &tenant, id).await)
        .await?
    {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::NotFound(NO_SUCH_BOOKMARK))
    }
}

/// The tenant's tag counts. An aggregate that tolerates replica lag, so it takes the
/// replica-aware read path (and says which server answered).
async fn tags(Tenant(tenant): Tenant, mut db: ShardedReadDb) -> Result<Response, ApiError> {
    let counts = db
        .read(async |c| store::tag_counts(c, &tenant).await)
        .await?;
    let tags: Vec<serde_json::Value> = counts
        .into_iter()
        .map(|(tag, count)| serde_json::json!({ "tag": tag, "count": count }))
        .collect();
    Ok(Json(serde_json::json!({
        "shard": db.shard(),
        "served_by": if db.on_replica() { "replica" } else { "primary" },
        "tags": tags,
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_must_look_for_something() {
        for ok in [
            "zeppelin",
            "-zzzz zeppelin",
            "\"a phrase\"",
            "a or b",
            "x -y",
        ] {
            assert_eq!(check_search(ok), Ok(()), "{ok:?}");
        }
        for refused in ["-zzzz", "-a -\"b c\"", "or", "- -", "-\"only\""] {
            assert!(check_search(refused).is_err(), "{refused:?}");
        }
        assert!(check_search(&"a".repeat(MAX_SEARCH_CHARS + 1)).is_err());
        assert_eq!(check_search(&"a".repeat(MAX_SEARCH_CHARS)), Ok(()));
    }
}
