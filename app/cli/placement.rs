//! `bookmarks pins`, `bookmarks pin TENANT SHARD` and `bookmarks unpin TENANT`: where
//! tenants are placed by the directory and by config pins, and changing the directory.
//! Pinning places a tenant; it never moves rows (that is `move_slot`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use super::exit::EXIT_CONFIG;
use crate::configuration::Settings;
use crate::content::TENANT_TABLES;
use crate::pg::pool::PgPool;
use crate::sharding::ShardSet;
use crate::sharding::directory::placement::{Change, PlacementError, Placer, pin_entries};
use crate::sharding::directory::table;
use crate::sharding::row_security::control_pool;
use crate::tenancy::TenantId;

#[derive(Debug, clap::Args)]
pub struct PinArgs {
    /// The tenant id.
    pub tenant: String,
    /// The shard's configured name.
    pub shard: String,
    /// Why (kept in the directory row).
    #[arg(long)]
    pub note: Option<String>,
    /// Pin even if the tenant's rows would stay behind on the shard it routes to now.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct UnpinArgs {
    /// The tenant id.
    pub tenant: String,
    /// Unpin even if the tenant's rows would stay behind on the pinned shard.
    #[arg(long)]
    pub force: bool,
}

/// The shard set and control pool a placement command works on (nothing connects yet).
fn open(settings: &Settings) -> Result<(ShardSet, PgPool), ExitCode> {
    let topology = Arc::new(settings.topology.clone());
    let built = ShardSet::new(topology.clone())
        .and_then(|set| control_pool(&topology, 2).map(|control| (set, control)));
    built.map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    })
}

/// Parses the tenant argument, opens the deployment and runs one placement change on it.
async fn place<F>(settings: &Settings, raw_tenant: &str, change: F) -> ExitCode
where
    F: AsyncFnOnce(&Placer<'_>, &TenantId) -> Result<Change, PlacementError>,
{
    let tenant = match TenantId::parse(raw_tenant) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: TENANT {raw_tenant:?}: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (set, control) = match open(settings) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let placer = Placer {
        shards: &set,
        control: &control,
        tables: TENANT_TABLES,
    };
    match change(&placer, &tenant).await {
        Ok(change) => {
            if !change.changed {
                eprintln!(
                    "note: {} has no directory row; it routes by {} to {}",
                    change.tenant, change.before.via, change.before.shard
                );
            }
            println!(
                "{}",
                serde_json::to_string(&change).expect("a change always serializes")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            if e.is_refusal() {
                ExitCode::from(EXIT_CONFIG)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

pub async fn pin(settings: &Settings, args: PinArgs) -> ExitCode {
    place(settings, &args.tenant, async |placer, tenant| {
        placer
            .pin(
                tenant.as_str(),
                &args.shard,
                args.note.as_deref(),
                args.force,
            )
            .await
    })
    .await
}

pub async fn unpin(settings: &Settings, args: UnpinArgs) -> ExitCode {
    place(settings, &args.tenant, async |placer, tenant| {
        placer.unpin(tenant.as_str(), args.force).await
    })
    .await
}

/// One JSON line per directory row, then per config pin, saying which of them is in effect.
pub async fn pins(settings: &Settings) -> ExitCode {
    let (set, control) = match open(settings) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let topology = set.topology();
    let rows = async {
        let mut conn = control.get().await.map_err(|e| e.to_string())?;
        table::list(&mut conn).await.map_err(|e| e.to_string())
    };
    let rows = match tokio::time::timeout(topology.acquire_timeout, rows).await {
        Ok(Ok(rows)) => rows,
        Ok(Err(cause)) => return control_unreachable(settings, &cause),
        Err(_) => return control_unreachable(settings, "no answer in time"),
    };
    if !topology.directory_router {
        eprintln!("note: directory_router is off: directory rows are listed but not consulted");
    }
    let mut out = std::io::stdout().lock();
    for entry in pin_entries(&set, &rows) {
        let line = serde_json::to_string(&entry).expect("a pin entry serializes");
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

pub fn control_unreachable(settings: &Settings, cause: impl std::fmt::Display) -> ExitCode {
    eprintln!(
        "error: cannot read the tenant directory on the control database ({}): {cause}",
        settings.topology.control_url
    );
    ExitCode::FAILURE
}
