//! What the request-path benchmark measures, set up on this machine: a throwaway Postgres 15
//! with a control and a shard database migrated by `bookmarks migrate`, one tenant of
//! `rows` bookmarks (and a small one), the app (`bookmarks serve`, API keys), the same app
//! trusting the tenant header, and the bare handler (`examples/bare_list`). `bench
//! ready-flood` and `bench instructions` set up the same through [`Setup::start`]; all of
//! it is stopped and removed when the [`Setup`] is dropped.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::Command;
use tokio::time::{Instant, sleep};

pub use super::served::Served;
use crate::postgres::{self, Server, free_port};
use crate::process::{self, output};

/// loadgen's name for its first tenant, so that the open loop (`--tenants 1`) reads it.
pub const TENANT: &str = "tenant-0001";
/// The common case: a tenant of a few bookmarks.
pub const SMALL_TENANT: &str = "small-tenant";

/// The set-up's knobs, shared by the benchmarks that use it.
#[derive(clap::Args, Debug, Clone)]
pub struct SetupArgs {
    /// Bookmarks of the measured tenant.
    #[arg(long, env = "ROWS", default_value_t = 5000)]
    pub rows: u64,
    /// Bookmarks of the small tenant.
    #[arg(long, env = "SMALL_ROWS", default_value_t = 20)]
    pub small_rows: u64,
    /// The shard pool's size, the app's and the bare handler's alike.
    #[arg(long, env = "POOL_SIZE", default_value_t = 8)]
    pub pool_size: u32,
    /// The app's binary (another build's, say) instead of target/release/bookmarks.
    #[arg(long, env = "APP_BIN")]
    pub app_bin: Option<PathBuf>,
    /// The bare handler's binary instead of target/release/examples/bare_list.
    #[arg(long, env = "BARE_BIN")]
    pub bare_bin: Option<PathBuf>,
    /// RUST_LOG for the app (default: its own, info).
    #[arg(long, env = "APP_RUST_LOG")]
    pub app_rust_log: Option<String>,
    /// LOG_FORMAT for the app (default: its own, text).
    #[arg(long, env = "APP_LOG_FORMAT")]
    pub app_log_format: Option<String>,
    /// Measure target/release as it is instead of building it first.
    #[arg(long, env = "SKIP_BUILD", value_parser = clap::builder::FalseyValueParser::new())]
    pub skip_build: bool,
}

/// How [`Setup::start`] runs.
pub struct Options {
    pub args: SetupArgs,
    /// Keep the temporary directory (logs, wrk's outputs, profiles) instead of removing it.
    pub keep: bool,
    /// Run the three servers under `valgrind --tool=callgrind`, profiles written here.
    pub callgrind: Option<PathBuf>,
}

/// Everything set up; dropping it stops the servers and Postgres and removes the directory.
pub struct Setup {
    pub app: Served,
    /// The same app with `auth = "trusted_header"`: the tenant header alone, no key.
    pub trusted: Served,
    pub bare: Served,
    /// A bookmark of [`TENANT`]'s from the middle of its list.
    pub get_id: String,
    /// [`TENANT`]'s API key, and [`SMALL_TENANT`]'s.
    pub key: String,
    pub small_key: String,
    /// The app's admin token (loadgen makes its keys with it).
    pub admin_token: String,
    pub rows: u64,
    pub small_rows: u64,
    pub pool_size: u32,
    /// The temporary directory: configs, logs, outputs.
    pub work: PathBuf,
    shard: tokio_postgres::Client,
    http: reqwest::Client,
    pub postgres: Server,
    dir: Option<tempfile::TempDir>,
}

impl SetupArgs {
    /// Builds the app and the bare handler unless told not to; their paths.
    pub async fn binaries(&self) -> Result<(PathBuf, PathBuf)> {
        if !self.skip_build {
            eprintln!("== building (release)");
            process::build_release(&["--bin", "bookmarks", "--example", "bare_list"]).await?;
        }
        let given = |path: &Option<PathBuf>| path.clone().filter(|p| !p.as_os_str().is_empty());
        let app = given(&self.app_bin).unwrap_or_else(|| process::release_binary("bookmarks"));
        let bare =
            given(&self.bare_bin).unwrap_or_else(|| process::release_binary("examples/bare_list"));
        for binary in [&app, &bare] {
            if !binary.is_file() {
                bail!(
                    "no {} (build first: cargo build --release --bin bookmarks --example bare_list)",
                    binary.display()
                );
            }
        }
        Ok((app, bare))
    }
}

/// The app's configuration: one shard plus control, directory routing, `auth` as given.
fn config(db: &str, pool_size: u32, auth: &str) -> String {
    format!(
        r#"[database]
primary_url = "{db}/bookmarks_control?connect_timeout=2"
pool_size = 8
primary_pool_size = {pool_size}
replica_pool_size = 4
replica_fallback = "primary"
connect_timeout_ms = 2000
acquire_timeout_ms = 3000

[[database.shards]]
name = "shard0"
primary_url = "{db}/bookmarks_shard?connect_timeout=2"
slots = ["0-16383"]

[tenancy]
enabled = true
source = "header"
header = "X-Tenant-Id"
auth = "{auth}"
# One tenant takes all the load here: its bulkhead (16 by default, fairness between
# tenants, measured by the whale experiment) would refuse the open loop's bursts.
max_in_flight_per_tenant = 4096

[sharding]
pins = {{}}
directory_router = true
directory_cache_ttl_ms = 30000
"#
    )
}

/// Rows of the measured tenant with UUIDv7-shaped (time-ordered) ids, as the app mints
/// them, and the small tenant's.
fn seed_sql(rows: u64, small_rows: u64) -> String {
    format!(
        "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, created_at, updated_at)
SELECT '{TENANT}',
       (lpad(to_hex(x.ms), 12, '0') || '7' || substr(x.h, 1, 3) || '8' || substr(x.h, 4, 15))::uuid,
       'https://example.com/seed/' || i, 'Seeded bookmark ' || i,
       'Notes of seeded bookmark ' || i, ARRAY['bench', 'tag' || (i % 10)], t.ts, t.ts
FROM generate_series(1, {rows}) AS i,
     LATERAL (SELECT now() - make_interval(secs => {rows} - i) AS ts) AS t,
     LATERAL (SELECT (extract(epoch FROM t.ts) * 1000)::bigint AS ms, md5(i::text) AS h) AS x;
INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags)
SELECT '{SMALL_TENANT}', gen_random_uuid(), 'https://example.com/small/' || i, 'Small ' || i,
       '', ARRAY['bench'] FROM generate_series(1, {small_rows}) AS i;"
    )
}

/// The app's binary with the environment it must not inherit (the app's own overrides)
/// removed, and the logging asked for.
fn app_command(program: impl AsRef<std::ffi::OsStr>, args: &SetupArgs) -> Command {
    let mut command = process::app_command(program);
    let set = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    if let Some(filter) = set(&args.app_rust_log) {
        command.env("RUST_LOG", filter);
    }
    if let Some(format) = set(&args.app_log_format) {
        command.env("LOG_FORMAT", format);
    }
    command
}

impl Setup {
    /// Sets everything up and checks that the three servers answer alike.
    pub async fn start(options: Options) -> Result<Setup> {
        let Options {
            args,
            keep,
            callgrind,
        } = options;
        postgres::require_binaries().await?;
        let (app_bin, bare_bin) = args.binaries().await?;

        let dir = tempfile::Builder::new()
            .prefix("bench-request-path.")
            .tempdir_in("/tmp")
            .context("cannot create a temporary directory in /tmp")?;
        let work = dir.path().to_path_buf();
        let dir = if keep {
            let _ = dir.keep();
            None
        } else {
            Some(dir)
        };
        let pg_port = free_port(25432)?;
        let app_port = free_port(23000)?;
        let bare_port = free_port(app_port + 1)?;
        let trusted_port = free_port(bare_port + 1)?;

        eprintln!("== starting Postgres 15 on 127.0.0.1:{pg_port}");
        let postgres = Server::start(&work.join("pg"), pg_port, 100).await?;
        // Server::start turns synchronous_commit off; the figures in docs/ were measured
        // with it on (fsync off alone), so the app's role, and pgbench's, get it back.
        // One statement at a time: CREATE DATABASE refuses to run inside a transaction.
        for sql in [
            "ALTER ROLE bookmarks SET synchronous_commit = on",
            "CREATE DATABASE bookmarks_control OWNER bookmarks",
            "CREATE DATABASE bookmarks_shard OWNER bookmarks",
        ] {
            postgres.execute("postgres", "postgres", sql).await?;
        }

        let db = format!("postgres://bookmarks:bookmarks@127.0.0.1:{pg_port}");
        let config_path = work.join("autumn.toml");
        let trusted_path = work.join("autumn-trusted.toml");
        std::fs::write(&config_path, config(&db, args.pool_size, "api_key"))
            .with_context(|| format!("cannot write {}", config_path.display()))?;
        std::fs::write(&trusted_path, config(&db, args.pool_size, "trusted_header"))
            .with_context(|| format!("cannot write {}", trusted_path.display()))?;

        eprintln!("== migrating");
        output(
            app_command(&app_bin, &args)
                .arg("--config")
                .arg(&config_path)
                .arg("migrate"),
        )
        .await?;

        eprintln!("== seeding {} bookmarks for tenant {TENANT}", args.rows);
        let shard = postgres::connect(&postgres.url("bookmarks", "bookmarks_shard")).await?;
        shard
            .batch_execute(&seed_sql(args.rows, args.small_rows))
            .await
            .context("seeding the tenants' bookmarks")?;
        shard
            .batch_execute("VACUUM ANALYZE")
            .await
            .context("VACUUM ANALYZE")?;
        let get_id = postgres
            .value(
                "bookmarks",
                "bookmarks_shard",
                &format!(
                    "SELECT id FROM bookmarks WHERE tenant_id = '{TENANT}' ORDER BY id OFFSET {} LIMIT 1",
                    args.rows / 2
                ),
            )
            .await?;
        if get_id.is_empty() {
            bail!(
                "tenant {TENANT} has no bookmark to get (--rows {})",
                args.rows
            );
        }
        let key = create_key(&app_bin, &args, &config_path, TENANT).await?;
        let small_key = create_key(&app_bin, &args, &config_path, SMALL_TENANT).await?;
        let admin_token = process::random_token();

        eprintln!(
            "== starting the app on 127.0.0.1:{app_port} and the bare handler on 127.0.0.1:{bare_port}"
        );
        let launch = |name: &'static str, binary: &Path| -> Command {
            match &callgrind {
                Some(profiles) => {
                    let mut command = app_command("valgrind", &args);
                    let mut flag = OsString::from("--callgrind-out-file=");
                    flag.push(profiles.join(format!("{name}.%p.out")));
                    command.arg("--tool=callgrind").arg(flag).arg(binary);
                    command
                }
                None => app_command(binary, &args),
            }
        };
        let mut app_cmd = launch("app", &app_bin);
        app_cmd
            .env("ADMIN_TOKEN", &admin_token)
            .arg("--config")
            .arg(&config_path)
            .args([
                "serve",
                "--bind",
                &format!("127.0.0.1:{app_port}"),
                "--instance-name",
                "bench",
            ]);
        let app = Served::spawn("app", app_port, app_cmd, &work)?;
        let mut trusted_cmd = launch("trusted", &app_bin);
        trusted_cmd.arg("--config").arg(&trusted_path).args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{trusted_port}"),
            "--instance-name",
            "bench-trusted",
        ]);
        let trusted = Served::spawn("trusted", trusted_port, trusted_cmd, &work);
        let mut bare_cmd = launch("bare", &bare_bin);
        bare_cmd
            .env(
                "DATABASE_URL",
                format!("{db}/bookmarks_shard?connect_timeout=2"),
            )
            .env("BIND", format!("127.0.0.1:{bare_port}"))
            .env("POOL_SIZE", args.pool_size.to_string())
            .env("SHARD", "shard0");
        let bare = Served::spawn("bare", bare_port, bare_cmd, &work);
        let (trusted, bare) = (trusted?, bare?);

        let mut setup = Setup {
            app,
            trusted,
            bare,
            get_id,
            key,
            small_key,
            admin_token,
            rows: args.rows,
            small_rows: args.small_rows,
            pool_size: args.pool_size,
            work,
            shard,
            http: reqwest::Client::new(),
            postgres,
            dir,
        };
        // Under callgrind the servers start some fifty times slower.
        let patience = Duration::from_secs(if callgrind.is_some() { 300 } else { 10 });
        setup.check(patience).await?;
        Ok(setup)
    }

    /// Waits until all three answer, then checks that the key check is on the app's path
    /// and that all three answer the same shapes.
    async fn check(&mut self, patience: Duration) -> Result<()> {
        let deadline = Instant::now() + patience;
        let headers = self.headers();
        for served in [&mut self.app, &mut self.bare, &mut self.trusted] {
            served.wait_up(&self.http, &headers, deadline).await?;
        }
        let url = format!("{}/api/bookmarks", self.app.url);
        let refused = self
            .http
            .get(&url)
            .header("X-Tenant-Id", TENANT)
            .send()
            .await?;
        if refused.status() != reqwest::StatusCode::UNAUTHORIZED {
            bail!(
                "the app answered {} without a key, not 401",
                refused.status()
            );
        }
        for served in [&self.app, &self.bare, &self.trusted] {
            let list = self.fetch(&format!("{}/api/bookmarks", served.url)).await?;
            let items = list["items"].as_array().map_or(0, Vec::len);
            if items != 20 {
                bail!(
                    "list on {} ({}) returned {items} items, not 20",
                    served.url,
                    served.name
                );
            }
            let one = self
                .fetch(&format!("{}/api/bookmarks/{}", served.url, self.get_id))
                .await?;
            if one["id"].as_str() != Some(self.get_id.as_str()) {
                bail!(
                    "get on {} ({}) returned id {}",
                    served.url,
                    served.name,
                    one["id"]
                );
            }
        }
        Ok(())
    }

    /// The measured tenant's headers: every server gets the same, the bare handler ignores
    /// the key.
    pub fn headers(&self) -> [(&'static str, String); 2] {
        [
            ("X-Tenant-Id", TENANT.to_owned()),
            ("Authorization", format!("Bearer {}", self.key)),
        ]
    }

    /// GET `url` with the measured tenant's headers; its JSON body.
    pub async fn fetch(&self, url: &str) -> Result<serde_json::Value> {
        let mut request = self.http.get(url);
        for (name, value) in self.headers() {
            request = request.header(name, value);
        }
        let response = request.send().await.with_context(|| format!("GET {url}"))?;
        let response = response
            .error_for_status()
            .with_context(|| format!("GET {url}"))?;
        response
            .json()
            .await
            .with_context(|| format!("GET {url}: not JSON"))
    }

    /// Waits (up to two minutes) until the reindexer has worked off the search backlog, so
    /// that no measurement pays for the one before.
    pub async fn wait_backlog(&self) -> Result<()> {
        let mut pending = 0;
        for _ in 0..600 {
            let row = self
                .shard
                .query_one("SELECT count(*) FROM search_pending", &[])
                .await
                .context("counting search_pending")?;
            pending = row.get::<_, i64>(0);
            if pending == 0 {
                return Ok(());
            }
            sleep(Duration::from_millis(200)).await;
        }
        eprintln!("== warning: search backlog still {pending} rows");
        Ok(())
    }

    /// Where Postgres logs (the list SQL is captured from it).
    pub fn postgres_log(&self) -> PathBuf {
        self.work.join("pg").join("postgres.log")
    }

    /// Stops the three servers (SIGTERM, then SIGKILL after ten seconds); the rest goes on drop.
    pub async fn stop(&mut self) {
        for served in [&mut self.app, &mut self.trusted, &mut self.bare] {
            served.terminate().await;
        }
    }

    /// Whether the temporary directory stays.
    pub fn kept(&self) -> bool {
        self.dir.is_none()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if self.kept() {
            eprintln!("== kept {}", self.work.display());
        }
    }
}

async fn create_key(
    app_bin: &Path,
    args: &SetupArgs,
    config: &Path,
    tenant: &str,
) -> Result<String> {
    let key = output(
        app_command(app_bin, args)
            .arg("--config")
            .arg(config)
            .args(["keys", "create", tenant, "--note", "bench", "--key-only"]),
    )
    .await?;
    Ok(key.trim().to_owned())
}
