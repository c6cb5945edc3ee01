//! The fleet benchmark's app processes: `bookmarks migrate` to its end, `bookmarks serve`
//! until it is ready, and any other `bookmarks` command started with its output in a log.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::Fleet;
use crate::postgres::free_port;
use crate::process::{self, release_binary};

impl Fleet {
    /// `bookmarks migrate` of `config`'s databases (its log in `dir`), timed.
    pub(super) async fn migrate(&self, config: &Path, dir: &Path) -> Result<Duration> {
        let started = Instant::now();
        let mut migrate = self.app_command("bookmarks", config);
        migrate.arg("migrate");
        process::run_logged(&mut migrate, &dir.join("migrate.log"), "bookmarks migrate").await?;
        Ok(started.elapsed())
    }

    /// `bookmarks serve` of `config` (its log in `dir`), once its /ready says 200, and its
    /// URL.
    pub(super) async fn serve(&self, config: &Path, dir: &Path) -> Result<(Started, String)> {
        let port = free_port(24000)?;
        let url = format!("http://127.0.0.1:{port}");
        let mut app = self.start(
            "serve",
            config,
            &[("BIND", format!("127.0.0.1:{port}"))],
            &dir.join("app.log"),
        )?;
        loop {
            let ready = self.http.get(format!("{url}/ready")).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return Ok((app, url));
            }
            app.still_running()?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `bookmarks <command>` of `config` with `env`, its output appended to `log`.
    pub(super) fn start(
        &self,
        command: &str,
        config: &Path,
        env: &[(&str, String)],
        log: &Path,
    ) -> Result<Started> {
        let child = self
            .app_command("bookmarks", config)
            .arg(command)
            .env_remove("RUST_LOG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(process::append_log(log)?)
            .stderr(process::append_log(log)?)
            .spawn()
            .with_context(|| format!("cannot start bookmarks {command}"))?;
        let pid = child
            .id()
            .with_context(|| format!("bookmarks {command} has no process id"))?;
        Ok(Started {
            child,
            pid,
            command: command.to_owned(),
            log: log.to_owned(),
        })
    }

    /// A release binary of the workspace, pointed at `config` and given the admin token.
    pub(super) fn app_command(&self, binary: &str, config: &Path) -> tokio::process::Command {
        let mut command = process::command(release_binary(binary));
        command
            .env("AUTUMN_CONFIG", config)
            .env("ADMIN_TOKEN", &self.admin_token);
        command
    }
}

/// A `bookmarks` process just started, and where its output goes.
pub(super) struct Started {
    pub(super) child: tokio::process::Child,
    pub(super) pid: u32,
    command: String,
    log: PathBuf,
}

impl Started {
    /// An error with its log printed if it has exited.
    pub(super) fn still_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            eprint!("{}", std::fs::read_to_string(&self.log).unwrap_or_default());
            bail!("bookmarks {} exited ({status})", self.command);
        }
        Ok(())
    }
}
