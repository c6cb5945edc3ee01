//! How the collections feature's refusals answer: one mapping into the API's errors.

use axum::http::StatusCode;
use serde_json::json;

use super::model::BadName;
use super::store::CollectionError;
use crate::web::error::{ApiError, Reply};
use crate::web::extract::{QueryFailure, WorkError};

/// What a client is told when a collection id names nothing (malformed ids included).
pub const NO_SUCH_COLLECTION: &str = "no collection has that id";

/// A request body whose name broke its rule.
pub fn bad_name(e: BadName) -> ApiError {
    let message = format!("name: {e}");
    ApiError::Feature(Box::new(
        Reply::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
            message,
        )
        .detail(
            "fields",
            json!([{"field": "name", "message": e.to_string()}]),
        ),
    ))
}

impl QueryFailure for CollectionError {
    fn database_error(&self) -> Option<&diesel::result::Error> {
        match self {
            CollectionError::Db(e) => Some(e),
            _ => None,
        }
    }

    fn into_database_error(self) -> Result<diesel::result::Error, Self> {
        match self {
            CollectionError::Db(e) => Ok(e),
            own => Err(own),
        }
    }
}

impl WorkError for CollectionError {
    fn into_api(self) -> ApiError {
        let message = self.to_string();
        let reply = match self {
            CollectionError::NotFound => return ApiError::NotFound(NO_SUCH_COLLECTION),
            CollectionError::NoSuchParent => {
                Reply::new(StatusCode::NOT_FOUND, "no_such_parent", message)
            }
            CollectionError::Cycle => Reply::new(StatusCode::CONFLICT, "collection_cycle", message),
            CollectionError::TooDeep { depth } => Reply::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "collection_too_deep",
                message,
            )
            .detail("depth", depth),
            CollectionError::DuplicateName { existing } => {
                Reply::new(StatusCode::CONFLICT, "duplicate_collection_name", message)
                    .detail("id", existing.to_string())
            }
            CollectionError::NotEmpty {
                collections,
                bookmarks,
            } => Reply::new(StatusCode::CONFLICT, "collection_not_empty", message)
                .detail("collections", collections)
                .detail("bookmarks", bookmarks),
            CollectionError::Full => Reply::new(StatusCode::CONFLICT, "collection_limit", message),
            CollectionError::Db(e) => return e.into_api(),
        };
        ApiError::Feature(Box::new(reply))
    }
}
