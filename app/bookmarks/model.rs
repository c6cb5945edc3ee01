//! Bookmark types: rows as stored, and drafts that have passed validation.
//!
//! `BookmarkDraft` and `BookmarkPatch` can only be built by parsing user input, so every
//! value that reaches the database already satisfies the documented limits.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::schema::bookmarks;
// Postgres text cannot hold NUL: each field refuses it by name rather than failing in the
// database.
use crate::web::extract::NUL_MESSAGE;

pub const MAX_URL_BYTES: usize = 2048;
pub const MAX_TITLE_CHARS: usize = 300;
pub const MAX_NOTES_CHARS: usize = 10_000;
pub const MAX_TAGS: usize = 20;
pub const MAX_TAG_CHARS: usize = 40;
/// Entries a tag list may have before duplicates and empty ones are dropped.
pub const MAX_RAW_TAGS: usize = 5 * MAX_TAGS;

#[derive(Debug, Clone, Queryable, Selectable, Serialize, utoipa::ToSchema)]
#[diesel(table_name = bookmarks)]
pub struct Bookmark {
    #[serde(skip)]
    pub tenant_id: String,
    pub id: Uuid,
    pub url: String,
    pub title: String,
    pub notes: String,
    /// Lower-cased, de-duplicated, in the order first given.
    pub tags: Vec<String>,
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    pub updated_at: DateTime<Utc>,
    /// The collection it is filed in; `null` when it is in none.
    pub collection_id: Option<Uuid>,
    /// Saved to read later and not read yet.
    pub unread: bool,
    /// Put away: kept, out of the way.
    pub archived: bool,
    pub favorite: bool,
    /// The member who saved it; `null` for bookmarks saved before the tenant had members,
    /// or by a trusted caller acting for no member.
    pub created_by: Option<Uuid>,
}

/// What a client sends to create a bookmark (also the HTML form's fields).
// The schema's limits are literals (the derive takes no constants); a test holds them to
// the constants above, which are what validation enforces.
#[derive(Debug, Default, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBookmarkInput {
    /// An absolute `http://` or `https://` address with a host, at most 2048 bytes as sent;
    /// stored trimmed. A tenant saves a URL once: a repeat answers 409 with the saved one's
    /// id.
    #[schema(
        min_length = 1,
        max_length = 2048,
        pattern = "^\\s*[Hh][Tt][Tt][Pp][Ss]?://[^\\s\\u0000/?#]+[^\\u0000]*$"
    )]
    pub url: String,
    /// At most 300 characters as sent; stored trimmed.
    #[serde(default)]
    #[schema(max_length = 300, pattern = "^[^\\u0000]*$")]
    pub title: String,
    /// At most 10 000 characters.
    #[serde(default)]
    #[schema(max_length = 10000, pattern = "^[^\\u0000]*$")]
    pub notes: String,
    /// Each at most 40 characters as sent; stored trimmed, lower-cased and de-duplicated,
    /// empty ones dropped. At most 20 distinct tags; a list of more than 100 entries is
    /// refused unread.
    #[serde(default)]
    #[schema(max_items = 100, inline, value_type = Vec<Tag>)]
    pub tags: Vec<String>,
    /// The tenant's collection to file it in (absent or `null`: none).
    #[serde(default)]
    pub collection_id: Option<Uuid>,
    /// Saved to read later (default false).
    #[serde(default)]
    pub unread: bool,
    /// Put away (default false).
    #[serde(default)]
    pub archived: bool,
    /// Marked as a favourite (default false).
    #[serde(default)]
    pub favorite: bool,
}

/// One tag as sent: trimmed and lower-cased before it is stored. Only its schema is used.
pub struct Tag;

impl utoipa::PartialSchema for Tag {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(MAX_TAG_CHARS))
            .pattern(Some("^[^\\u0000]*$"))
            .into()
    }
}

impl utoipa::ToSchema for Tag {}

/// What a client sends to change a bookmark: absent fields stay as they are; each present
/// one follows the rules of [`NewBookmarkInput`].
#[derive(Debug, Default, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchInput {
    #[schema(
        min_length = 1,
        max_length = 2048,
        pattern = "^\\s*[Hh][Tt][Tt][Pp][Ss]?://[^\\s\\u0000/?#]+[^\\u0000]*$"
    )]
    pub url: Option<String>,
    #[schema(max_length = 300, pattern = "^[^\\u0000]*$")]
    pub title: Option<String>,
    #[schema(max_length = 10000, pattern = "^[^\\u0000]*$")]
    pub notes: Option<String>,
    #[schema(max_items = 100, inline, value_type = Option<Vec<Tag>>)]
    pub tags: Option<Vec<String>>,
    /// The collection to file it in; `null` takes it out of its collection.
    #[serde(default, deserialize_with = "crate::collections::model::present")]
    #[schema(value_type = Option<Uuid>, nullable)]
    pub collection_id: Option<Option<Uuid>>,
    pub unread: Option<bool>,
    pub archived: Option<bool>,
    pub favorite: Option<bool>,
}

/// What a client sends to rename a tag across the tenant's bookmarks.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TagRenameInput {
    /// The tag to rename, at most 40 characters as sent; compared trimmed and lower-cased,
    /// as tags are stored.
    #[schema(max_length = 40, pattern = "^[^\\u0000]*$")]
    pub from: String,
    /// Its new name. A bookmark that has both ends with `to` once: renaming onto an
    /// existing tag merges the two.
    #[schema(max_length = 40, pattern = "^[^\\u0000]*$")]
    pub to: String,
}

/// A validated tag rename: two different tags, as they are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagRename {
    pub from: String,
    pub to: String,
}

impl TagRenameInput {
    pub fn validate(self) -> Result<TagRename, Vec<FieldError>> {
        let mut errors = Vec::new();
        let from = check_tag("from", &self.from, &mut errors);
        let to = check_tag("to", &self.to, &mut errors);
        if errors.is_empty() && from == to {
            push(&mut errors, "to", "to is the same tag as from");
        }
        if errors.is_empty() {
            Ok(TagRename { from, to })
        } else {
            Err(errors)
        }
    }
}

/// One tag named by `field`: trimmed and lower-cased as tags are stored, and not blank.
fn check_tag(field: &'static str, raw: &str, errors: &mut Vec<FieldError>) -> String {
    let tag = raw.trim().to_lowercase();
    if tag.is_empty() {
        push(errors, field, format!("{field} must name a tag"));
    } else if tag.contains('\0') {
        push(errors, field, format!("{field} {NUL_MESSAGE}"));
    } else if raw.chars().count() > MAX_TAG_CHARS {
        push(
            errors,
            field,
            format!("{field} is longer than {MAX_TAG_CHARS} characters"),
        );
    }
    tag
}

/// A validated bookmark ready to insert.
#[derive(Debug, Clone)]
pub struct BookmarkDraft {
    pub url: String,
    pub title: String,
    pub notes: String,
    pub tags: Vec<String>,
    pub collection_id: Option<Uuid>,
    pub states: States,
}

/// A bookmark's reading states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct States {
    pub unread: bool,
    pub archived: bool,
    pub favorite: bool,
}

/// A validated partial update: the fields given (`store::update` keeps the others).
#[derive(Debug, Clone, Default)]
pub struct BookmarkPatch {
    pub url: Option<String>,
    pub title: Option<String>,
    pub notes: Option<String>,
    pub tags: Option<Vec<String>>,
    /// `Some(None)`: out of its collection.
    pub collection_id: Option<Option<Uuid>>,
    pub unread: Option<bool>,
    pub archived: Option<bool>,
    pub favorite: Option<bool>,
}

impl BookmarkPatch {
    pub fn is_empty(&self) -> bool {
        self.url.is_none()
            && self.title.is_none()
            && self.notes.is_none()
            && self.tags.is_none()
            && self.collection_id.is_none()
            && self.unread.is_none()
            && self.archived.is_none()
            && self.favorite.is_none()
    }
}

/// One field that failed validation, named as the client spelled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
}

impl NewBookmarkInput {
    pub fn validate(self) -> Result<BookmarkDraft, Vec<FieldError>> {
        let mut errors = Vec::new();
        let url = check_url(&self.url, &mut errors);
        let title = check_title(&self.title, &mut errors);
        let notes = check_notes(&self.notes, &mut errors);
        let tags = check_tags(&self.tags, &mut errors);
        if errors.is_empty() {
            Ok(BookmarkDraft {
                url,
                title,
                notes,
                tags,
                collection_id: self.collection_id,
                states: States {
                    unread: self.unread,
                    archived: self.archived,
                    favorite: self.favorite,
                },
            })
        } else {
            Err(errors)
        }
    }
}

impl PatchInput {
    pub fn validate(self) -> Result<BookmarkPatch, Vec<FieldError>> {
        let mut errors = Vec::new();
        let patch = BookmarkPatch {
            url: self.url.map(|u| check_url(&u, &mut errors)),
            title: self.title.map(|t| check_title(&t, &mut errors)),
            notes: self.notes.map(|n| check_notes(&n, &mut errors)),
            tags: self.tags.map(|t| check_tags(&t, &mut errors)),
            collection_id: self.collection_id,
            unread: self.unread,
            archived: self.archived,
            favorite: self.favorite,
        };
        if errors.is_empty() {
            Ok(patch)
        } else {
            Err(errors)
        }
    }
}

fn push(errors: &mut Vec<FieldError>, field: &'static str, message: impl Into<String>) {
    errors.push(FieldError {
        field,
        message: message.into(),
    });
}

fn check_url(raw: &str, errors: &mut Vec<FieldError>) -> String {
    let trimmed = raw.trim();
    if trimmed.contains('\0') {
        push(errors, "url", format!("url {NUL_MESSAGE}"));
    } else if trimmed.is_empty() {
        push(errors, "url", "url is required");
    } else if raw.len() > MAX_URL_BYTES {
        push(
            errors,
            "url",
            format!("url is longer than {MAX_URL_BYTES} bytes"),
        );
    } else {
        match url::Url::parse(trimmed) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            Ok(_) => push(errors, "url", "url must be an http:// or https:// address"),
            Err(e) => push(errors, "url", format!("url is not a valid address: {e}")),
        }
    }
    trimmed.to_owned()
}

fn check_title(raw: &str, errors: &mut Vec<FieldError>) -> String {
    let title = raw.trim();
    if title.contains('\0') {
        push(errors, "title", format!("title {NUL_MESSAGE}"));
    } else if raw.chars().count() > MAX_TITLE_CHARS {
        push(
            errors,
            "title",
            format!("title is longer than {MAX_TITLE_CHARS} characters"),
        );
    }
    title.to_owned()
}

fn check_notes(raw: &str, errors: &mut Vec<FieldError>) -> String {
    if raw.contains('\0') {
        push(errors, "notes", format!("notes {NUL_MESSAGE}"));
    } else if raw.chars().count() > MAX_NOTES_CHARS {
        push(
            errors,
            "notes",
            format!("notes are longer than {MAX_NOTES_CHARS} characters"),
        );
    }
    raw.to_owned()
}

/// Tags are trimmed, lower-cased and de-duplicated in first-seen order; empty ones dropped.
/// A list far longer than allowed is refused before any of it is looked at.
fn check_tags(raw: &[String], errors: &mut Vec<FieldError>) -> Vec<String> {
    if raw.len() > MAX_RAW_TAGS {
        push(
            errors,
            "tags",
            format!(
                "at most {MAX_TAGS} tags are allowed (got {}, duplicates included)",
                raw.len()
            ),
        );
        return Vec::new();
    }
    let mut tags: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::with_capacity(raw.len());
    for sent in raw {
        let tag = sent.trim().to_lowercase();
        if tag.is_empty() || !seen.insert(tag.clone()) {
            continue;
        }
        if tag.contains('\0') {
            push(errors, "tags", format!("a tag {NUL_MESSAGE}"));
        } else if sent.chars().count() > MAX_TAG_CHARS {
            push(
                errors,
                "tags",
                format!("tag {tag:?} is longer than {MAX_TAG_CHARS} characters"),
            );
        }
        tags.push(tag);
    }
    if tags.len() > MAX_TAGS {
        push(
            errors,
            "tags",
            format!("at most {MAX_TAGS} tags are allowed (got {})", tags.len()),
        );
    }
    tags
}

/// Tags to add to or take from a bookmark, as stored (trimmed, lower-cased, distinct):
/// each follows the rules of [`NewBookmarkInput`]'s tags. An empty list is refused, since it
/// asks for nothing; blank entries are dropped as they are on create.
pub fn parse_tags(raw: &[String]) -> Result<Vec<String>, Vec<FieldError>> {
    let mut errors = Vec::new();
    if raw.is_empty() {
        push(&mut errors, "tags", "tags must name at least one tag");
        return Err(errors);
    }
    let tags = check_tags(raw, &mut errors);
    if errors.is_empty() {
        Ok(tags)
    } else {
        Err(errors)
    }
}

/// Splits the HTML form's comma-separated tag field.
pub fn split_tags(raw: &str) -> Vec<String> {
    raw.split(',').map(str::to_owned).collect()
}
