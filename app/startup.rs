//! Builds the application: pools, router (with its directory listener when directory routing
//! is on), replica monitor and HTTP listener. The server, the CLI and the tests all go
//! through [`Application::build`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::admin::AdminToken;
use crate::configuration::Settings;
use crate::jobs::worker::{self, JobCounts, WorkerOptions};
use crate::migrate::{self, Kind, Selection};
use crate::search::reindexer::{self, IndexStates, ReindexOptions};
use crate::sharding::access::Shards;
use crate::sharding::breaker::spawn_liveness_monitor;
use crate::sharding::directory::listener;
use crate::sharding::health::spawn_replica_monitor;
use crate::sharding::replicas::ReplicaStates;
use crate::sharding::shard_set::build_pool;
use crate::sharding::{DirectoryRouter, PinRouter, ShardRouter, ShardSet};
use crate::web::state::{AppState, Inner};

/// How the server is run (as opposed to what it talks to, which is [`Settings`]).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind; port 0 picks a free port (tests).
    pub bind: SocketAddr,
    /// Returned as `X-Served-By`.
    pub instance_name: String,
    /// Apply pending migrations before serving.
    pub migrate: bool,
    /// Bound on one shard's part of a fan-out or a readiness probe.
    pub shard_timeout: Duration,
    /// Bound on a whole request.
    pub request_timeout: Duration,
    /// How often replica readiness is re-checked in the background.
    pub replica_check_interval: Duration,
    /// How often every database server's liveness is checked, so that a server that goes
    /// silent opens its breaker even before a request is sent to it.
    pub liveness_interval: Duration,
    /// Mounts the admin page, for whoever presents this token.
    pub admin_token: Option<AdminToken>,
    /// Run the background work (a reindexer per shard, a job worker) in this process.
    pub background: bool,
    pub reindex: ReindexOptions,
    pub jobs: WorkerOptions,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([0, 0, 0, 0], 3000)),
            instance_name: "bookmarks".to_owned(),
            migrate: false,
            shard_timeout: Duration::from_millis(1500),
            request_timeout: Duration::from_secs(10),
            replica_check_interval: Duration::from_secs(2),
            liveness_interval: Duration::from_secs(1),
            admin_token: None,
            background: true,
            reindex: ReindexOptions::default(),
            jobs: WorkerOptions::default(),
        }
    }
}

pub struct Application {
    listener: TcpListener,
    router: crate::web::HttpService,
    state: AppState,
    replica_check_interval: Duration,
    liveness_interval: Duration,
    background: Option<(ReindexOptions, WorkerOptions)>,
}

impl Application {
    pub async fn build(settings: Settings, options: ServeOptions) -> anyhow::Result<Self> {
        let topology = Arc::new(settings.topology.clone());
        let max_in_flight_per_tenant = settings.tenancy.max_in_flight_per_tenant;
        tracing::info!(
            shards = topology.shards.len(),
            total_max_connections = topology.total_max_connections(),
            "topology loaded (compare total_max_connections x replicas with max_connections)"
        );
        if options.migrate {
            let targets = migrate::targets(&topology, &Selection::default())?;
            migrate::run(&targets).await?;
        }
        let set = Arc::new(ShardSet::new(topology.clone())?);
        let control = build_pool(
            &topology.control_url,
            topology.control_pool_size,
            &topology,
            "control",
        )?;
        // One directory router shared by the request path and its listener (spawned in
        // `run_until`), so invalidations reach the cache that routes.
        let directory = topology
            .directory_router
            .then(|| Arc::new(DirectoryRouter::new(control.clone(), &set)));
        let router: Arc<dyn ShardRouter> = match &directory {
            Some(directory) => directory.clone(),
            None => Arc::new(PinRouter::from_shard_set(&set)),
        };
        let replicas = Arc::new(ReplicaStates::new(&set));
        let index = Arc::new(IndexStates::new(&set));
        let state = AppState(Arc::new(Inner {
            settings,
            shards: Shards::new(set, router, replicas),
            control,
            directory,
            admin_token: options.admin_token.clone(),
            instance_name: options.instance_name.clone(),
            shard_timeout: options.shard_timeout,
            expected_control_migrations: migrate::expected_versions(Kind::Control),
            expected_shard_migrations: Arc::new(migrate::expected_versions(Kind::Shard)),
            metrics: crate::web::metrics::recorder(),
            index,
            jobs: Arc::new(JobCounts::default()),
            fairness: crate::fairness::Fairness::new(max_in_flight_per_tenant),
        }));
        let listener = TcpListener::bind(options.bind)
            .await
            .with_context(|| format!("cannot bind {}", options.bind))?;
        let router = crate::web::router(state.clone(), options.request_timeout);
        Ok(Self {
            listener,
            router,
            state,
            replica_check_interval: options.replica_check_interval,
            liveness_interval: options.liveness_interval,
            background: options
                .background
                .then_some((options.reindex, options.jobs)),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Starts what runs beside the requests: the replica and liveness monitors, the metrics
    /// upkeep, the directory listener (with directory routing), and when enabled the
    /// reindexers and the job worker. They run until aborted.
    fn spawn_tasks(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let state = &self.state;
        let (set, replicas) = state.shards.shared();
        let breakers = state.breakers().into_iter();
        let breakers = breakers.map(|(_, b)| Arc::clone(b)).collect();
        let mut tasks = vec![
            spawn_replica_monitor(
                set,
                replicas,
                Arc::clone(&state.expected_shard_migrations),
                self.replica_check_interval,
            ),
            spawn_liveness_monitor(breakers, self.liveness_interval),
            crate::web::metrics::spawn_upkeep(state.metrics.clone()),
        ];
        if let Some(router) = state.directory.clone() {
            let topology = state.shards.set().topology();
            tasks.push(listener::spawn(
                router,
                topology.control_url.clone(),
                topology.connect_timeout,
            ));
        }
        if let Some((reindex, jobs)) = self.background {
            tasks.extend(reindexer::spawn_all(
                state.shards.set(),
                Arc::clone(&state.index),
                &state.instance_name,
                reindex,
            ));
            let worker_id = format!(
                "{}/{}/{:08x}",
                state.instance_name,
                std::process::id(),
                rand::random::<u32>()
            );
            tasks.push(worker::spawn(
                state.control.clone(),
                state.shards.clone(),
                worker_id,
                jobs,
                Arc::clone(&state.jobs),
            ));
        }
        tasks
    }

    /// Runs only the background work (no HTTP) until `shutdown`: `bookmarks worker`.
    pub async fn run_background_until(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let tasks = self.spawn_tasks();
        tracing::info!(instance = %self.state.instance_name, "worker running");
        shutdown.await;
        tasks.iter().for_each(|t| t.abort());
        tracing::info!("worker stopped");
    }

    /// Serves until `shutdown` completes, then stops accepting and drains in-flight requests.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let tasks = self.spawn_tasks();
        tracing::info!(addr = %self.local_addr(), instance = %self.state.instance_name, "serving");
        let result = axum::serve(
            self.listener,
            axum::ServiceExt::<axum::extract::Request>::into_make_service(self.router),
        )
        .with_graceful_shutdown(shutdown)
        .await;
        tasks.iter().for_each(|t| t.abort());
        tracing::info!("stopped");
        result
    }
}
