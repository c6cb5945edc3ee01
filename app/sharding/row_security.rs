//! Tenant isolation the shards enforce: what a connection runs as, and whose rows it declares
//! it works on.
//!
//! Every shard connection of the web servers and their jobs switches to [`APP_ROLE`] when it
//! is opened: not a superuser and not exempt from row-level security, so the policies on
//! every tenant table (migrations/shard/…_tenant_row_security) hold for it. Each checkout
//! then declares a [`RowScope`]: the role for it and, for a tenant, which tenant. A statement
//! sees and changes only the rows that scope allows, whatever its `WHERE` clause says: a
//! query that forgets its tenant filter reads its own tenant's rows, not the shard's.
//!
//! On the control database the same role holds no tenant's rows, only the framework's tables
//! (directory, slot map, keys, jobs), read and written; it changes no schema ([`control_pool`]).

use diesel::QueryableByName;
use diesel::sql_types::Bool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::Topology;
use crate::pg::pool::{PgPool, PoolBuildError, Pooled, build_pool};
use crate::pg::quote::literal;
use crate::pg::roles::{PRIVILEGED, act_as_where_granted, granted_here};

/// What a tenant's statements run as: the rows of the declared tenant only.
pub const APP_ROLE: &str = "bookmarks_app";
/// What cross-tenant readers (admin views, stats) run as: every tenant's rows, read only.
pub const READER_ROLE: &str = "bookmarks_reader";
/// What jobs that work a whole shard run as: every tenant's rows.
pub const WORKER_ROLE: &str = "bookmarks_worker";
/// What the mover runs as: it copies whole slot ranges with `COPY`, which row-level
/// security does not allow, so this role bypasses the policies (and is not a superuser).
pub const MOVER_ROLE: &str = "bookmarks_mover";

/// Whose rows a connection's statements may touch until its next checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowScope<'a> {
    /// One tenant's rows (its routing key), read and written.
    Tenant(&'a str),
    /// Every tenant's rows: jobs that work a whole shard (reindexing, the feed's purge).
    EveryTenant,
    /// Every tenant's rows, read only: admin views and stats.
    ReadEveryTenant,
    /// No tenant's rows: statements on the framework's own tables.
    NoTenant,
}

impl RowScope<'_> {
    /// One simple-protocol statement (a single round trip, no prepared statement) that
    /// replaces whatever the connection's previous checkout declared.
    pub fn statement(self) -> String {
        let (role, tenant) = match self {
            RowScope::Tenant(key) => (APP_ROLE, key),
            RowScope::EveryTenant => (WORKER_ROLE, ""),
            RowScope::ReadEveryTenant => (READER_ROLE, ""),
            RowScope::NoTenant => (APP_ROLE, ""),
        };
        format!(
            "SELECT set_config('role', '{role}', false), set_config('app.tenant_id', {}, false)",
            literal(tenant)
        )
    }
}

/// Declares `scope` on `conn` for the statements that follow; no round trip when the
/// connection's last declaration was the same (see [`Pooled::settle`]).
pub async fn declare(conn: &mut Pooled, scope: RowScope<'_>) -> diesel::QueryResult<()> {
    conn.settle(&scope.statement()).await
}

/// The statement a pooled shard or control connection runs when it is opened: act as
/// [`APP_ROLE`] once this database's migrations have granted it
/// ([`granted_here`](crate::pg::roles::granted_here)). Until then the connection keeps the
/// login's role, and readiness says migrations are pending.
pub fn run_as_app_role() -> String {
    act_as_where_granted(APP_ROLE)
}

/// A pool of `size` on the control database whose connections act as [`APP_ROLE`] once the
/// control migrations have granted it ([`run_as_app_role`]): every runtime path (the web
/// servers, the worker, the mover, operator commands) but `migrate`, which changes the
/// schema as its login.
pub fn control_pool(topology: &Topology, size: u32) -> Result<PgPool, PoolBuildError> {
    build_pool(
        &topology.control_url,
        size,
        topology.pool_bounds(),
        "control",
        Some(&run_as_app_role()),
    )
}

/// What a readiness probe runs on its pooled connection, so that it asks as a tenant
/// request would: [`APP_ROLE`], no tenant, whatever the last checkout declared.
pub fn probe_session() -> String {
    format!(
        "{}; SELECT set_config('app.tenant_id', '', false)",
        act_as_where_granted(APP_ROLE)
    )
}

/// What a session of its own that works a whole shard (outside the pools: a reindexer, the
/// feed's purge) runs first: act as [`WORKER_ROLE`] where this shard's migrations granted it.
pub fn worker_session() -> String {
    act_as_where_granted(WORKER_ROLE)
}

/// The role a connection acts as, as far as tenant isolation is concerned.
#[derive(Debug, QueryableByName)]
pub struct Acting {
    /// A superuser, or a role that bypasses row-level security: either would make the
    /// policies no more than advice.
    #[diesel(sql_type = Bool)]
    pub privileged: bool,
    /// Whether this database's migrations have granted [`APP_ROLE`] what it needs here.
    #[diesel(sql_type = Bool)]
    pub app_role_granted: bool,
}

/// What the role `conn` acts as may do.
pub async fn acting(conn: &mut AsyncPgConnection) -> diesel::QueryResult<Acting> {
    diesel::sql_query(format!(
        "SELECT {PRIVILEGED} AS privileged, \
         EXISTS (SELECT 1 FROM pg_roles WHERE {}) AS app_role_granted",
        granted_here(APP_ROLE)
    ))
    .get_result(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_tenant_is_quoted_against_injection() {
        let sql = RowScope::Tenant("o'brien").statement();
        assert!(
            sql.contains("set_config('app.tenant_id', 'o''brien', false)"),
            "{sql}"
        );
        assert!(
            sql.contains("set_config('role', 'bookmarks_app', false)"),
            "{sql}"
        );
    }

    #[test]
    fn every_scope_sets_its_role_and_clears_the_previous_tenant() {
        for (scope, role) in [
            (RowScope::EveryTenant, WORKER_ROLE),
            (RowScope::ReadEveryTenant, READER_ROLE),
            (RowScope::NoTenant, APP_ROLE),
        ] {
            let sql = scope.statement();
            assert!(sql.contains("'app.tenant_id', ''"), "{sql}");
            assert!(sql.contains(&format!("'role', '{role}'")), "{sql}");
        }
    }
}
