//! What a list of bookmarks may ask for: its filters, search and page, parsed from the
//! query string into what the store takes, every refusal naming its parameter.

use serde::Deserialize;
use utoipa::IntoParams;

use super::{DEFAULT_PAGE, MAX_PAGE};
use crate::bookmarks::store::{CollectionFilter, ListQuery};
use crate::web::error::ApiError;
use crate::web::extract::{QueryFlag, blank_or_bool, blank_or_uuid, refuse_nul};

/// The list's filters and page. Blank values mean "not given" (HTML forms send them); the
/// document states exactly what each parameter takes, blank included.
// The limits are literals (the derive takes no constants); a test holds them to `MAX_PAGE`
// and `MAX_SEARCH_CHARS`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only bookmarks with this tag (compared lower-cased).
    #[param(pattern = "^[^\\u0000]*$")]
    pub tag: Option<String>,
    /// Full-text search, in web-search syntax (`words`, `"a phrase"`, `-excluded`, `or`);
    /// at most 256 characters, and it must look for something, not only exclude.
    #[param(max_length = 256, pattern = "^[^\\u0000]*$")]
    pub q: Option<String>,
    /// Page size, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// A `next_cursor` from the previous page (a hyphenated UUID).
    #[param(
        pattern = "^([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})?$"
    )]
    pub cursor: Option<String>,
    /// Only bookmarks filed in this collection, by its id (a hyphenated UUID; 404
    /// `no_such_collection` when the tenant has none with that id).
    #[param(
        pattern = "^([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})?$"
    )]
    pub collection: Option<String>,
    /// With `collection`: also the bookmarks of every collection nested in it.
    #[serde(default, deserialize_with = "blank_or_bool")]
    #[param(value_type = Option<QueryFlag>, inline)]
    pub recursive: Option<bool>,
    /// Only unread bookmarks (`true`) or only read ones (`false`).
    #[serde(default, deserialize_with = "blank_or_bool")]
    #[param(value_type = Option<QueryFlag>, inline)]
    pub unread: Option<bool>,
    /// Only archived bookmarks (`true`) or only those not archived (`false`).
    #[serde(default, deserialize_with = "blank_or_bool")]
    #[param(value_type = Option<QueryFlag>, inline)]
    pub archived: Option<bool>,
    /// Only favourites (`true`) or only the others (`false`).
    #[serde(default, deserialize_with = "blank_or_bool")]
    #[param(value_type = Option<QueryFlag>, inline)]
    pub favorite: Option<bool>,
}

impl ListParams {
    /// Checks the page parameters; blank `tag`/`q`/`cursor` mean "not given" (HTML forms send
    /// them).
    pub fn parse(self) -> Result<ListQuery, ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::BadRequest {
                code: "invalid_limit",
                message: format!("limit must be between 1 and {MAX_PAGE}"),
            });
        }
        let cursor = blank_or_uuid(self.cursor.as_deref()).map_err(|_| ApiError::BadRequest {
            code: "invalid_cursor",
            message: "cursor is not a value returned as next_cursor".to_owned(),
        })?;
        let collection = blank_or_uuid(self.collection.as_deref())
            .map_err(|_| ApiError::BadRequest {
                code: "invalid_collection",
                message: "collection is not a collection id".to_owned(),
            })?
            .map(|id| CollectionFilter {
                id,
                recursive: self.recursive.unwrap_or(false),
            });
        let clean = |s: Option<String>| s.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        refuse_nul("tag", self.tag.as_deref())?;
        refuse_nul("q", self.q.as_deref())?;
        // Bounded as sent, as the document bounds it, before trimming.
        if let Some(q) = &self.q
            && q.chars().count() > MAX_SEARCH_CHARS
        {
            return Err(ApiError::BadRequest {
                code: "invalid_query",
                message: SearchRefused::TooLong.to_string(),
            });
        }
        let q = clean(self.q);
        if let Some(q) = &q {
            check_search(q).map_err(|e| ApiError::BadRequest {
                code: "invalid_query",
                message: e.to_string(),
            })?;
        }
        Ok(ListQuery {
            tag: clean(self.tag).map(|t| t.to_lowercase()),
            q,
            limit,
            cursor,
            collection,
            unread: self.unread,
            archived: self.archived,
            favorite: self.favorite,
        })
    }
}

/// Longest accepted search, in characters: longer ones cost the database more to parse
/// and match, and nobody types them.
pub const MAX_SEARCH_CHARS: usize = 256;

/// Why a search was refused; the message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SearchRefused {
    #[error("q is longer than {MAX_SEARCH_CHARS} characters")]
    TooLong,
    #[error("q must contain a word or phrase to find, not only words to leave out")]
    OnlyExclusions,
}

/// Refuses a search that is too long, or that only excludes words (`-zzzz`): that would
/// match nearly every bookmark without narrowing anything, and cost a scan of the tenant.
fn check_search(q: &str) -> Result<(), SearchRefused> {
    if q.chars().count() > MAX_SEARCH_CHARS {
        return Err(SearchRefused::TooLong);
    }
    let looks_for_something = search_terms(q).any(|(negated, term)| {
        !negated && !term.eq_ignore_ascii_case("or") && term.chars().any(char::is_alphanumeric)
    });
    if !looks_for_something {
        return Err(SearchRefused::OnlyExclusions);
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
