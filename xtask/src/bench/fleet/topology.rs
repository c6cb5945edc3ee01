//! One shard count's topology: its databases on the servers, round robin, with even slot
//! ranges in order, the app's configuration for them, and the connections the app holds.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::postgres::Server;

/// The slots every topology divides among its shards.
pub const SLOTS: usize = 16384;

/// Creates the control database on the first server and `n` shard databases round robin
/// (shard i on server i mod S), and writes the app's configuration for them in `dir`:
/// `pool` connections per shard primary and one process. Every database's name starts with
/// `prefix`, so that a second topology can share the servers.
pub async fn write_config(
    n: usize,
    pool: usize,
    servers: &[Server],
    dir: &Path,
    prefix: &str,
) -> Result<PathBuf> {
    let first = servers.first().context("no server to hold the databases")?;
    first
        .execute(
            "postgres",
            "postgres",
            &format!("CREATE DATABASE {prefix}control OWNER bookmarks"),
        )
        .await?;
    let mut toml = format!(
        "[database]\nprimary_url = \"postgres://bookmarks:bookmarks@127.0.0.1:{}/{prefix}control?connect_timeout=2\"\n\
         pool_size = 8\nprimary_pool_size = {pool}\nprocesses = 1\n\n",
        first.port
    );
    for i in 0..n {
        let server = &servers[i % servers.len()];
        server
            .execute(
                "postgres",
                "postgres",
                &format!("CREATE DATABASE {prefix}shard{i} OWNER bookmarks"),
            )
            .await?;
        let (low, high) = (i * SLOTS / n, (i + 1) * SLOTS / n - 1);
        write!(
            toml,
            "[[database.shards]]\nname = \"shard{i}\"\n\
             primary_url = \"postgres://bookmarks:bookmarks@127.0.0.1:{}/{prefix}shard{i}?connect_timeout=2\"\n\
             slots = [\"{low}-{high}\"]\n\n",
            server.port
        )?;
    }
    toml.push_str(
        "[tenancy]\nenabled = true\nsource = \"header\"\nheader = \"X-Tenant-Id\"\nauth = \"api_key\"\n\
         max_in_flight_per_tenant = 64\n\n[sharding]\npins = {}\ndirectory_router = true\n",
    );
    let path = dir.join("autumn.toml");
    std::fs::write(&path, toml).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The app's connections on each server (pg_stat_activity), space-separated.
pub async fn app_connections(servers: &[Server]) -> Result<String> {
    let mut counts = Vec::new();
    for server in servers {
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bookmarks'";
        counts.push(server.value("postgres", "postgres", sql).await?);
    }
    Ok(counts.join(" "))
}
