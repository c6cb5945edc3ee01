//! The fleet benchmark's range moves: 16 slots between two logical shards on one server,
//! and 16 more between two servers, each a `move_slot run`, timed.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, Result};

use super::Fleet;
use super::topology::SLOTS;
use crate::process;

impl Fleet {
    /// Two timed 16-slot moves: between shards on one server, then across servers.
    pub(super) async fn moves(
        &mut self,
        n: usize,
        server_count: usize,
        config: &Path,
        dir: &Path,
    ) -> Result<()> {
        // shard1 and shard(1 + servers) share a server; shard1 and shard2 do not.
        for (from, to, what, offset) in [
            (1, 1 + server_count, "same_server", 0),
            (1, 2, "across_servers", 16),
        ] {
            let first = from * SLOTS / n + offset;
            let move_log = dir.join(format!("move-{what}.log"));
            let started = Instant::now();
            let status = self
                .app_command("move_slot", config)
                .args([
                    "run",
                    "--from",
                    &format!("shard{from}"),
                    "--to",
                    &format!("shard{to}"),
                ])
                .args([
                    "--slots",
                    &format!("{first}-{}", first + 15),
                    "--confirm",
                    "--grace",
                    "1s",
                ])
                .stdin(Stdio::null())
                .stdout(process::append_log(&move_log)?)
                .stderr(process::append_log(&move_log)?)
                .status()
                .await
                .context("cannot run move_slot")?;
            let outcome = if status.success() {
                format!("s={:.2}", started.elapsed().as_secs_f64())
            } else {
                self.keep = true;
                format!("FAILED (see {})", move_log.display())
            };
            self.result(format!(
                "n={n} move_16_slots {what} shard{from}->shard{to} {outcome}"
            ))?;
        }
        Ok(())
    }
}
