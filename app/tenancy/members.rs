//! A tenant's members on the control database (`tenant_members`, see its migration): the
//! people who act for a tenant, each with a role. Every API key belongs to one member and
//! acts with that member's role; a disabled member's keys act no more. A tenant always keeps
//! an active admin: the last one can be neither demoted nor disabled.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::TenantId;

diesel::table! {
    tenant_members (id) {
        id -> Uuid,
        tenant_key -> Text,
        name -> Text,
        email -> Text,
        role -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        disabled_at -> Nullable<Timestamptz>,
    }
}

use tenant_members::dsl as m;

/// What a member may do. Ordered: each role may do everything the roles before it may.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
#[schema(as = MemberRole)]
pub enum Role {
    /// Reads only: every other request is refused (`forbidden_role`).
    Viewer,
    /// Also writes the tenant's content.
    Editor,
    /// Also manages the tenant's members and their keys.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, MemberInputError> {
        match raw {
            "viewer" => Ok(Role::Viewer),
            "editor" => Ok(Role::Editor),
            "admin" => Ok(Role::Admin),
            _ => Err(MemberInputError::Role),
        }
    }

    /// Whether the role may change anything (rather than only read).
    pub fn writes(self) -> bool {
        self >= Role::Editor
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest member name, in characters.
pub const MAX_NAME_CHARS: usize = 100;
/// Longest email address as sent, in characters (RFC 5321's path limit).
pub const MAX_EMAIL_CHARS: usize = 254;

/// Why a member's field was refused; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberInputError {
    #[error("name must be 1 to {MAX_NAME_CHARS} characters without control characters")]
    Name,
    #[error(
        "email must be an address like name@example.com: at most {MAX_EMAIL_CHARS} characters, one @, no spaces"
    )]
    Email,
    #[error("role must be one of viewer, editor, admin")]
    Role,
}

impl MemberInputError {
    pub fn field(&self) -> &'static str {
        match self {
            MemberInputError::Name => "name",
            MemberInputError::Email => "email",
            MemberInputError::Role => "role",
        }
    }
}

/// White space as the API document's patterns mean it (ECMAScript's `\s`, which also
/// counts the byte order mark).
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// A member's name as shown: at most 100 characters as sent, trimmed, not empty, no control
/// characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberName(String);

impl MemberName {
    pub fn parse(raw: &str) -> Result<Self, MemberInputError> {
        let name = raw.trim_matches(is_space);
        if name.is_empty()
            || raw.chars().count() > MAX_NAME_CHARS
            || name.chars().any(char::is_control)
        {
            return Err(MemberInputError::Name);
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An email address, unique (ignoring case) among a tenant's members. Checked for shape
/// only: nothing is sent to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, MemberInputError> {
        let email = raw.trim_matches(is_space);
        let shaped = match email.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty() && !domain.is_empty() && !domain.contains('@')
            }
            None => false,
        };
        if !shaped
            || raw.chars().count() > MAX_EMAIL_CHARS
            || email.chars().any(|c| is_space(c) || c.is_control())
        {
            return Err(MemberInputError::Email);
        }
        Ok(Self(email.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A member as listings show it.
#[derive(Debug, Clone, Queryable, Selectable, Serialize, utoipa::ToSchema)]
#[diesel(table_name = tenant_members)]
pub struct Member {
    pub id: Uuid,
    #[serde(rename = "tenant")]
    pub tenant_key: String,
    pub name: String,
    pub email: String,
    /// `viewer`, `editor` or `admin`.
    #[schema(value_type = Role)]
    pub role: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Set once the member is disabled: its keys no longer work.
    pub disabled_at: Option<DateTime<Utc>>,
}

impl Member {
    /// The member's role (the table's check admits no other value).
    pub fn role(&self) -> Role {
        Role::parse(&self.role).unwrap_or(Role::Viewer)
    }

    pub fn active(&self) -> bool {
        self.disabled_at.is_none()
    }
}

/// Why a change to a tenant's members was refused.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("no such member")]
    NotFound,
    #[error("another member of this tenant has that email")]
    DuplicateEmail,
    #[error("this is the tenant's last active admin: make another member admin first")]
    LastAdmin,
    #[error("the member is disabled")]
    Disabled,
    #[error("the tenant has no active admin to own a key created without naming a member")]
    NoAdmin,
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

impl MemberError {
    /// Splits a database failure from a refusal, as `ControlLookups::run` wants them.
    pub fn split<T>(result: Result<T, MemberError>) -> QueryResult<Result<T, MemberError>> {
        match result {
            Err(MemberError::Db(e)) => Err(e),
            other => Ok(other),
        }
    }
}

/// A tenant's members, oldest first.
pub async fn list(conn: &mut AsyncPgConnection, tenant: &TenantId) -> QueryResult<Vec<Member>> {
    tenant_members::table
        .filter(m::tenant_key.eq(tenant.as_str()))
        .select(Member::as_select())
        .order((m::created_at, m::id))
        .load(conn)
        .await
}

/// One member of `tenant`.
pub async fn get(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> QueryResult<Option<Member>> {
    tenant_members::table
        .filter(m::tenant_key.eq(tenant.as_str()).and(m::id.eq(id)))
        .select(Member::as_select())
        .first(conn)
        .await
        .optional()
}

/// The member of `tenant` named by id or by email (for the CLI).
pub async fn find(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id_or_email: &str,
) -> QueryResult<Option<Member>> {
    if let Ok(id) = Uuid::parse_str(id_or_email) {
        return get(conn, tenant, id).await;
    }
    tenant_members::table
        .filter(m::tenant_key.eq(tenant.as_str()))
        .filter(
            diesel::dsl::sql::<diesel::sql_types::Bool>("lower(email) = lower(")
                .bind::<diesel::sql_types::Text, _>(id_or_email.trim().to_owned())
                .sql(")"),
        )
        .select(Member::as_select())
        .first(conn)
        .await
        .optional()
}

/// Adds a member to `tenant`.
pub async fn add(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    name: &MemberName,
    email: &Email,
    role: Role,
) -> Result<Member, MemberError> {
    diesel::insert_into(tenant_members::table)
        .values((
            m::tenant_key.eq(tenant.as_str()),
            m::name.eq(name.as_str()),
            m::email.eq(email.as_str()),
            m::role.eq(role.as_str()),
        ))
        .returning(Member::as_returning())
        .get_result(conn)
        .await
        .map_err(|e| match e {
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _,
            ) => MemberError::DuplicateEmail,
            other => other.into(),
        })
}

/// Changes a member's name or role. Demoting the tenant's last active admin is refused.
pub async fn update(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
    name: Option<&MemberName>,
    role: Option<Role>,
) -> Result<Member, MemberError> {
    let (tenant, name) = (tenant.clone(), name.map(|n| n.as_str().to_owned()));
    conn.transaction(async move |tx| {
        let member = locked(tx, &tenant, id).await?;
        if role.is_some_and(|r| r != Role::Admin) && member.active() {
            keep_an_admin(tx, &tenant, &member).await?;
        }
        diesel::update(tenant_members::table.find(id))
            .set((
                m::name.eq(name.unwrap_or(member.name)),
                m::role.eq(role.map_or(member.role, |r| r.as_str().to_owned())),
                m::updated_at.eq(diesel::dsl::now),
            ))
            .returning(Member::as_returning())
            .get_result(tx)
            .await
            .map_err(MemberError::from)
    })
    .await
}

/// Disables a member: its keys stop working on every web replica at once (the table's
/// trigger tells them). Disabling the tenant's last active admin is refused; disabling a
/// disabled member changes nothing.
pub async fn disable(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<Member, MemberError> {
    let tenant = tenant.clone();
    conn.transaction(async move |tx| {
        let member = locked(tx, &tenant, id).await?;
        if !member.active() {
            return Ok(member);
        }
        keep_an_admin(tx, &tenant, &member).await?;
        diesel::update(tenant_members::table.find(id))
            .set((
                m::disabled_at.eq(diesel::dsl::now),
                m::updated_at.eq(diesel::dsl::now),
            ))
            .returning(Member::as_returning())
            .get_result(tx)
            .await
            .map_err(MemberError::from)
    })
    .await
}

/// The member, locked for the rest of the transaction.
async fn locked(
    tx: &mut AsyncPgConnection,
    tenant: &TenantId,
    id: Uuid,
) -> Result<Member, MemberError> {
    tenant_members::table
        .filter(m::tenant_key.eq(tenant.as_str()).and(m::id.eq(id)))
        .select(Member::as_select())
        .for_update()
        .first(tx)
        .await
        .optional()?
        .ok_or(MemberError::NotFound)
}

/// Refuses to let `member` stop being an active admin when no other active admin remains.
/// Locks the tenant's active admins, so that two admins demoting each other at once are
/// decided one after the other and the second is refused.
async fn keep_an_admin(
    tx: &mut AsyncPgConnection,
    tenant: &TenantId,
    member: &Member,
) -> Result<(), MemberError> {
    if member.role() != Role::Admin {
        return Ok(());
    }
    let admins: Vec<Uuid> = tenant_members::table
        .filter(m::tenant_key.eq(tenant.as_str()))
        .filter(m::role.eq(Role::Admin.as_str()))
        .filter(m::disabled_at.is_null())
        .select(m::id)
        .for_update()
        .load(tx)
        .await?;
    if admins.iter().all(|id| *id == member.id) {
        return Err(MemberError::LastAdmin);
    }
    Ok(())
}

/// The email of the admin member a tenant's first key creates.
pub fn owner_email(tenant: &TenantId) -> String {
    format!("owner@{}.invalid", tenant.as_str().to_ascii_lowercase())
}

/// The member a key created without naming one belongs to: the tenant's oldest active
/// admin, or, for a tenant with no member yet, a new admin member (its owner).
pub async fn owner(conn: &mut AsyncPgConnection, tenant: &TenantId) -> Result<Member, MemberError> {
    if let Some(admin) = oldest_admin(conn, tenant).await? {
        return Ok(admin);
    }
    // Two first keys created at once both try; the email's uniqueness keeps one owner.
    diesel::insert_into(tenant_members::table)
        .values((
            m::tenant_key.eq(tenant.as_str()),
            m::name.eq("Owner"),
            m::email.eq(owner_email(tenant)),
            m::role.eq(Role::Admin.as_str()),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    oldest_admin(conn, tenant)
        .await?
        .ok_or(MemberError::NoAdmin)
}

async fn oldest_admin(
    conn: &mut AsyncPgConnection,
    tenant: &TenantId,
) -> QueryResult<Option<Member>> {
    tenant_members::table
        .filter(m::tenant_key.eq(tenant.as_str()))
        .filter(m::role.eq(Role::Admin.as_str()))
        .filter(m::disabled_at.is_null())
        .select(Member::as_select())
        .order((m::created_at, m::id))
        .first(conn)
        .await
        .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_only_viewers_cannot_write() {
        assert!(Role::Viewer < Role::Editor && Role::Editor < Role::Admin);
        assert!(!Role::Viewer.writes() && Role::Editor.writes() && Role::Admin.writes());
        for role in [Role::Viewer, Role::Editor, Role::Admin] {
            assert_eq!(Role::parse(role.as_str()), Ok(role));
        }
        assert_eq!(Role::parse("Admin"), Err(MemberInputError::Role));
    }

    #[test]
    fn a_name_is_trimmed_bounded_and_free_of_control_characters() {
        assert_eq!(MemberName::parse("  Ada ").unwrap().as_str(), "Ada");
        assert!(MemberName::parse(&"n".repeat(MAX_NAME_CHARS)).is_ok());
        for bad in ["", "   ", "a\u{0}b", "line\nbreak"] {
            assert_eq!(
                MemberName::parse(bad),
                Err(MemberInputError::Name),
                "{bad:?}"
            );
        }
        assert!(MemberName::parse(&"n".repeat(MAX_NAME_CHARS + 1)).is_err());
    }

    #[test]
    fn an_email_has_one_at_sign_between_two_non_empty_parts_and_no_spaces() {
        assert_eq!(
            Email::parse(" ada@example.com ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "@example.com",
            "ada@",
            "a@b@c",
            "ada @example.com",
            "a\u{0}@b",
        ] {
            assert_eq!(Email::parse(bad), Err(MemberInputError::Email), "{bad:?}");
        }
        let long = format!("{}@example.com", "a".repeat(MAX_EMAIL_CHARS));
        assert!(Email::parse(&long).is_err());
    }

    #[test]
    fn the_owner_email_is_a_valid_address_in_a_reserved_domain() {
        let tenant = TenantId::parse("Acme-Corp").unwrap();
        let email = owner_email(&tenant);
        assert_eq!(email, "owner@acme-corp.invalid");
        assert!(Email::parse(&email).is_ok());
    }
}
