//! What a server must be sure of before it serves: that tenant isolation holds on every shard it
//! reaches and no connection acts as a superuser, and which secrets it signs and checks with (the
//! generated ones read from the control database).

use std::sync::Arc;

use anyhow::Context;

use super::options::ServeOptions;
use crate::admin::AdminToken;
use crate::configuration::secret::{self, GeneratedSecret, Secret};
use crate::configuration::{AuthMode, Settings};
use crate::pg::control::ControlLookups;
use crate::pg::pool::{AfterCheck, CheckoutError, PgPool};
use crate::sharding::budget::{self, Verdict};
use crate::sharding::row_security::{APP_ROLE, Acting, acting};
use crate::sharding::{ShardSet, Topology};
use crate::tenancy::TenantHeader;
use crate::tenancy::auth::Authenticator;
use crate::tenancy::key_store::KeyStore;
use crate::tenancy::session::Sessions;

/// Refuses to serve when a reachable, migrated shard's connections act as a superuser or a
/// role that bypasses row-level security, unless `allow` (then it says so loudly). A shard
/// not yet migrated has no role to switch to: its readiness says it is not ready.
pub(super) async fn refuse_privileged_roles(set: &ShardSet, allow: bool) -> anyhow::Result<()> {
    for shard in set.iter() {
        let what = format!("shard {}", shard.name());
        let bound = set.topology().connect_timeout * 2;
        let asked = ask_acting(shard.primary_pool(), bound, AfterCheck::Close).await;
        judge(&what, asked, allow)?;
    }
    Ok(())
}

/// As [`refuse_privileged_roles`], for the control database's connections: a superuser
/// there could change the schema, or read every tenant's key hashes and members.
pub(super) async fn refuse_privileged_control(
    control: &PgPool,
    topology: &Topology,
    allow: bool,
) -> anyhow::Result<()> {
    let bound = topology.connect_timeout * 2;
    let asked = ask_acting(control, bound, AfterCheck::Return).await;
    judge("control database", asked, allow)
}

/// Why the role a database's connections act as could not be asked (logged, not fatal:
/// that database's readiness says what is wrong with it).
#[derive(Debug, thiserror::Error)]
enum NotAsked {
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    #[error(transparent)]
    Query(#[from] diesel::result::Error),
    #[error("no answer within {0:?}")]
    NoAnswer(std::time::Duration),
}

/// `after`: a shard's connection is closed, so that a fleet's idle shards keep no pool open
/// from start-up on.
async fn ask_acting(
    pool: &PgPool,
    bound: std::time::Duration,
    after: AfterCheck,
) -> Result<Acting, NotAsked> {
    tokio::time::timeout(bound, async {
        let mut conn = pool.get().await?;
        let asked = acting(&mut conn).await?;
        after.done_with(conn);
        Ok(asked)
    })
    .await
    .unwrap_or(Err(NotAsked::NoAnswer(bound)))
}

fn judge(what: &str, asked: Result<Acting, NotAsked>, allow: bool) -> anyhow::Result<()> {
    let acting = match asked {
        Ok(acting) => acting,
        Err(e) => {
            tracing::warn!(database = what, error = %e, "cannot check the role connections act as");
            return Ok(());
        }
    };
    if !acting.privileged {
        return Ok(());
    }
    if !acting.app_role_granted {
        tracing::warn!(
            database = what,
            "not migrated: its connections act as the login's role until it is and this server restarts"
        );
    } else if allow {
        tracing::error!(
            database = what,
            "--allow-superuser: connections act as a superuser or a role that bypasses row-level security; \
             tenant isolation rests on every query's own filter"
        );
    } else {
        anyhow::bail!(
            "{what}: connections act as a superuser or a role that bypasses row-level security, \
             so the policies and grants would hold nothing back; the login in its URL must be \
             able to SET ROLE {APP_ROLE} and must not be a superuser, or pass --allow-superuser"
        );
    }
    Ok(())
}

/// Logs each server's connection budget and refuses to serve when a server that answers
/// cannot hold what `[database] processes` processes may open on it (a server that does not
/// answer is not judged: its readiness says it is down).
pub(super) async fn refuse_over_budget(topology: &Topology) -> anyhow::Result<()> {
    let checked = budget::check_servers(topology, topology.connect_timeout).await;
    let mut over = Vec::new();
    for (b, verdict) in checked {
        let total = b.per_process * topology.processes;
        match verdict {
            Verdict::Fits(limit) => tracing::info!(
                server = %b.server,
                per_process = b.per_process,
                processes = topology.processes,
                total,
                max_connections = limit.max_connections,
                uses = %b.uses.join(", "),
                "connection budget"
            ),
            Verdict::NotAsked(cause) => tracing::info!(
                server = %b.server,
                per_process = b.per_process,
                total,
                cause = %cause,
                "connection budget (server not asked)"
            ),
            Verdict::Over(o) => over.push(o.to_string()),
        }
    }
    if !over.is_empty() {
        anyhow::bail!("connection budget: {}", over.join("; "));
    }
    Ok(())
}

/// How this process checks who may act as a tenant (`[tenancy] auth`).
pub(super) fn authenticator(
    settings: &Settings,
    session_secret: Option<&[u8]>,
    lookups: ControlLookups,
) -> anyhow::Result<Authenticator> {
    let tenancy = &settings.tenancy;
    let sessions = match session_secret {
        Some(secret) => Sessions::new(secret, tenancy.session_ttl, tenancy.secure_cookies)?,
        None => {
            if tenancy.auth == AuthMode::ApiKey {
                tracing::warn!(
                    "SESSION_SECRET is not set: the UI's sessions are signed with a secret of \
                     this process's own, so they end when it restarts and work on no other \
                     replica; set the same SESSION_SECRET on every replica"
                );
            }
            Sessions::ephemeral(tenancy.session_ttl, tenancy.secure_cookies)
        }
    };
    if tenancy.auth == AuthMode::TrustedHeader {
        tracing::warn!(
            header = %tenancy.header,
            "[tenancy] auth = \"trusted_header\": whoever can reach this server can act as \
             any tenant by naming it in the header; run it only behind a gateway that \
             authenticates every request, removes any such header a client sent and sets its own"
        );
    }
    let keys = Arc::new(KeyStore::new(lookups, tenancy.key_cache_ttl));
    Ok(Authenticator::new(
        tenancy.auth,
        TenantHeader::new(&tenancy.header),
        keys,
        sessions,
    ))
}

/// The admin token and the session secret, the generated ones read from the control
/// database (which `migrate` has just prepared, if this server was told to migrate).
pub(super) async fn secrets(
    control: &PgPool,
    options: &ServeOptions,
) -> anyhow::Result<(Option<AdminToken>, Option<Vec<u8>>)> {
    let admin_token = match &options.admin_token {
        Secret::Unset => None,
        Secret::Given(token) => Some(token.clone()),
        Secret::Generated => Some(AdminToken::parse(
            &from_control(control, GeneratedSecret::AdminToken).await?,
        )?),
    };
    let session_secret = match &options.session_secret {
        Secret::Unset => None,
        Secret::Given(secret) => Some(secret.clone()),
        Secret::Generated => Some(
            from_control(control, GeneratedSecret::SessionSecret)
                .await?
                .into_bytes(),
        ),
    };
    Ok((admin_token, session_secret))
}

/// The deployment's generated `secret`, read from the control database.
async fn from_control(control: &PgPool, secret: GeneratedSecret) -> anyhow::Result<String> {
    let mut conn = control
        .get()
        .await
        .context("cannot reach the control database for the generated secrets")?;
    Ok(secret::generated(&mut conn, secret).await?)
}

/// Series that name tenants go only to a scrape presenting the admin token (`Authorization:
/// Bearer`); without an admin token, to nobody.
pub(super) fn sees_tenants(token: Option<AdminToken>) -> crate::web::metrics::SeesTenants {
    Arc::new(move |headers| token.as_ref().is_some_and(|t| t.presented_in(headers)))
}
