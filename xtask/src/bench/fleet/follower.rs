//! The fleet benchmark's follower: a `bookmarks worker` beside the serving app, as a
//! deployment runs one, which leads no shard (the app already leads them all) and so shows
//! what every further process costs per shard: its reindexer sessions and its CPU doing
//! nothing, and the whole machine's meanwhile (the servers' included).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::Fleet;
use super::procfs::{cpu_ticks, machine_busy_ticks};
use crate::postgres::Server;

/// `application_name` of the follower's reindexer sessions (the app's prefix, its instance).
const SESSIONS: &str = "bookmarks-reindexer/follower";

impl Fleet {
    /// Starts the follower, waits until its reindexer holds a session on each of the `n`
    /// shards, then prints its sessions per server and its CPU over 10 s, and stops it.
    pub(super) async fn follower(
        &mut self,
        n: usize,
        servers: &[Server],
        config: &Path,
        dir: &Path,
    ) -> Result<()> {
        let mut follower = self.start(
            "worker",
            config,
            &[("INSTANCE_NAME", "follower".to_owned())],
            &dir.join("follower.log"),
        )?;
        let count =
            format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{SESSIONS}'");
        let per_server = loop {
            let mut counts = Vec::new();
            for server in servers {
                counts.push(server.value("postgres", "postgres", &count).await?);
            }
            let total: usize = counts.iter().filter_map(|c| c.parse::<usize>().ok()).sum();
            if total >= n {
                break counts.join(" ");
            }
            follower.still_running()?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // Its own CPU, and the whole machine's (the app, the servers), both doing nothing.
        let before = cpu_ticks(follower.pid)?;
        let machine_before = machine_busy_ticks()?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle = (cpu_ticks(follower.pid)? - before) / self.clock_ticks * 10.0;
        let machine = (machine_busy_ticks()? - machine_before) / self.clock_ticks * 10.0;
        follower
            .child
            .kill()
            .await
            .context("cannot stop bookmarks worker")?;
        self.result(format!(
            "n={n} follower sessions_per_server={per_server} idle_cpu_pct={idle:.1} \
             machine_cpu_pct={machine:.1}"
        ))
    }
}
