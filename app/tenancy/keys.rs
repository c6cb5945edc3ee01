//! The key store: tenants' API keys on the control database (`tenant_api_keys`, see its
//! migration). Creating, listing and revoking them (the CLI, the admin page, a tenant's
//! admins), looking one up by its digest with its member's role (the request path, through
//! the key cache), and noting its use. Every key belongs to one member of its tenant.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Serialize;

use uuid::Uuid;

use super::TenantId;
use super::api_key::{ApiKey, KeyDigest};
use super::members::{self, MemberError, Role, tenant_members};

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
        member_id -> Uuid,
        session_generation -> Integer,
    }
}

diesel::joinable!(tenant_api_keys -> tenant_members (member_id));
diesel::allow_tables_to_appear_in_same_query!(tenant_api_keys, tenant_members);

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
    /// The member the key acts for, with that member's role.
    #[serde(rename = "member")]
    pub member_id: Uuid,
}

/// What a key proves: which tenant it acts for, as which member and with which role,
/// unless it (or its member) no longer works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub id: i64,
    pub tenant: TenantId,
    pub member: Uuid,
    pub member_name: String,
    pub role: Role,
    /// The key is revoked or its member disabled.
    pub revoked: bool,
    /// Sessions signed in with the key at an older generation have ended (signed out).
    pub session_generation: i32,
}

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

/// Creates a key for `tenant` that acts for its owner: the oldest active admin, made on the
/// tenant's first key (see [`members::owner`]). The key is returned this once and stored
/// only as a digest.
pub async fn create(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    note: Option<&KeyNote>,
) -> Result<(KeyRow, ApiKey), MemberError> {
    let owner = members::owner(conn, tenant).await?;
    create_for(conn, tenant, owner.id, note).await
}

/// Creates a key that acts for member `member` of `tenant` (refused for a disabled or
/// unknown member).
pub async fn create_for(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    member: Uuid,
    note: Option<&KeyNote>,
) -> Result<(KeyRow, ApiKey), MemberError> {
    let found = members::get(conn, tenant, member)
        .await?
        .ok_or(MemberError::NotFound)?;
    if !found.active() {
        return Err(MemberError::Disabled);
    }
    let note = note.map(KeyNote::as_str);
    let key = ApiKey::generate();
    let row = diesel::insert_into(tenant_api_keys::table)
        .values((
            k::tenant_key.eq(tenant.as_str()),
            k::key_hash.eq(key.digest().0.as_slice()),
            k::note.eq(note),
            k::member_id.eq(member),
        ))
        .returning(KeyRow::as_returning())
        .get_result(conn)
        .await?;
    Ok((row, key))
}

/// One member's keys, oldest first.
pub async fn of_member(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    member: Uuid,
) -> QueryResult<Vec<KeyRow>> {
    tenant_api_keys::table
        .filter(
            k::tenant_key
                .eq(tenant.as_str())
                .and(k::member_id.eq(member)),
        )
        .select(KeyRow::as_select())
        .order(k::id)
        .load(conn)
        .await
}

/// Revokes key `id` of `tenant`; `None`: the tenant has no such key.
pub async fn revoke_of(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: i64,
) -> QueryResult<Option<KeyRow>> {
    diesel::update(
        tenant_api_keys::table
            .find(id)
            .filter(k::tenant_key.eq(tenant.as_str())),
    )
    .set(k::revoked_at.eq(diesel::dsl::sql::<
        diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>,
    >("coalesce(revoked_at, now())")))
    .returning(KeyRow::as_returning())
    .get_result(conn)
    .await
    .optional()
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

/// The key with this digest, if there is one, with its member.
pub async fn lookup(
    conn: &mut AsyncPgConnection,
    digest: &KeyDigest,
) -> QueryResult<Option<Credential>> {
    type Found = (
        i64,
        String,
        Option<DateTime<Utc>>,
        Uuid,
        String,
        String,
        Option<DateTime<Utc>>,
        i32,
    );
    let row: Option<Found> = tenant_api_keys::table
        .inner_join(tenant_members::table)
        .filter(k::key_hash.eq(digest.0.as_slice()))
        .select((
            k::id,
            k::tenant_key,
            k::revoked_at,
            tenant_members::id,
            tenant_members::name,
            tenant_members::role,
            tenant_members::disabled_at,
            k::session_generation,
        ))
        .first(conn)
        .await
        .optional()?;
    Ok(row.and_then(
        |(id, tenant, revoked_at, member, member_name, role, disabled_at, generation)| {
            // The table only ever holds ids that parsed; a row edited by hand into something
            // else works for nobody.
            let tenant = TenantId::parse(&tenant).ok()?;
            Some(Credential {
                id,
                tenant,
                member,
                member_name,
                role: Role::parse(&role).ok()?,
                revoked: revoked_at.is_some() || disabled_at.is_some(),
                session_generation: generation,
            })
        },
    ))
}

/// Ends every session signed in with the key whose digest this is, on every web replica:
/// its generation moves on, and the table's notification drops the key from every cache.
pub async fn end_sessions(conn: &mut AsyncPgConnection, digest: &KeyDigest) -> QueryResult<usize> {
    diesel::update(tenant_api_keys::table.filter(k::key_hash.eq(digest.0.as_slice())))
        .set(k::session_generation.eq(k::session_generation + 1))
        .execute(conn)
        .await
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
