//! One server the request-path set-up started: its URL and pid, its CPU time and memory
//! from /proc, and its stop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

use crate::process;

/// One server the set-up started.
pub struct Served {
    pub name: &'static str,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub pid: u32,
    child: Child,
    log: PathBuf,
}

impl Served {
    pub(super) fn spawn(
        name: &'static str,
        port: u16,
        mut command: Command,
        work: &Path,
    ) -> Result<Served> {
        let log = work.join(format!("{name}.log"));
        let file = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let shown = process::describe(&command);
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("cannot start {shown}"))?;
        let pid = child.id().with_context(|| format!("{name} has no pid"))?;
        Ok(Served {
            name,
            url: format!("http://127.0.0.1:{port}"),
            pid,
            child,
            log,
        })
    }

    /// Waits until the server lists the tenant's bookmarks; fails if it exits first.
    pub(super) async fn wait_up(
        &mut self,
        http: &reqwest::Client,
        headers: &[(&str, String)],
        deadline: Instant,
    ) -> Result<()> {
        let url = format!("{}/api/bookmarks", self.url);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("{} exited ({status}):\n{}", self.name, self.log_tail(20));
            }
            let mut request = http.get(&url);
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            if request.send().await.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not answer at {url}:\n{}",
                    self.name,
                    self.log_tail(20)
                );
            }
            sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The process's CPU time so far (user + system), in clock ticks.
    pub fn cpu_ticks(&self) -> Result<u64> {
        let path = format!("/proc/{}/stat", self.pid);
        let stat = std::fs::read_to_string(&path)
            .with_context(|| format!("{} is gone ({path})", self.name))?;
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let field = |n: usize| -> Result<u64> {
            fields
                .get(n - 3)
                .and_then(|f| f.parse().ok())
                .with_context(|| format!("{path}: no field {n}"))
        };
        Ok(field(14)? + field(15)?)
    }

    /// A memory figure of /proc/PID/status (`VmHWM`, `VmRSS`) in MiB.
    pub fn memory_mib(&self, field: &str) -> Result<f64> {
        let path = format!("/proc/{}/status", self.pid);
        let status = std::fs::read_to_string(&path)
            .with_context(|| format!("{} is gone ({path})", self.name))?;
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .with_context(|| format!("{path}: no {field}"))
    }

    /// SIGTERM, then SIGKILL if it has not ended within ten seconds.
    pub(super) async fn terminate(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ =
            process::succeeds(Command::new("kill").args(["-TERM", &self.pid.to_string()])).await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
