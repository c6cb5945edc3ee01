//! `bookmarks keys create TENANT [--member ID|EMAIL]`, `keys list [TENANT]` and
//! `keys revoke ID`: tenants' API keys on the control database. `create` prints the key,
//! once; nothing else ever does. A key acts for one member, with its role: without
//! `--member`, for the tenant's oldest active admin, made on the tenant's first key.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use serde_json::json;

use super::exit::EXIT_CONFIG;
use crate::configuration::Settings;
use crate::sharding::row_security::control_pool;
use crate::tenancy::members::{self, MemberError};
use crate::tenancy::{TenantId, keys};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create an API key for TENANT and print it (one JSON line). It is shown this once.
    Create {
        /// The tenant id.
        tenant: String,
        /// The member the key acts for, by id or email (see `bookmarks members list`).
        /// Without it: the tenant's oldest active admin, created for a tenant with no
        /// member yet.
        #[arg(long)]
        member: Option<String>,
        /// What the key is for (shown by `keys list` and the admin page).
        #[arg(long)]
        note: Option<String>,
        /// Print only the key, for a shell variable: `KEY=$(bookmarks keys create t --key-only)`.
        #[arg(long)]
        key_only: bool,
    },
    /// List keys (all, or TENANT's), one JSON line each. Never prints a key.
    List {
        /// Only this tenant's keys.
        tenant: Option<String>,
    },
    /// Revoke key ID: every web replica refuses it within a second.
    Revoke {
        /// The key's id (from `keys list`).
        id: i64,
    },
}

pub async fn run(settings: &Settings, command: KeysCommand) -> ExitCode {
    let tenant_arg = |raw: &str| {
        TenantId::parse(raw).map_err(|e| {
            eprintln!("error: TENANT {raw:?}: {e}");
            ExitCode::from(EXIT_CONFIG)
        })
    };
    let topology = Arc::new(settings.topology.clone());
    let pool = match control_pool(&topology, 1) {
        Ok(pool) => pool,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut conn = match pool.get().await {
        Ok(conn) => conn,
        Err(e) => {
            eprintln!("error: cannot reach the control database: {e}");
            return ExitCode::FAILURE;
        }
    };
    let failed = |e: diesel::result::Error| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    };
    match command {
        KeysCommand::Create {
            tenant,
            member,
            note,
            key_only,
        } => {
            let tenant = match tenant_arg(&tenant) {
                Ok(t) => t,
                Err(code) => return code,
            };
            let note = match keys::KeyNote::parse(note.as_deref().unwrap_or("")) {
                Ok(note) => note,
                Err(e) => {
                    eprintln!("error: --note: {e}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            let created = match member {
                None => keys::create(&mut conn, &tenant, note.as_ref()).await,
                Some(member) => match members::find(&mut conn, &tenant, &member).await {
                    Ok(Some(found)) => {
                        keys::create_for(&mut conn, &tenant, found.id, note.as_ref()).await
                    }
                    Ok(None) => {
                        eprintln!(
                            "error: --member: {tenant} has no member {member:?} (see `bookmarks \
                             members list {tenant}`)"
                        );
                        return ExitCode::from(EXIT_CONFIG);
                    }
                    Err(e) => return failed(e),
                },
            };
            match created {
                Ok((row, key)) => {
                    if key_only {
                        println!("{}", key.expose());
                    } else {
                        let mut line = serde_json::to_value(&row).expect("a key row serializes");
                        line["key"] = json!(key.expose());
                        println!("{line}");
                    }
                    eprintln!(
                        "bookmarks: key {} for {tenant}: store it now, it is not shown again",
                        row.id
                    );
                    ExitCode::SUCCESS
                }
                Err(MemberError::Db(e)) => failed(e),
                Err(refused) => {
                    eprintln!("error: --member: {refused}");
                    ExitCode::from(EXIT_CONFIG)
                }
            }
        }
        KeysCommand::List { tenant } => {
            let tenant = match tenant.as_deref().map(tenant_arg).transpose() {
                Ok(t) => t,
                Err(code) => return code,
            };
            match keys::list(&mut conn, tenant.as_ref()).await {
                Ok(rows) => {
                    for row in rows {
                        println!(
                            "{}",
                            serde_json::to_value(&row).expect("a key row serializes")
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e),
            }
        }
        KeysCommand::Revoke { id } => match keys::revoke(&mut conn, id).await {
            Ok(Some(row)) => {
                println!(
                    "{}",
                    serde_json::to_value(&row).expect("a key row serializes")
                );
                ExitCode::SUCCESS
            }
            Ok(None) => {
                eprintln!("error: there is no key {id} (see `bookmarks keys list`)");
                ExitCode::from(EXIT_CONFIG)
            }
            Err(e) => failed(e),
        },
    }
}
