//! The bookmark form: its page, what a browser sends, and what the page says when the form
//! was not saved (every field problem at once, a URL the tenant already saved, a collection
//! deleted meanwhile, or another error).

use askama::Template;
use askama_web::WebTemplate;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use crate::bookmarks::error::BookmarkError;
use crate::bookmarks::model::{FieldError, States};
use crate::bookmarks::store::StoreError;
use crate::collections::model::Outlined;
use crate::web::error::ApiError;

/// One collection in a picker.
pub(super) struct Choice {
    pub(super) id: Uuid,
    pub(super) path: String,
    pub(super) selected: bool,
}

pub(super) fn choices(all: &[Outlined], selected: Option<Uuid>) -> Vec<Choice> {
    all.iter()
        .map(|o| Choice {
            id: o.id,
            path: o.path.clone(),
            selected: Some(o.id) == selected,
        })
        .collect()
}

#[derive(Template, WebTemplate, Default)]
#[template(path = "form.html")]
pub(super) struct FormPage {
    pub(super) csrf: String,
    pub(super) tenant: String,
    pub(super) id: Option<Uuid>,
    pub(super) url: String,
    pub(super) title: String,
    pub(super) tags: String,
    pub(super) notes: String,
    pub(super) collections: Vec<Choice>,
    pub(super) unread: bool,
    pub(super) favorite: bool,
    pub(super) archived: bool,
    pub(super) url_error: Option<String>,
    pub(super) title_error: Option<String>,
    pub(super) tags_error: Option<String>,
    pub(super) notes_error: Option<String>,
    pub(super) collection_error: Option<String>,
    pub(super) general_error: Option<String>,
}

impl FormPage {
    pub(super) fn with_errors(mut self, errors: &[FieldError]) -> Self {
        for e in errors {
            let slot = match e.field {
                "url" => &mut self.url_error,
                "title" => &mut self.title_error,
                "tags" => &mut self.tags_error,
                "collection_id" => &mut self.collection_error,
                _ => &mut self.notes_error,
            };
            *slot = Some(e.message.clone());
        }
        self
    }
}

#[derive(Deserialize)]
pub(super) struct BookmarkForm {
    #[serde(default)]
    pub(super) url: String,
    #[serde(default)]
    pub(super) title: String,
    #[serde(default)]
    pub(super) tags: String,
    #[serde(default)]
    pub(super) notes: String,
    /// A collection's id, or blank for none.
    #[serde(default)]
    pub(super) collection_id: String,
    // Checkboxes: sent when ticked, absent when not.
    pub(super) unread: Option<String>,
    pub(super) favorite: Option<String>,
    pub(super) archived: Option<String>,
    #[serde(default)]
    pub(super) csrf: String,
}

impl BookmarkForm {
    pub(super) fn states(&self) -> States {
        States {
            unread: self.unread.is_some(),
            favorite: self.favorite.is_some(),
            archived: self.archived.is_some(),
        }
    }

    /// The picked collection: blank is none; anything but an id is a field error.
    pub(super) fn collection(&self) -> Result<Option<Uuid>, FieldError> {
        match self.collection_id.trim() {
            "" => Ok(None),
            id => Uuid::parse_str(id).map(Some).map_err(|_| FieldError {
                field: "collection_id",
                message: "collection_id is not a collection id".to_owned(),
            }),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    pub(super) csrf: String,
}

/// Why a form was not saved.
pub(super) enum FormFailure {
    Bookmark(BookmarkError),
    Other(ApiError),
}

/// Runs a store write, keeping a duplicate URL (or a collection deleted meanwhile) apart so
/// that the form can say so.
pub(super) fn duplicate_apart<T>(
    result: Result<T, StoreError>,
) -> Result<Result<T, BookmarkError>, StoreError> {
    match result {
        Err(StoreError::Duplicate { existing }) => {
            Ok(Err(BookmarkError::DuplicateUrl { existing }))
        }
        Err(StoreError::NoSuchCollection) => Ok(Err(BookmarkError::NoSuchCollection)),
        other => other.map(Ok),
    }
}

/// The form checked whole: the bookmark's own fields (`validated`) and the picked
/// collection, every problem named at once.
pub(super) fn checked<T>(
    validated: Result<T, Vec<FieldError>>,
    form: &BookmarkForm,
) -> Result<(T, Option<Uuid>), FormFailure> {
    match (validated, form.collection()) {
        (Ok(value), Ok(collection)) => Ok((value, collection)),
        (value, collection) => {
            let mut fields = value.err().unwrap_or_default();
            fields.extend(collection.err());
            Err(FormFailure::Bookmark(BookmarkError::Validation(fields)))
        }
    }
}

/// A write's outcome for a form: saved, or why not.
pub(super) fn saved<T, E: Into<ApiError>>(
    outcome: Result<Result<T, BookmarkError>, E>,
) -> Result<T, FormFailure> {
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(FormFailure::Bookmark(e)),
        Err(e) => Err(FormFailure::Other(e.into())),
    }
}

/// A form re-rendered with its problems; the status says what kind of failure it was.
pub(super) fn form_failure(page: FormPage, err: FormFailure) -> Response {
    match err {
        FormFailure::Bookmark(BookmarkError::Validation(fields)) => {
            (StatusCode::UNPROCESSABLE_ENTITY, page.with_errors(&fields)).into_response()
        }
        FormFailure::Bookmark(BookmarkError::DuplicateUrl { existing }) => {
            let message = format!("You already saved this URL (bookmark {existing}).");
            (
                StatusCode::CONFLICT,
                FormPage {
                    general_error: Some(message),
                    ..page
                },
            )
                .into_response()
        }
        FormFailure::Bookmark(BookmarkError::NoSuchCollection) => (
            StatusCode::NOT_FOUND,
            FormPage {
                general_error: Some("That collection no longer exists.".to_owned()),
                ..page
            },
        )
            .into_response(),
        FormFailure::Other(other) => other.into_response(),
    }
}
