//! Test harness: real Postgres servers in containers, fresh databases per test, the real
//! application spawned on a free port, and named looks into the databases.
//!
//! The image is `postgres:15` unless `BOOKMARKS_POSTGRES_IMAGE` names another with the same
//! contract (`scripts/build-offline-images.sh` builds `bookmarks-offline/postgres:15` on
//! machines without a registry). Servers shared by the test binary live for the whole
//! process and are removed when it exits; tests that stop servers start their own.

mod internals;
mod pgbouncer;
mod relay;

use std::cell::RefCell;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{OnceCell, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bookmarks_sharded::configuration::Settings;
use bookmarks_sharded::migrate::{self, TargetFilter};
use bookmarks_sharded::startup::{Application, ServeOptions};
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, CopyTargetOptions, GenericImage, ImageExt};
use testcontainers_modules::postgres::Postgres;

pub const USER: &str = "bookmarks";
pub const PASSWORD: &str = "bookmarks";
const REPLICATION_PASSWORD: &str = "replication-secret";

/// `name:tag` of the Postgres image to run.
pub fn postgres_image() -> (String, String) {
    let image =
        std::env::var("BOOKMARKS_POSTGRES_IMAGE").unwrap_or_else(|_| "postgres:15".to_owned());
    match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name.to_owned(), tag.to_owned()),
        _ => (image, "latest".to_owned()),
    }
}

pub use crate::common::{eventually, eventually_every, free_port, unique};
pub use internals::*;
pub use relay::Relay;

/// One Postgres server in a container.
pub struct Server {
    pub container: ContainerAsync<Postgres>,
    pub name: String,
    pub port: u16,
}

/// A streaming replica of a [`Server`].
pub struct Replica {
    pub container: ContainerAsync<GenericImage>,
    pub port: u16,
}

/// Containers and networks kept for the whole process; removed at exit (statics are never
/// dropped, so testcontainers cannot clean them up itself).
static STARTED: LazyLock<Mutex<Vec<String>>> = LazyLock::new(|| Mutex::new(Vec::new()));
static NETWORKS: LazyLock<Mutex<Vec<String>>> = LazyLock::new(|| Mutex::new(Vec::new()));

#[ctor::dtor]
fn remove_shared_containers() {
    let docker = |args: &[&str], names: &[String]| {
        if !names.is_empty() {
            let _ = std::process::Command::new("docker")
                .args(args)
                .args(names)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    };
    docker(
        &["rm", "-f", "-v"],
        &STARTED.lock().map(|v| v.clone()).unwrap_or_default(),
    );
    docker(
        &["network", "rm"],
        &NETWORKS.lock().map(|v| v.clone()).unwrap_or_default(),
    );
}

/// Removes `network` when the process exits (for networks of kept containers).
pub fn remove_network_at_exit(network: &str) {
    NETWORKS.lock().unwrap().push(network.to_owned());
}

/// Starts a primary on `network`, ready to serve a streaming replica.
pub async fn start_server(network: &str) -> Server {
    let (name, tag) = postgres_image();
    let container_name = unique("bookmarks-pg");
    let port = free_port();
    let container = Postgres::default()
        .with_user(USER)
        .with_password(PASSWORD)
        .with_db_name("postgres")
        .with_name(name)
        .with_tag(tag)
        .with_env_var("POSTGRES_REPLICATION_PASSWORD", REPLICATION_PASSWORD)
        .with_copy_to(
            CopyTargetOptions::new("/docker-entrypoint-initdb.d/10-replication.sh")
                .with_mode(0o755),
            include_bytes!("../../../docker/postgres/primary-init/10-replication.sh").to_vec(),
        )
        .with_cmd(["postgres", "-c", "max_connections=300", "-c", "fsync=off"])
        .with_network(network)
        .with_container_name(&container_name)
        .with_mapped_port(port, 5432.tcp())
        .with_startup_timeout(Duration::from_secs(120))
        .start()
        .await
        .expect("start postgres (set BOOKMARKS_POSTGRES_IMAGE on machines without a registry)");
    Server {
        container,
        name: container_name,
        port,
    }
}

/// Starts a streaming replica of `primary` (cloned with pg_basebackup).
pub async fn start_replica(primary: &Server, network: &str) -> Replica {
    let (name, tag) = postgres_image();
    let port = free_port();
    let container = GenericImage::new(name, tag)
        .with_wait_for(WaitFor::message_on_stderr(
            "database system is ready to accept read-only connections",
        ))
        .with_copy_to(
            CopyTargetOptions::new("/usr/local/bin/replica-entrypoint.sh").with_mode(0o755),
            include_bytes!("../../../docker/postgres/replica-entrypoint.sh").to_vec(),
        )
        // A standby needs at least the primary's max_connections.
        .with_cmd([
            "/usr/local/bin/replica-entrypoint.sh",
            "-c",
            "max_connections=300",
        ])
        .with_env_var("PRIMARY_HOST", &primary.name)
        .with_env_var("POSTGRES_REPLICATION_PASSWORD", REPLICATION_PASSWORD)
        .with_network(network)
        .with_container_name(unique("bookmarks-pg-replica"))
        .with_mapped_port(port, 5432.tcp())
        .with_startup_timeout(Duration::from_secs(120))
        .start()
        .await
        .expect("start replica");
    Replica { container, port }
}

/// Keeps a container for the life of the process (removed by the exit hook).
pub fn keep_until_exit<I: testcontainers::Image>(c: ContainerAsync<I>) {
    STARTED.lock().unwrap().push(c.id().to_owned());
    std::mem::forget(c);
}

/// The URL the app is given for `db` on the server at `port` (through a PgBouncer when
/// the experiment in [`pgbouncer`] is on).
pub fn url(port: u16, db: &str) -> String {
    let port = pgbouncer::front(port);
    format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{port}/{db}?connect_timeout=2")
}

/// A session of its own on a server (e.g. to hold a lock the app must wait for).
pub async fn session(port: u16, db: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user={USER} password={PASSWORD} dbname={db}"),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap_or_else(|e| panic!("connect to {port}/{db}: {e}"));
    tokio::spawn(conn);
    client
}

/// Runs SQL on a server, returning rows as text columns.
pub async fn sql(port: u16, db: &str, query: &str) -> Vec<Vec<Option<String>>> {
    let client = session(port, db).await;
    let rows = client
        .simple_query(query)
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    rows.into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}

pub async fn create_database(port: u16, db: &str) {
    sql(port, "postgres", &format!("CREATE DATABASE \"{db}\"")).await;
}

/// Ports of the servers shared by one test binary: control, shard0 with a streaming
/// replica, shard1 (containers live until the process exits).
pub struct Cluster {
    pub control: u16,
    pub shard0: u16,
    pub replica0: u16,
    pub shard1: u16,
}

/// The shared servers outlive every test's runtime, so they are started on their own.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
});
static CLUSTER: OnceCell<Cluster> = OnceCell::const_new();

pub async fn cluster() -> &'static Cluster {
    CLUSTER
        .get_or_init(|| async {
            RUNTIME
                .spawn(async {
                    let network = unique("bookmarks-test-net");
                    remove_network_at_exit(&network);
                    let (control, shard0, shard1) = tokio::join!(
                        start_server(&network),
                        start_server(&network),
                        start_server(&network)
                    );
                    let replica = start_replica(&shard0, &network).await;
                    let c = Cluster {
                        control: control.port,
                        shard0: shard0.port,
                        replica0: replica.port,
                        shard1: shard1.port,
                    };
                    keep_until_exit(replica.container);
                    for s in [control, shard0, shard1] {
                        keep_until_exit(s.container);
                    }
                    c
                })
                .await
                .unwrap()
        })
        .await
}

/// Two servers of a test's own, for tests that stop one (and benches that load one):
/// control and shard0 on `main`, shard1 alone on `doomed`. No replica.
pub async fn split_servers(prefix: &str) -> (Server, Server, Layout) {
    let network = unique(prefix);
    remove_network_at_exit(&network);
    let (main, doomed) = tokio::join!(start_server(&network), start_server(&network));
    for db in ["control", "shard0"] {
        create_database(main.port, db).await;
    }
    create_database(doomed.port, "shard1").await;
    let layout = Layout {
        control: (main.port, "control".to_owned()),
        shards: vec![
            ("shard0".to_owned(), main.port, "shard0".to_owned(), None),
            ("shard1".to_owned(), doomed.port, "shard1".to_owned(), None),
        ],
        extra: String::new(),
        slots: Vec::new(),
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
    };
    (main, doomed, layout)
}

/// Fresh databases for one test on the shared servers.
pub async fn layout(extra: &str) -> Layout {
    let c = cluster().await;
    let db = unique("t").replace('-', "_");
    let control = format!("{db}_control");
    let shard = format!("{db}_shard");
    create_database(c.control, &control).await;
    create_database(c.shard0, &shard).await;
    create_database(c.shard1, &shard).await;
    Layout {
        control: (c.control, control),
        shards: vec![
            (
                "shard0".to_owned(),
                c.shard0,
                shard.clone(),
                Some(c.replica0),
            ),
            ("shard1".to_owned(), c.shard1, shard, None),
        ],
        extra: extra.to_owned(),
        slots: Vec::new(),
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
    }
}

/// Where each database of a test topology lives.
#[derive(Clone, Debug)]
pub struct Layout {
    pub control: (u16, String),
    /// (name, primary port, database, optional replica port)
    pub shards: Vec<(String, u16, String, Option<u16>)>,
    pub extra: String,
    /// Each shard's `slots` value (TOML), in order; empty: auto-split.
    pub slots: Vec<String>,
    /// Short, so that tests of silent servers stay quick; tests that load the machine
    /// heavily raise it, since a connect may then legitimately take longer.
    pub connect_timeout_ms: u64,
}

/// The connect timeout of a test layout unless a test raises it.
pub const CONNECT_TIMEOUT_MS: u64 = 1500;

impl Layout {
    /// The same databases with a connect timeout for a loaded machine (5 s): for tests
    /// that are about something other than silent servers.
    pub fn with_patient_connects(self) -> Self {
        Self {
            connect_timeout_ms: 5000,
            ..self
        }
    }

    /// Reads without a consistency token go to the primary unless `extra` says otherwise:
    /// most tests read what they just wrote without carrying the token a client would, and
    /// the tests of replica reads set `reads_without_token` themselves.
    /// The same databases with `more` added to the `[database]` section.
    pub fn with_extra(self, more: &str) -> Self {
        Self {
            extra: format!("{more}{}", self.extra),
            ..self
        }
    }

    pub fn toml(&self) -> String {
        let tokenless = if self.extra.contains("reads_without_token") {
            ""
        } else {
            "reads_without_token = \"primary\"\n"
        };
        let mut t = format!(
            "[database]\nprimary_url = \"{}\"\nconnect_timeout_ms = {}\nacquire_timeout_ms = {}\n{tokenless}{}\n",
            url(self.control.0, &self.control.1),
            self.connect_timeout_ms,
            self.connect_timeout_ms + 500,
            self.extra
        );
        for (i, (name, port, db, replica)) in self.shards.iter().enumerate() {
            t += &format!(
                "[[database.shards]]\nname = \"{name}\"\nprimary_url = \"{}\"\n",
                url(*port, db)
            );
            if let Some(slots) = self.slots.get(i) {
                t += &format!("slots = {slots}\n");
            }
            if let Some(r) = replica {
                t += &format!("replica_url = \"{}\"\n", url(*r, db));
            }
        }
        t
    }

    pub fn settings(&self) -> Settings {
        Settings::from_toml_str(&self.toml(), "test topology", Vec::new())
            .expect("test topology is valid")
    }
}

/// Serve options for tests: a free port, quick replica checks.
/// Applies every migration to every database of `settings`.
pub async fn migrated(settings: &Settings) {
    let targets = migrate::targets(&settings.topology, &TargetFilter::default()).unwrap();
    migrate::run(&targets).await.expect("migrations apply");
}

pub fn test_options(instance: &str) -> ServeOptions {
    ServeOptions {
        bind: "127.0.0.1:0".parse().unwrap(),
        instance_name: instance.to_owned(),
        shard_timeout: Duration::from_millis(1500),
        replica_check_interval: Duration::from_millis(300),
        // Tests stop a server and read /ready straight after: every call probes (the
        // served default, a report up to 1 s old, has a test of its own).
        ready_max_age: Duration::ZERO,
        // Nothing sits in front of a test's app: stopping need not wait for a proxy.
        drain: Duration::ZERO,
        ..ServeOptions::default()
    }
}

/// Tests run two at a time and share the machine and the process (one metrics recorder
/// for every app in it). A test whose assertions need both to itself (process-wide counters,
/// fail-fast timings) runs [`alone`]: it waits until no other test has an app running, and
/// no other test starts one until it is done. Every other test holds a shared claim while
/// any of its apps runs ([`TestApp`] takes it).
static MACHINE: RwLock<()> = RwLock::const_new(());

thread_local! {
    /// This test's claims (libtest runs each test on a thread of its own): its shared claim,
    /// kept as long as one of its apps runs, and whether it runs alone.
    static CLAIM: RefCell<(Weak<RwLockReadGuard<'static, ()>>, bool)> =
        const { RefCell::new((Weak::new(), false)) };
}

/// This test runs alone while this lives. Take it first, before starting any app.
pub struct Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>);

pub async fn alone() -> Alone {
    let guard = MACHINE.write().await;
    CLAIM.with_borrow_mut(|c| c.1 = true);
    Alone(guard)
}

impl Drop for Alone {
    fn drop(&mut self) {
        CLAIM.with_borrow_mut(|c| c.1 = false);
    }
}

/// The test's shared claim, taken when its first app starts (`None` when it runs alone).
async fn share_machine() -> Option<Arc<RwLockReadGuard<'static, ()>>> {
    let (held, alone) = CLAIM.with_borrow(|c| (c.0.upgrade(), c.1));
    if alone {
        return None;
    }
    if let Some(held) = held {
        return Some(held);
    }
    let claim = Arc::new(MACHINE.read().await);
    CLAIM.with_borrow_mut(|c| c.0 = Arc::downgrade(&claim));
    Some(claim)
}

/// A running application and a client for it.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub settings: Settings,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
    _machine: Option<Arc<RwLockReadGuard<'static, ()>>>,
    /// An API key per tenant this app's requests act as, created on first use.
    keys: Mutex<std::collections::HashMap<String, String>>,
}

pub async fn control_conn(settings: &Settings) -> diesel_async::AsyncPgConnection {
    use diesel_async::AsyncConnection;
    let url = settings.topology.control_url.expose().to_owned();
    diesel_async::AsyncPgConnection::establish(&url)
        .await
        .unwrap_or_else(|e| panic!("connect to the control database: {e}"))
}

/// Revokes every key of `tenant` on `settings`' control database, as `bookmarks keys
/// revoke` does.
pub async fn revoke_keys(settings: &Settings, tenant: &str) {
    use bookmarks_sharded::tenancy::{TenantId, keys};
    let mut conn = control_conn(settings).await;
    let tenant = TenantId::parse(tenant).expect("a valid tenant id");
    for row in keys::list(&mut conn, Some(&tenant)).await.unwrap() {
        keys::revoke(&mut conn, row.id).await.unwrap();
    }
}

/// Creates an API key for `tenant` on `settings`' control database, as `bookmarks keys
/// create` does; returns the key.
pub async fn create_key(settings: &Settings, tenant: &str) -> String {
    let mut conn = control_conn(settings).await;
    let tenant = bookmarks_sharded::tenancy::TenantId::parse(tenant).expect("a valid tenant id");
    let note = bookmarks_sharded::tenancy::keys::KeyNote::parse("test").unwrap();
    let (_, key) = bookmarks_sharded::tenancy::keys::create(&mut conn, &tenant, note.as_ref())
        .await
        .expect("a key is created");
    key.expose().to_owned()
}

impl TestApp {
    /// Migrates every target of `settings`, then spawns the app on a free port.
    pub async fn spawn(settings: Settings, instance: &str) -> TestApp {
        Self::spawn_with(settings, test_options(instance)).await
    }

    /// Migrates every database, then starts the app with `options`.
    pub async fn spawn_with(settings: Settings, options: ServeOptions) -> TestApp {
        migrated(&settings).await;
        Self::start(settings, options).await
    }

    pub async fn spawn_unmigrated(settings: Settings, instance: &str) -> TestApp {
        Self::start(settings, test_options(instance)).await
    }

    /// Spawns the app with `options` (see [`test_options`]); migrates nothing.
    pub async fn start(settings: Settings, options: ServeOptions) -> TestApp {
        let machine = share_machine().await;
        let app = Application::build(settings.clone(), options)
            .await
            .expect("app builds");
        let base = format!("http://{}", app.local_addr());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async move {
            let _ = rx.await;
        }));
        TestApp {
            base,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(15))
                .build()
                .unwrap(),
            settings,
            shutdown: Some(tx),
            server,
            _machine: machine,
            keys: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// `tenant`'s API key (created on first use, on the control database).
    pub async fn key(&self, tenant: &str) -> String {
        if let Some(key) = self.keys.lock().unwrap().get(tenant) {
            return key.clone();
        }
        let key = create_key(&self.settings, tenant).await;
        self.keys
            .lock()
            .unwrap()
            .entry(tenant.to_owned())
            .or_insert(key)
            .clone()
    }

    /// The headers a client acting as `tenant` sends: the tenant header and its key.
    pub async fn tenant(&self, tenant: &str) -> reqwest::header::HeaderMap {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("X-Tenant-Id", tenant.parse().unwrap());
        let bearer = format!("Bearer {}", self.key(tenant).await);
        headers.insert(reqwest::header::AUTHORIZATION, bearer.parse().unwrap());
        headers
    }

    /// Has this app check `tenant`'s key once (and keep it cached) without routing the
    /// tenant: a bookmark id that is no id is refused before any shard is asked.
    pub async fn check_key(&self, tenant: &str) {
        let res = self
            .get("/api/bookmarks/not-an-id")
            .headers(self.tenant(tenant).await)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "{tenant}'s key checks");
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.base))
    }

    /// A request with any method.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    /// GETs `path` as `tenant`.
    pub async fn get_as(&self, path: &str, tenant: &str) -> reqwest::Response {
        self.get(path)
            .headers(self.tenant(tenant).await)
            .send()
            .await
            .unwrap()
    }

    /// GETs a tenant-free `path` and parses the JSON answer, whatever its status.
    pub async fn json(&self, path: &str) -> serde_json::Value {
        self.get(path).send().await.unwrap().json().await.unwrap()
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics_text(&self) -> String {
        self.get("/metrics")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The Prometheus text of `/metrics` as an operator presenting `token` scrapes it (with
    /// the series that name tenants).
    pub async fn metrics_text_as(&self, token: &str) -> String {
        self.get("/metrics")
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// GETs `path` as `tenant` and parses the JSON answer, whatever its status.
    pub async fn get_json(&self, path: &str, tenant: &str) -> serde_json::Value {
        self.get_as(path, tenant).await.json().await.unwrap()
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(format!("{}{path}", self.base))
    }

    pub fn patch(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.patch(format!("{}{path}", self.base))
    }

    pub fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.delete(format!("{}{path}", self.base))
    }

    /// Creates a bookmark for `tenant`, asserting it worked; returns the JSON answer.
    pub async fn create(&self, tenant: &str, body: serde_json::Value) -> serde_json::Value {
        let res = self
            .post("/api/bookmarks")
            .headers(self.tenant(tenant).await)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        let json: serde_json::Value = res.json().await.unwrap();
        assert_eq!(status, 201, "{json}");
        json
    }

    /// Sends the server its shutdown signal (what SIGTERM is to `bookmarks serve`) and
    /// returns at once.
    pub fn begin_stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Stops accepting, drains, and waits for the server task.
    pub async fn stop(mut self) {
        self.begin_stop();
        let _ = (&mut self.server).await;
    }
}

/// The shard a tenant's request was served from (`X-Shard`), or its status and error code
/// when it failed.
pub async fn served_shard(app: &TestApp, tenant: &str) -> Result<String, (u16, String)> {
    let res = app.get_as("/api/bookmarks", tenant).await;
    if res.status() == 200 {
        return Ok(res.headers()["x-shard"].to_str().unwrap().to_owned());
    }
    let status = res.status().as_u16();
    let body: serde_json::Value = res.json().await.unwrap_or_default();
    Err((
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    ))
}

/// Where the hash (no pins, no directory) puts `tenant` in `settings`' topology.
pub fn hash_shard(settings: &Settings, tenant: &str) -> String {
    use bookmarks_sharded::sharding::ShardKey;
    let t = &settings.topology;
    t.shards[t.owner_of(ShardKey::Str(tenant).slot().index())]
        .name
        .to_string()
}

/// The other shard of a two-shard layout.
pub fn other_shard(shard: &str) -> &'static str {
    if shard == "shard0" {
        "shard1"
    } else {
        "shard0"
    }
}

/// The port and database of one of `layout`'s shards.
pub fn port_of(layout: &Layout, shard: &str) -> (u16, String) {
    let (_, port, db, _) = layout.shards.iter().find(|s| s.0 == shard).unwrap();
    (*port, db.clone())
}

/// The `bookmarks` binary with `--config config` and none of this process's `AUTUMN_*`
/// overrides, so that only the file decides.
pub fn bookmarks_command(config: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_bookmarks"));
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("AUTUMN_")) {
        cmd.env_remove(name);
    }
    cmd.arg("--config").arg(config);
    cmd
}

/// A `bookmarks` process (serve or worker) killed when dropped.
pub struct Process(pub std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_process(config: &std::path::Path, instance: &str, command: &[&str]) -> Process {
    let child = bookmarks_command(config)
        .args(command)
        .env("INSTANCE_NAME", instance)
        .env("BIND", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Process(child)
}

/// Runs the `bookmarks` binary with `layout`'s topology as its config file.
pub fn bookmarks_cli(layout: &Layout, args: &[&str]) -> std::process::Output {
    let config = std::env::temp_dir().join(format!("{}.toml", unique("cli")));
    std::fs::write(&config, layout.toml()).unwrap();
    let out = bookmarks_command(&config).args(args).output().unwrap();
    let _ = std::fs::remove_file(&config);
    out
}
