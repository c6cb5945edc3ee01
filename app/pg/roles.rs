//! SQL about roles, written once: whether the role a session acts as is exempt from
//! row-level security, and whether a role was granted what it needs in this database.

use super::quote::literal;

/// An SQL expression: true when the session's current role is a superuser or bypasses
/// row-level security, either of which makes the policies no more than advice.
pub const PRIVILEGED: &str =
    "(SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)";

/// An SQL condition on a `pg_roles` row: it is `role`, and this database's migrations have
/// granted it (it may read their record). The role's existence is not enough: roles belong
/// to the server, so another database there may have created it while this one is not
/// migrated yet, and a session acting as it here would be refused every table.
pub fn granted_here(role: &str) -> String {
    format!(
        "rolname = {} AND has_table_privilege(oid, to_regclass('__diesel_schema_migrations'), \
         'SELECT')",
        literal(role)
    )
}

/// A statement that switches the session to `role` where [`granted_here`], and otherwise
/// leaves it acting as its login.
pub fn act_as_where_granted(role: &str) -> String {
    format!(
        "SELECT set_config('role', rolname, false) FROM pg_roles WHERE {}",
        granted_here(role)
    )
}
