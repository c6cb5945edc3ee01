//! `bookmarks members list TENANT` and `members add TENANT --name … --email … --role …`: a
//! tenant's members on the control database. Keys for a member come from
//! `bookmarks keys create TENANT --member ID|EMAIL`; changing and disabling members is the
//! tenant admins' API (`/api/members`).

use std::process::ExitCode;

use clap::Subcommand;

use super::control;
use super::exit::EXIT_CONFIG;
use crate::configuration::Settings;
use crate::tenancy::TenantId;
use crate::tenancy::members::{self, Email, MemberError, MemberName, Role};

#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// List TENANT's members, one JSON line each, disabled ones included.
    List {
        /// The tenant id.
        tenant: String,
    },
    /// Add a member to TENANT and print it (one JSON line).
    Add {
        /// The tenant id.
        tenant: String,
        /// Shown in listings (1 to 100 characters).
        #[arg(long)]
        name: String,
        /// Unique among the tenant's members, ignoring case.
        #[arg(long)]
        email: String,
        /// viewer (reads only), editor (also writes) or admin (also manages members and keys).
        #[arg(long)]
        role: String,
    },
}

pub async fn run(settings: &Settings, command: MembersCommand) -> ExitCode {
    let refused = |what: &str, why: &dyn std::fmt::Display| {
        eprintln!("error: {what}: {why}");
        ExitCode::from(EXIT_CONFIG)
    };
    let raw_tenant = match &command {
        MembersCommand::List { tenant } | MembersCommand::Add { tenant, .. } => tenant,
    };
    let tenant = match TenantId::parse(raw_tenant) {
        Ok(tenant) => tenant,
        Err(e) => return refused("TENANT", &e),
    };
    let mut conn = match control::connect(&settings.topology).await {
        Ok(conn) => conn,
        Err(e) => {
            eprintln!("error: cannot reach the control database: {e}");
            return ExitCode::FAILURE;
        }
    };
    match command {
        MembersCommand::List { .. } => match members::list(&mut conn, &tenant).await {
            Ok(rows) => {
                for row in rows {
                    println!(
                        "{}",
                        serde_json::to_value(&row).expect("a member serializes")
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        MembersCommand::Add {
            name, email, role, ..
        } => {
            let name = match MemberName::parse(&name) {
                Ok(name) => name,
                Err(e) => return refused("--name", &e),
            };
            let email = match Email::parse(&email) {
                Ok(email) => email,
                Err(e) => return refused("--email", &e),
            };
            let role = match Role::parse(&role) {
                Ok(role) => role,
                Err(e) => return refused("--role", &e),
            };
            match members::add(&mut conn, &tenant, &name, &email, role).await {
                Ok(member) => {
                    println!(
                        "{}",
                        serde_json::to_value(&member).expect("a member serializes")
                    );
                    ExitCode::SUCCESS
                }
                Err(MemberError::Db(e)) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
                Err(e) => refused("--email", &e),
            }
        }
    }
}
