//! Reading this service's own JSON export (`GET /api/export?format=json`): its collections
//! become folder paths and its bookmarks entries, with their timestamps and states. A
//! bookmark of the wrong shape is refused by itself; a document that is not an export is
//! refused whole.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::entry::{FileError, Parsed, Raw};
use crate::bookmarks::export::JSON_FORMAT;

#[derive(Deserialize)]
struct Document {
    format: Value,
    #[serde(default)]
    collections: Vec<Value>,
    bookmarks: Vec<Value>,
}

#[derive(Deserialize)]
struct Collection {
    id: Uuid,
    name: String,
    #[serde(default)]
    parent_id: Option<Uuid>,
}

#[derive(Deserialize)]
struct Bookmark {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    notes: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    collection_id: Option<Uuid>,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    updated_at: Option<DateTime<Utc>>,
    #[serde(default)]
    unread: bool,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    favorite: bool,
}

fn not_an_export(why: impl std::fmt::Display) -> FileError {
    FileError::NotABookmarkFile(format!(
        "not a {JSON_FORMAT} export (GET /api/export?format=json): {why}"
    ))
}

/// Reads `bytes` as an export.
pub fn parse(bytes: &[u8]) -> Result<Parsed, FileError> {
    let doc: Document = serde_json::from_slice(bytes).map_err(not_an_export)?;
    if doc.format != JSON_FORMAT {
        return Err(not_an_export(format!("its format is {}", doc.format)));
    }
    let mut collections = HashMap::new();
    let mut order = Vec::new();
    for (i, c) in doc.collections.into_iter().enumerate() {
        let c: Collection = serde_json::from_value(c)
            .map_err(|e| not_an_export(format!("collections[{i}]: {e}")))?;
        order.push(c.id);
        collections.insert(c.id, c);
    }
    let mut parsed = Parsed::default();
    let mut folders: HashMap<Uuid, Option<u32>> = HashMap::new();
    // Every collection, empty ones included, in the export's order (parents first).
    for id in &order {
        let folder = parsed.folder(&path_of(&collections, *id));
        folders.insert(*id, folder);
    }
    for value in doc.bookmarks {
        let url = value["url"].as_str().map(str::to_owned);
        match serde_json::from_value::<Bookmark>(value) {
            Ok(b) => parsed.push(Raw {
                line: None,
                url: Some(b.url),
                title: b.title,
                notes: b.notes,
                tags: b.tags,
                folder: b
                    .collection_id
                    .and_then(|c| folders.get(&c).copied().flatten()),
                created_at: b.created_at,
                updated_at: b.updated_at,
                unread: b.unread,
                archived: b.archived,
                favorite: b.favorite,
            })?,
            Err(e) => parsed.refuse_unread(None, url, format!("the entry cannot be read: {e}"))?,
        }
    }
    Ok(parsed)
}

/// The names from the top collection down to `id`; a cycle or a missing parent ends it.
fn path_of(all: &HashMap<Uuid, Collection>, id: Uuid) -> Vec<String> {
    let mut names = Vec::new();
    let mut at = Some(id);
    while let Some(c) = at.and_then(|i| all.get(&i)) {
        if names.len() > all.len() {
            break;
        }
        names.push(c.name.clone());
        at = c.parent_id;
    }
    names.reverse();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_become_paths_and_a_bad_entry_is_refused_alone() {
        let doc = serde_json::json!({
            "format": JSON_FORMAT,
            "collections": [
                {"id": "00000000-0000-7000-8000-000000000001", "name": "Top", "parent_id": null},
                {"id": "00000000-0000-7000-8000-000000000002", "name": "Inner",
                 "parent_id": "00000000-0000-7000-8000-000000000001"}
            ],
            "bookmarks": [
                {"url": "https://a.example/", "title": "A", "tags": ["x"], "unread": true,
                 "collection_id": "00000000-0000-7000-8000-000000000002",
                 "created_at": "2024-01-02T03:04:05Z"},
                {"title": "no url"},
                {"url": "javascript:alert(1)"}
            ]
        });
        let parsed = parse(doc.to_string().as_bytes()).unwrap();
        assert_eq!(
            parsed.folders,
            [vec!["Top".to_owned()], vec!["Top".into(), "Inner".into()]]
        );
        assert_eq!(parsed.entries.len(), 1);
        assert_eq!(parsed.entries[0].folder, Some(1));
        assert!(parsed.entries[0].unread);
        assert_eq!(parsed.refused, 2);
        assert_eq!(parsed.refusals[0].entry, 2);
        assert_eq!(parsed.refusals[1].entry, 3);
        assert!(parse(br#"{"format": "other", "bookmarks": []}"#).is_err());
        assert!(parse(b"[1, 2]").is_err());
    }
}
