//! The bookmarks feature's own errors and how they answer: a body that failed validation
//! (422, every field's problem) and a URL the tenant has saved already (409, with the id of
//! the saved bookmark, which makes a repeated create safe to retry).

use axum::extract::FromRequestParts;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::model::FieldError;
use crate::web::error::{ApiError, Reply};

/// What a client is told when a bookmark id names nothing (malformed ids included).
pub const NO_SUCH_BOOKMARK: &str = "no bookmark has that id";

#[derive(Debug, thiserror::Error)]
pub enum BookmarkError {
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("this tenant already has a bookmark for that URL")]
    DuplicateUrl { existing: Uuid },
    #[error("no collection of this tenant has that id")]
    NoSuchCollection,
}

impl From<BookmarkError> for ApiError {
    fn from(e: BookmarkError) -> Self {
        let reply = match &e {
            BookmarkError::Validation(fields) => Reply::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                fields
                    .iter()
                    .map(|f| f.message.clone())
                    .collect::<Vec<_>>()
                    .join("; "),
            )
            .detail(
                "fields",
                serde_json::to_value(fields).expect("field errors serialize"),
            ),
            BookmarkError::DuplicateUrl { existing } => {
                Reply::new(StatusCode::CONFLICT, "duplicate_url", e.to_string())
                    .detail("id", existing.to_string())
            }
            BookmarkError::NoSuchCollection => {
                Reply::new(StatusCode::NOT_FOUND, "no_such_collection", e.to_string())
            }
        };
        ApiError::Feature(Box::new(reply))
    }
}

/// A bookmark id from the path. A malformed one is simply not found.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(NoSuchBookmark))]
pub struct BookmarkPath<T>(pub T);

/// The path did not hold a bookmark id.
pub struct NoSuchBookmark;

impl From<PathRejection> for NoSuchBookmark {
    fn from(_: PathRejection) -> Self {
        NoSuchBookmark
    }
}

impl IntoResponse for NoSuchBookmark {
    fn into_response(self) -> Response {
        ApiError::NotFound(NO_SUCH_BOOKMARK).into_response()
    }
}
