//! Tenant moves the nemesis starts or kills: `move_slot` run in a container of the stack
//! (`docker compose run move_slot …`), each move finished in the end (resumed, several times
//! if a fault is in the way), and what became of it written to the timeline.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Result;

use super::record::{Log, Timeline};
use super::schedule::AfterKill;
use crate::compose::Compose;
use crate::process::{output, succeeds};

/// A `move_slot` call that takes longer than this is stopped (`timeout`, as by hand).
const MOVE_SLOT_WITHIN: &str = "180";
/// `bookmarks route` in a web replica.
const ROUTE_WITHIN: &str = "20";

/// What the fault loop and the moves beside it share.
pub struct Shared {
    pub compose: Compose,
    pub timeline: Timeline,
    pub log: Log,
    /// `move_slot --grace` (`None`: the stack's default).
    pub grace: Option<&'static str>,
}

/// What a move moves: a tenant, or a range of slots (`0-511`).
#[derive(Clone, Debug)]
pub enum Moved {
    Tenant(String),
    Slots(String),
}

impl Moved {
    /// The timeline's target: the tenant, or the slot range.
    pub fn target(&self) -> &str {
        match self {
            Moved::Tenant(t) | Moved::Slots(t) => t,
        }
    }

    fn args(&self) -> [&str; 2] {
        match self {
            Moved::Tenant(t) => ["--tenant", t],
            Moved::Slots(s) => ["--slots", s],
        }
    }
}

/// The shard a move from `from` goes to.
pub fn other_shard(from: &str) -> &'static str {
    if from == "shard0" { "shard1" } else { "shard0" }
}

impl Shared {
    /// Writes a timeline line; a failure is logged (a move's line must not stop the others).
    pub fn event(&self, seq: u64, fault: &str, target: &str, phase: &str, detail: &str) {
        if let Err(e) = self.timeline.event(seq, fault, target, phase, detail) {
            self.log.say(&format!("{e:#}"));
        }
    }

    /// `ARGS… [--grace G]`: a step that waits out the routers' cache takes the plan's grace.
    fn graced<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut args = args.to_vec();
        if let Some(grace) = self.grace {
            args.extend(["--grace", grace]);
        }
        args
    }

    /// `docker compose run move_slot ARGS…`, killed after `MOVE_SLOT_WITHIN`.
    fn move_slot_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = self.compose.command("timeout");
        command
            .arg(MOVE_SLOT_WITHIN)
            .args(["docker", "compose", "run", "--rm", "-T", "move_slot"])
            .args(args);
        command
    }

    /// `move_slot ARGS…` in a container of its own, bounded in time; its exit code
    /// (`None`: it could not run or was killed).
    async fn move_slot(&self, args: &[&str]) -> Option<i32> {
        let mut command = self.move_slot_command(args);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command.status().await.ok().and_then(|s| s.code())
    }

    /// The shard the web replicas route `tenant` to (asked of either replica).
    pub async fn route_of(&self, tenant: &str) -> Option<String> {
        for service in ["web1", "web2"] {
            let mut command = self.compose.command("timeout");
            command.args([
                ROUTE_WITHIN,
                "docker",
                "compose",
                "exec",
                "-T",
                service,
                "bookmarks",
                "route",
                tenant,
            ]);
            let Ok(out) = output(&mut command).await else {
                continue;
            };
            let first = out.lines().next().unwrap_or_default();
            let shard = serde_json::from_str::<serde_json::Value>(first)
                .ok()
                .and_then(|route| route["shard"].as_str().map(str::to_owned));
            if shard.is_some() {
                return shard;
            }
        }
        None
    }

    /// `(id, tenants or slots)` of every move neither done nor aborted.
    pub async fn unfinished_moves(&self) -> Vec<(String, String)> {
        let mut command = self.move_slot_command(&["status"]);
        command.stdin(Stdio::null()).stderr(Stdio::null());
        // Whatever it printed counts, even if it failed on the way.
        let Ok(out) = command.output().await else {
            return Vec::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|m| !matches!(m["state"].as_str(), Some("done" | "aborted")))
            .filter_map(|m| {
                let id = match &m["id"] {
                    serde_json::Value::Null => return None,
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let what = match m["slots"].as_str() {
                    Some(slots) if !slots.is_empty() => slots.to_owned(),
                    _ => m["tenants"]
                        .as_array()
                        .map(|ts| {
                            ts.iter()
                                .filter_map(|t| t.as_str())
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default(),
                };
                Some((id, what))
            })
            .collect()
    }

    /// The last unfinished move of `target`.
    async fn unfinished_move_of(&self, target: &str) -> Option<String> {
        self.unfinished_moves()
            .await
            .into_iter()
            .filter(|(_, what)| what == target)
            .map(|(id, _)| id)
            .next_back()
    }

    /// Resumes a stopped move to its end, a few times if a fault is in the way.
    pub async fn finish_move(&self, id: &str) -> bool {
        for attempt in 1..=6 {
            if self
                .move_slot(&self.graced(&["resume", id, "--confirm"]))
                .await
                == Some(0)
            {
                return true;
            }
            self.log.say(&format!(
                "move {id}: resume attempt {attempt} failed; again in 5 s"
            ));
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        false
    }

    /// A whole move from `from` to `to`, resumed if a fault stops it.
    pub async fn run_move(&self, seq: u64, moved: Moved, from: String, to: &str) {
        let target = moved.target();
        self.event(seq, "move", target, "start", &format!("{from}->{to}"));
        let [flag, value] = moved.args();
        let run = self.graced(&["run", "--from", &from, "--to", to, flag, value, "--confirm"]);
        let code = self.move_slot(&run).await;
        let result = match code {
            Some(0) => "done",
            // The tenant is in another move, say: nothing changed.
            Some(2) => "refused",
            _ => match self.unfinished_move_of(target).await {
                None => "stopped",
                Some(id) if self.finish_move(&id).await => "stopped, resumed",
                Some(_) => "stopped, not resumed",
            },
        };
        self.event(seq, "move", target, "end", result);
        self.log
            .say(&format!("move of {target} {from}->{to}: {result}"));
    }

    /// A tenant's move killed `delay` seconds in, then resumed or aborted; the fault's end.
    pub async fn kill_move(
        &self,
        seq: u64,
        tenant: &str,
        delay: u64,
        then: AfterKill,
    ) -> Result<()> {
        let Some(from) = self.route_of(tenant).await else {
            return self
                .timeline
                .event(seq, "kill-move", tenant, "end", "skipped: route unknown");
        };
        let container = format!("{}{seq}", self.kill_move_prefix());
        let to = other_shard(&from);
        let mut run = self
            .compose
            .cmd(&["run", "-d", "--name", &container, "move_slot"]);
        run.args(self.graced(&[
            "run",
            "--from",
            &from,
            "--to",
            to,
            "--tenant",
            tenant,
            "--confirm",
        ]));
        succeeds(&mut run).await;
        tokio::time::sleep(Duration::from_secs(delay)).await;
        succeeds(
            self.compose
                .command("docker")
                .args(["kill", "-s", "KILL", &container]),
        )
        .await;
        succeeds(
            self.compose
                .command("docker")
                .args(["rm", "-f", &container]),
        )
        .await;
        let action = then.name();
        let result = match self.unfinished_move_of(tenant).await {
            None => format!(
                "killed after {delay}s: no move left to {action} (not started, or already done)"
            ),
            Some(id)
                if then == AfterKill::Abort && self.move_slot(&["abort", &id]).await == Some(0) =>
            {
                format!("killed after {delay}s; move {id} aborted")
            }
            Some(id) if self.finish_move(&id).await => {
                let refused = if then == AfterKill::Abort {
                    " (abort refused: the destination had taken writes)"
                } else {
                    ""
                };
                format!("killed after {delay}s; move {id} resumed to the end{refused}")
            }
            Some(id) => format!("killed after {delay}s; move {id} could not be finished"),
        };
        let written = self
            .timeline
            .event(seq, "kill-move", tenant, "end", &result);
        self.log.say(&format!("kill-move {tenant}: {result}"));
        written
    }

    /// The name of the containers of killed moves, up to their sequence number.
    pub fn kill_move_prefix(&self) -> String {
        format!("{}-nemesis-move-", self.compose.project())
    }
}
