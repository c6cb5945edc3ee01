//! The key store: tenants' API keys on the control database (`tenant_api_keys`, see its
//! migration). Creating, listing and revoking them (the CLI and the admin page), looking
//! one up by its digest (the request path, through the key cache), and noting its use.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;

use super::TenantId;
use super::api_key::{ApiKey, KeyDigest};

/// The channel the table's trigger notifies on; the payload is the changed key's digest in
/// hex, or empty when the whole table was truncated.
pub const CHANNEL: &str = "tenant_api_keys";

diesel::table! {
    tenant_api_keys (id) {
        id -> BigInt,
        tenant_key -> Text,
        key_hash -> Bytea,
        note -> Nullable<Text>,
        created_at -> Timestamptz,
        last_used_at -> Nullable<Timestamptz>,
        revoked_at -> Nullable<Timestamptz>,
    }
}

use tenant_api_keys::dsl as k;

/// A key as the CLI and the admin page list it: everything but the key.
#[derive(Debug, Clone, Queryable, Selectable, Serialize, utoipa::ToSchema)]
#[diesel(table_name = tenant_api_keys)]
pub struct KeyRow {
    pub id: i64,
    #[serde(rename = "tenant")]
    pub tenant_key: String,
    pub note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// What a key proves: which tenant it acts for, unless it is revoked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub id: i64,
    pub tenant: TenantId,
    pub revoked: bool,
}

/// Creates a key for `tenant`; the key is returned this once and stored only as a digest.
/// Longest note a key may carry, in characters.
pub const MAX_NOTE_CHARS: usize = 200;

/// What a key is for, as listings show it: trimmed, at most [`MAX_NOTE_CHARS`] characters,
/// no control characters (Postgres text cannot hold NUL, and a note is shown on a page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyNote(String);

/// Why a note was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyNoteError {
    #[error("note is longer than {MAX_NOTE_CHARS} characters")]
    TooLong,
    #[error("note must not contain control characters")]
    ControlCharacter,
}

impl KeyNote {
    /// `None` for a blank note.
    pub fn parse(raw: &str) -> Result<Option<Self>, KeyNoteError> {
        let note = raw.trim();
        if note.is_empty() {
            return Ok(None);
        }
        if note.chars().count() > MAX_NOTE_CHARS {
            return Err(KeyNoteError::TooLong);
        }
        if note.chars().any(char::is_control) {
            return Err(KeyNoteError::ControlCharacter);
        }
        Ok(Some(Self(note.to_owned())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub async fn create(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    note: Option<&KeyNote>,
) -> QueryResult<(KeyRow, ApiKey)> {
    let note = note.map(KeyNote::as_str);
    let key = ApiKey::generate();
    let row = diesel::insert_into(tenant_api_keys::table)
        .values((
            k::tenant_key.eq(tenant.as_str()),
            k::key_hash.eq(key.digest().0.as_slice()),
            k::note.eq(note),
        ))
        .returning(KeyRow::as_returning())
        .get_result(conn)
        .await?;
    Ok((row, key))
}

/// Every key, or one tenant's, oldest first.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant: Option<&TenantId>,
) -> QueryResult<Vec<KeyRow>> {
    let mut query = tenant_api_keys::table
        .select(KeyRow::as_select())
        .order(k::id)
        .into_boxed();
    if let Some(tenant) = tenant {
        query = query.filter(k::tenant_key.eq(tenant.as_str()));
    }
    query.load(conn).await
}

/// Revokes key `id` (a key already revoked keeps its first revocation time). `None`: no
/// such key.
pub async fn revoke(conn: &mut AsyncPgConnection, id: i64) -> QueryResult<Option<KeyRow>> {
    diesel::update(tenant_api_keys::table.find(id))
        .set(k::revoked_at.eq(diesel::dsl::sql::<
            diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>,
        >("coalesce(revoked_at, now())")))
        .returning(KeyRow::as_returning())
        .get_result(conn)
        .await
        .optional()
}

/// The key with this digest, if there is one.
pub async fn lookup(
    conn: &mut AsyncPgConnection,
    digest: &KeyDigest,
) -> QueryResult<Option<Credential>> {
    let row: Option<(i64, String, Option<DateTime<Utc>>)> = tenant_api_keys::table
        .filter(k::key_hash.eq(digest.0.as_slice()))
        .select((k::id, k::tenant_key, k::revoked_at))
        .first(conn)
        .await
        .optional()?;
    Ok(row.and_then(|(id, tenant, revoked_at)| {
        // The table only ever holds ids that parsed; a row edited by hand into something
        // else works for nobody.
        let tenant = TenantId::parse(&tenant).ok()?;
        Some(Credential {
            id,
            tenant,
            revoked: revoked_at.is_some(),
        })
    }))
}

/// Notes that key `id` was used (unless that was noted within the last minute).
pub async fn touch(conn: &mut AsyncPgConnection, id: i64) -> QueryResult<usize> {
    diesel::update(tenant_api_keys::table.find(id).filter(diesel::dsl::sql::<
        diesel::sql_types::Bool,
    >(
        "(last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
    )))
    .set(k::last_used_at.eq(diesel::dsl::now))
    .execute(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_trimmed_bounded_and_free_of_control_characters() {
        assert_eq!(KeyNote::parse("  "), Ok(None));
        assert_eq!(
            KeyNote::parse(" ci runner ").unwrap().unwrap().as_str(),
            "ci runner"
        );
        assert!(KeyNote::parse(&"n".repeat(MAX_NOTE_CHARS)).is_ok());
        assert!(KeyNote::parse(&"n".repeat(MAX_NOTE_CHARS + 1)).is_err());
        for bad in ["a\u{0}b", "line\nbreak", "bell\u{7}"] {
            assert!(KeyNote::parse(bad).is_err(), "{bad:?}");
        }
    }
}
