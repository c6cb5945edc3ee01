//! What a bookmark file is read into: entries checked by the rules `POST /api/bookmarks`
//! applies, each filed under a folder path, and the entries refused with their reason.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::bookmarks::model::NewBookmarkInput;
use crate::collections::model::{MAX_COLLECTIONS, MAX_DEPTH, MAX_NAME_CHARS};

/// The most bookmarks one file may hold.
pub const MAX_ENTRIES: usize = 500_000;
/// The most entries, refused ones included, one file may hold: an entry's place must fit
/// the 20 bits its bookmark id keeps of it (`apply::entry_id`).
pub const MAX_FILE_ENTRIES: usize = 1_000_000;
/// Refused entries an import keeps with their reason (all are counted).
pub const MAX_REFUSALS_KEPT: usize = 100;

/// What to do with an entry whose URL the tenant has saved already.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDuplicate {
    /// Leave the saved bookmark as it is (the default).
    #[default]
    Skip,
    /// Replace its title, notes, tags, collection and states with the file's.
    Update,
}

impl OnDuplicate {
    pub fn as_str(self) -> &'static str {
        match self {
            OnDuplicate::Skip => "skip",
            OnDuplicate::Update => "update",
        }
    }

    pub fn parse(s: &str) -> Self {
        if s == "update" {
            OnDuplicate::Update
        } else {
            OnDuplicate::Skip
        }
    }
}

/// The two kinds of file an import reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A Netscape bookmark file (HTML), as browsers export.
    Netscape,
    /// This service's JSON export.
    Json,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Netscape => "netscape",
            Format::Json => "json",
        }
    }
}

/// One bookmark of the file, as it will be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its place among the file's entries (refused ones included), from 0: with the
    /// import's id, it makes the bookmark's id.
    pub index: u32,
    pub url: String,
    pub title: String,
    pub notes: String,
    pub tags: Vec<String>,
    /// Its folder, an index into [`Parsed::folders`]; `None` outside every folder.
    pub folder: Option<u32>,
    pub created_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    pub unread: bool,
    pub archived: bool,
    pub favorite: bool,
}

/// An entry that will not be imported, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Refused {
    /// Its place among the file's entries, from 1.
    pub entry: u32,
    /// The line it starts on (bookmark files; `null` for JSON).
    pub line: Option<u32>,
    /// Its address as written, when it has one (at most 200 characters of it).
    pub url: Option<String>,
    pub reason: String,
}

/// A whole file, read.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Every folder path, in file order; an entry's `folder` indexes this list.
    pub folders: Vec<Vec<String>>,
    pub entries: Vec<Entry>,
    /// The first [`MAX_REFUSALS_KEPT`] refused entries.
    pub refusals: Vec<Refused>,
    pub refused: usize,
    folder_keys: HashMap<Vec<String>, u32>,
}

/// An entry as a file gives it, before it is checked.
#[derive(Debug, Default)]
pub struct Raw {
    pub line: Option<u32>,
    pub url: Option<String>,
    pub title: String,
    pub notes: String,
    pub tags: Vec<String>,
    pub folder: Option<u32>,
    pub created_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    pub unread: bool,
    pub archived: bool,
    pub favorite: bool,
}

/// Why a file is not imported at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    #[error("{0}")]
    NotABookmarkFile(String),
    #[error(
        "the file holds more than {MAX_ENTRIES} bookmarks (or {MAX_FILE_ENTRIES} entries, refused ones included)"
    )]
    TooMany,
}

impl Parsed {
    /// The folder for `path` (names as the file gives them), added if new. Names are made
    /// into collection names (control characters dropped, trimmed, at most 100
    /// characters); folders nested deeper than collections may be are folded into their
    /// ancestor at the deepest level allowed. Paths that differ only in case are one
    /// folder, as sibling collection names are.
    pub fn folder(&mut self, path: &[String]) -> Option<u32> {
        if path.is_empty() {
            return None;
        }
        let names: Vec<String> = path
            .iter()
            .take(MAX_DEPTH)
            .map(|n| folder_name(n))
            .collect();
        let key: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
        if let Some(found) = self.folder_keys.get(&key) {
            return Some(*found);
        }
        // Each ancestor comes first, so that a file's folders are created top down.
        let parent = if names.len() > 1 {
            self.folder(&names[..names.len() - 1])
        } else {
            None
        };
        // No more folders than a tenant may have collections: past that, a folder's
        // bookmarks go to its nearest ancestor that was kept.
        if self.folders.len() >= MAX_COLLECTIONS as usize {
            return parent;
        }
        let index = self.folders.len() as u32;
        self.folders.push(names);
        self.folder_keys.insert(key, index);
        Some(index)
    }

    /// Checks `raw` as a new bookmark would be checked, and keeps it or its refusal.
    pub fn push(&mut self, raw: Raw) -> Result<(), FileError> {
        let index = self.next_index()?;
        if self.entries.len() >= MAX_ENTRIES {
            return Err(FileError::TooMany);
        }
        let Some(url) = raw.url.clone().filter(|u| !u.trim().is_empty()) else {
            self.refuse(index, &raw, "the entry has no URL".to_owned());
            return Ok(());
        };
        let input = NewBookmarkInput {
            url,
            title: raw.title.clone(),
            notes: raw.notes.clone(),
            tags: raw.tags.clone(),
            collection_id: None,
            unread: raw.unread,
            archived: raw.archived,
            favorite: raw.favorite,
        };
        match input.validate() {
            Ok(draft) => {
                self.entries.push(Entry {
                    index,
                    url: draft.url,
                    title: draft.title,
                    notes: draft.notes,
                    tags: draft.tags,
                    folder: raw.folder,
                    created_at: storable(raw.created_at),
                    updated_at: storable(raw.updated_at).or(storable(raw.created_at)),
                    unread: raw.unread,
                    archived: raw.archived,
                    favorite: raw.favorite,
                });
            }
            Err(fields) => {
                let reason = fields
                    .iter()
                    .map(|f| f.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ");
                self.refuse(index, &raw, reason);
            }
        }
        Ok(())
    }

    /// Refuses an entry that cannot be read at all (a JSON entry of the wrong shape).
    pub fn refuse_unread(
        &mut self,
        line: Option<u32>,
        url: Option<String>,
        reason: String,
    ) -> Result<(), FileError> {
        let index = self.next_index()?;
        let raw = Raw {
            line,
            url,
            ..Raw::default()
        };
        self.refuse(index, &raw, reason);
        Ok(())
    }

    /// The next entry's place in the file.
    fn next_index(&self) -> Result<u32, FileError> {
        let index = self.entries.len() + self.refused;
        if index >= MAX_FILE_ENTRIES {
            return Err(FileError::TooMany);
        }
        Ok(index as u32)
    }

    fn refuse(&mut self, index: u32, raw: &Raw, reason: String) {
        self.refused += 1;
        if self.refusals.len() < MAX_REFUSALS_KEPT {
            self.refusals.push(Refused {
                entry: index + 1,
                line: raw.line,
                // As written, but for control characters (a NUL cannot be stored).
                url: raw.url.as_ref().map(|u| {
                    u.chars()
                        .take(200)
                        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
                        .collect()
                }),
                reason,
            });
        }
    }
}

/// A folder's name as a collection's: control characters dropped, trimmed, cut to 100
/// characters, and a name for a folder that has none.
fn folder_name(raw: &str) -> String {
    let clean: String = raw.chars().filter(|c| !c.is_control()).collect();
    let name: String = clean.trim().chars().take(MAX_NAME_CHARS).collect();
    let name = name.trim().to_owned();
    if name.is_empty() {
        "Untitled folder".to_owned()
    } else {
        name
    }
}

/// A date Postgres can store and JSON can carry: between years 1 and 9999.
fn storable(at: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    use chrono::Datelike;
    at.filter(|d| (1..=9999).contains(&d.year()))
}

/// A Netscape file's date: seconds since 1970, or milliseconds or microseconds where the
/// number is too large to be seconds (some browsers write those); `None` when unreadable.
pub fn epoch(raw: &str) -> Option<DateTime<Utc>> {
    let n: i64 = raw.trim().parse().ok()?;
    if n <= 0 {
        return None;
    }
    if n >= 100_000_000_000_000 {
        DateTime::from_timestamp_micros(n)
    } else if n >= 100_000_000_000 {
        DateTime::from_timestamp_millis(n)
    } else {
        DateTime::from_timestamp(n, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_created_top_down_once_each_ignoring_case() {
        let mut p = Parsed::default();
        let path = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(p.folder(&path(&["A", "B", "C"])), Some(2));
        assert_eq!(p.folder(&path(&["a", "b"])), Some(1));
        assert_eq!(p.folder(&path(&[])), None);
        assert_eq!(
            p.folders,
            [path(&["A"]), path(&["A", "B"]), path(&["A", "B", "C"])]
        );
        let deep: Vec<String> = (0..12).map(|i| format!("d{i}")).collect();
        let at = p.folder(&deep).unwrap() as usize;
        assert_eq!(p.folders[at].len(), MAX_DEPTH);
        assert_eq!(p.folder(&path(&[" \u{7} "])), Some(at as u32 + 1));
        assert_eq!(p.folders.last().unwrap(), &path(&["Untitled folder"]));
    }

    #[test]
    fn dates_in_seconds_milliseconds_and_microseconds_read_as_the_same_moment() {
        let at = DateTime::from_timestamp(1_700_000_000, 0);
        assert_eq!(epoch("1700000000"), at);
        assert_eq!(epoch("1700000000000"), at);
        assert_eq!(epoch("1700000000000000"), at);
        assert_eq!(epoch("0"), None);
        assert_eq!(storable(epoch("1000000000000000000")), None, "year 33658");
        assert_eq!(epoch("soon"), None);
    }
}
