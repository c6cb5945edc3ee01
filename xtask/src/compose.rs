//! The compose stacks the harnesses run: [`Compose`] is `docker compose` with a project,
//! its files and its environment (the nemesis uses the caller's, as `docker compose` does);
//! [`Stack`] is a stack of a harness's own, started on its own port and taken down,
//! volumes too, when it is dropped.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::process::Command;

use crate::process::{self, output, succeeds};

/// `docker compose` with a fixed environment, run from the workspace's root.
#[derive(Clone, Debug, Default)]
pub struct Compose {
    env: Vec<(String, String)>,
}

impl Compose {
    /// The project and files of this process's environment (`COMPOSE_PROJECT_NAME`,
    /// `COMPOSE_FILE`, `.env`), as a plain `docker compose` would use them.
    pub fn ambient() -> Compose {
        Compose::default()
    }

    /// `docker compose` with these variables set (project, files, published ports).
    pub fn with_env<K: Into<String>, V: Into<String>>(
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Compose {
        Compose {
            env: env.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
        }
    }

    /// Sets (or replaces) one variable of every later call.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.into()));
    }

    /// The value of a variable this compose was given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Adds a file to `COMPOSE_FILE` (compose/shard2.yml, say).
    pub fn add_file(&mut self, file: &str) {
        let files = self
            .get("COMPOSE_FILE")
            .map(str::to_owned)
            .or_else(|| std::env::var("COMPOSE_FILE").ok())
            .unwrap_or_else(|| "docker-compose.yml".into());
        self.set("COMPOSE_FILE", format!("{files}:{file}"));
    }

    /// The project's name (the environment's, else compose's default, the folder's name).
    pub fn project(&self) -> String {
        self.get("COMPOSE_PROJECT_NAME")
            .map(str::to_owned)
            .or_else(|| std::env::var("COMPOSE_PROJECT_NAME").ok())
            .unwrap_or_else(|| "bookmarks".into())
    }

    /// Any program, in this compose's environment.
    pub fn command(&self, program: &str) -> Command {
        let mut command = process::command(program);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// `docker compose ARGS…`, not yet run.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut command = self.command("docker");
        command.arg("compose").args(args);
        command
    }

    /// `docker compose ARGS…` to its end: its stdout, or an error with what it printed.
    pub async fn run(&self, args: &[&str]) -> Result<String> {
        output(&mut self.cmd(args)).await
    }

    /// `docker compose ARGS…` to its end: whether it succeeded (its output dropped).
    pub async fn try_run(&self, args: &[&str]) -> bool {
        succeeds(&mut self.cmd(args)).await
    }

    /// A service's container addresses, space-separated ("" when it has no container).
    pub async fn address_of(&self, service: &str) -> String {
        let Ok(id) = self.run(&["ps", "-q", service]).await else {
            return String::new();
        };
        let id = id.trim();
        if id.is_empty() {
            return String::new();
        }
        output(self.command("docker").args([
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
            id,
        ]))
        .await
        .unwrap_or_default()
        .trim()
        .to_owned()
    }

    /// Until a web replica answers /ready inside its container, or the worker runs;
    /// false after `within`.
    pub async fn wait_ready(&self, service: &str, within: Duration) -> bool {
        let started = Instant::now();
        loop {
            let ready = if service == "worker" {
                self.run(&["ps", "--format", "{{.State}}", "worker"])
                    .await
                    .is_ok_and(|state| state.trim() == "running")
            } else {
                self.try_run(&[
                    "exec",
                    "-T",
                    service,
                    "curl",
                    "-fsS",
                    "-o",
                    "/dev/null",
                    "http://127.0.0.1:3000/ready",
                ])
                .await
            };
            if ready {
                return true;
            }
            if started.elapsed() > within {
                return false;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// nginx resolved the replicas' names when it started: a replica that came back at
    /// another address than `before` needs nginx reloaded.
    pub async fn follow_address(&self, service: &str, before: &str) -> Result<()> {
        let after = self.address_of(service).await;
        if after != before {
            eprintln!("{service} has a new address ({before} -> {after}): reloading nginx");
            self.run(&["exec", "-T", "nginx", "nginx", "-s", "reload"])
                .await?;
        }
        Ok(())
    }
}

/// A compose stack of a harness's own: its project name, nginx on its own port, an admin
/// token its web replicas take, the offline override when the stand-in app image exists.
pub struct Stack {
    pub compose: Compose,
    /// nginx, as `http://127.0.0.1:PORT`.
    pub base: String,
    pub admin_token: String,
    http: reqwest::Client,
}

impl Stack {
    /// The stack's settings; nothing is started yet.
    pub async fn new(project: &str, http_port: u16) -> Result<Stack> {
        let mut files = "docker-compose.yml".to_owned();
        let offline = succeeds(process::command("docker").args([
            "image",
            "inspect",
            "bookmarks-sharded:offline",
        ]))
        .await;
        if offline {
            files.push_str(":compose/offline.yml");
        }
        let admin_token = std::env::var("ADMIN_TOKEN").unwrap_or_else(|_| process::random_token());
        let compose = Compose::with_env([
            ("COMPOSE_PROJECT_NAME", project.to_owned()),
            ("COMPOSE_FILE", files),
            ("BOOKMARKS_HTTP_PORT", http_port.to_string()),
            ("ADMIN_TOKEN", admin_token.clone()),
        ]);
        Ok(Stack {
            compose,
            base: format!("http://127.0.0.1:{http_port}"),
            admin_token,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
        })
    }

    /// `docker compose up -d --wait` (services that stop on purpose, such as `migrate`,
    /// make --wait fail: then a plain `up -d`), then until nginx serves /ready.
    pub async fn up(&self) -> Result<()> {
        if !self.compose.try_run(&["up", "-d", "--wait"]).await {
            self.compose.run(&["up", "-d"]).await?;
        }
        self.wait_served(Duration::from_secs(300)).await
    }

    /// Until nginx answers /ready with 200, at most `within`.
    pub async fn wait_served(&self, within: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            let ok = self
                .http
                .get(format!("{}/ready", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return Ok(());
            }
            if started.elapsed() > within {
                bail!("{}/ready did not answer 200 within {within:?}", self.base);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// A new API key for `tenant`, made with the CLI in web1.
    pub async fn key_for(&self, tenant: &str) -> Result<String> {
        let project = self.compose.project();
        let key = self
            .compose
            .run(&[
                "exec",
                "-T",
                "web1",
                "bookmarks",
                "keys",
                "create",
                tenant,
                "--note",
                &project,
                "--key-only",
            ])
            .await?;
        Ok(key.trim().to_owned())
    }

    /// The schema owner's password, which the stack makes on its first start.
    pub async fn owner_password(&self) -> Result<String> {
        let out = self
            .compose
            .run(&[
                "exec",
                "-T",
                "postgres-shard-0",
                "cat",
                "/run/secrets/db-owner/password",
            ])
            .await?;
        Ok(out.trim().to_owned())
    }

    /// The shard `tenant` routes to, as web1 says (`bookmarks route`).
    pub async fn shard_of(&self, tenant: &str) -> Result<String> {
        let out = self
            .compose
            .run(&["exec", "-T", "web1", "bookmarks", "route", tenant])
            .await?;
        let route: serde_json::Value = serde_json::from_str(out.trim())
            .with_context(|| format!("bookmarks route {tenant} printed {out}"))?;
        route["shard"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("bookmarks route {tenant} printed {out}"))
    }

    /// Holds each named service to `cpus` cores (`docker update --cpus`), standing in for a
    /// server of its own.
    pub async fn limit_cpus(&self, services: &[&str], cpus: f64) -> Result<()> {
        let mut args = vec!["ps", "-q"];
        args.extend_from_slice(services);
        let ids = self.compose.run(&args).await?;
        let mut command = self.compose.command("docker");
        command
            .args(["update", "--cpus", &cpus.to_string()])
            .args(ids.split_whitespace());
        output(&mut command).await?;
        Ok(())
    }

    /// A loadgen configuration against this stack (its nginx and its admin token).
    pub fn load(&self) -> loadgen::Config {
        loadgen::Config {
            base_url: self.base.clone(),
            admin_token: Some(self.admin_token.clone()),
            ..loadgen::Config::default()
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // Every profile, so that services started under one (shard2) go too.
        let status = std::process::Command::new("docker")
            .current_dir(process::root())
            .envs(self.compose.env.iter().map(|(k, v)| (k, v)))
            .env("COMPOSE_PROFILES", "*")
            .args(["compose", "down", "-v", "--remove-orphans"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("could not take the stack {} down", self.compose.project());
        }
    }
}
