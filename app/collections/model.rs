//! Collection types: rows as stored, names that have passed their rules, and what clients
//! send.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

use super::schema::collections;
use crate::tenancy::members::is_space;

/// How deep collections nest: a top-level collection is at depth 1.
pub const MAX_DEPTH: usize = 8;
/// How many collections a tenant may have, which bounds the list and every tree walk.
pub const MAX_COLLECTIONS: i64 = 1_000;
pub const MAX_NAME_CHARS: usize = 100;

#[derive(Debug, Clone, Queryable, Selectable, Serialize, utoipa::ToSchema)]
#[diesel(table_name = collections)]
pub struct Collection {
    #[serde(skip)]
    pub tenant_id: String,
    pub id: Uuid,
    pub name: String,
    /// The collection it is nested in; `null` at the top level.
    pub parent_id: Option<Uuid>,
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::web::timestamp::rfc3339")]
    pub updated_at: DateTime<Utc>,
}

/// A collection's name: at most 100 characters as sent, trimmed, not empty, no control
/// characters. Unique among its siblings, ignoring case (the database's index decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionName(String);

/// Why a name was refused, as the client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "name must be 1 to {MAX_NAME_CHARS} characters, not only white space, without control characters"
)]
pub struct BadName;

impl CollectionName {
    pub fn parse(raw: &str) -> Result<Self, BadName> {
        let name = raw.trim_matches(is_space);
        if name.is_empty()
            || raw.chars().count() > MAX_NAME_CHARS
            || name.chars().any(char::is_control)
        {
            return Err(BadName);
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a client sends to create a collection.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCollection {
    /// At most 100 characters, not only white space, no control characters; trimmed.
    /// Unique among the collection's siblings, ignoring case.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub name: String,
    /// The collection to nest it in (absent or `null`: the top level). Collections nest
    /// 8 deep at most.
    #[serde(default)]
    pub parent_id: Option<Uuid>,
}

/// A change to a collection: its name, its place in the tree, or both.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CollectionChange {
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub name: Option<String>,
    /// The collection to move it into; `null` moves it to the top level, absent leaves it
    /// where it is. Its whole subtree moves with it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Uuid>, nullable)]
    pub parent_id: Option<Option<Uuid>>,
}

/// A collection placed in its tree, for a picker: `path` names it from the top
/// ("Work / Reading").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outlined {
    pub id: Uuid,
    pub path: String,
}

/// The tenant's collections in tree order (each parent before its children, siblings as
/// `all` lists them), each with its path from the top.
pub fn outline(all: &[Collection]) -> Vec<Outlined> {
    let mut children: std::collections::HashMap<Option<Uuid>, Vec<&Collection>> =
        std::collections::HashMap::new();
    for c in all {
        children.entry(c.parent_id).or_default().push(c);
    }
    let mut out = Vec::with_capacity(all.len());
    // Depth-first from the top level; a stack of (collection, its parent's path).
    let mut stack: Vec<(&Collection, String)> = children
        .get(&None)
        .map(|top| top.iter().rev().map(|c| (*c, String::new())).collect())
        .unwrap_or_default();
    while let Some((c, above)) = stack.pop() {
        let path = if above.is_empty() {
            c.name.clone()
        } else {
            format!("{above} / {}", c.name)
        };
        if let Some(kids) = children.get(&Some(c.id)) {
            stack.extend(kids.iter().rev().map(|k| (*k, path.clone())));
        }
        out.push(Outlined { id: c.id, path });
    }
    out
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value: serde calls this
/// only for a field that is present.
pub fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_trimmed_and_must_say_something() {
        assert_eq!(
            CollectionName::parse("  Reading ").unwrap().as_str(),
            "Reading"
        );
        for bad in [
            "",
            "   ",
            "\u{feff}",
            "a\u{7}b",
            &"x".repeat(MAX_NAME_CHARS + 1),
        ] {
            assert_eq!(CollectionName::parse(bad), Err(BadName), "{bad:?}");
        }
        assert!(CollectionName::parse(&"x".repeat(MAX_NAME_CHARS)).is_ok());
    }

    #[test]
    fn an_outline_puts_parents_before_children_with_their_paths() {
        let at = |name: &str, id: u128, parent: Option<u128>| Collection {
            tenant_id: "t".into(),
            id: Uuid::from_u128(id),
            name: name.into(),
            parent_id: parent.map(Uuid::from_u128),
            created_at: DateTime::UNIX_EPOCH,
            updated_at: DateTime::UNIX_EPOCH,
        };
        let all = [
            at("Articles", 3, Some(1)),
            at("Home", 2, None),
            at("Work", 1, None),
            at("Old", 4, Some(3)),
        ];
        let paths: Vec<String> = outline(&all).into_iter().map(|o| o.path).collect();
        assert_eq!(
            paths,
            ["Home", "Work", "Work / Articles", "Work / Articles / Old"]
        );
    }

    #[test]
    fn a_change_tells_an_absent_parent_from_a_null_one() {
        let absent: CollectionChange = serde_json::from_str(r#"{"name":"a"}"#).unwrap();
        assert_eq!(absent.parent_id, None);
        let null: CollectionChange = serde_json::from_str(r#"{"parent_id":null}"#).unwrap();
        assert_eq!(null.parent_id, Some(None));
    }
}
