//! Builds the application: pools, router (with its directory listener when directory routing
//! is on), replica monitor and HTTP listener. The server, the CLI and the tests all go
//! through [`Application::build`]; [`state`] assembles the features' state and routes.

mod guards;
mod options;
pub mod state;

use std::collections::BTreeSet;
use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::admin::{self, AdminState, ControlDb};
use crate::changes::{self, purge::PurgeOptions};
use crate::configuration::{AuthMode, Settings};
use crate::fairness::Fairness;
use crate::jobs::worker::{self, JobCounts, JobWakeups, WorkerOptions};
use crate::migrate::{self, Kind, TargetFilter};
use crate::pg::breaker::spawn_liveness_monitor;
use crate::pg::control::ControlLookups;
use crate::pg::listener::{self, Invalidated};
use crate::pg::pool::{PgPool, spawn_idle_reaper};
use crate::search::reindexer::{self, IndexStates, ReindexOptions};
use crate::sharding::access::Shards;
use crate::sharding::cross_shard::CrossShard;
use crate::sharding::health::spawn_replica_monitor;
use crate::sharding::replay::spawn_replay_pollers;
use crate::sharding::replicas::ReplicaStates;
use crate::sharding::row_security::control_pool;
use crate::sharding::{DirectoryRouter, PinRouter, ShardRouter, ShardSet};
use crate::telemetry::MetricSource;
use crate::tenancy::auth::Authenticator;
use crate::web::client_address::PeerAddress;
use crate::web::drain::{ClosingListener, Draining};
use crate::web::failed_credentials::FailedCredentials;
use crate::web::health::{ProbeTiming, Readiness};
use crate::web::metrics::{Metrics, ShardMetrics};
use crate::web::{HttpService, InstanceName};
pub use options::{DEFAULT_DRAIN, DEFAULT_MAX_IN_FLIGHT, DEFAULT_READY_MAX_AGE, ServeOptions};
pub use state::{AppState, api_document};

/// How long a stopping server waits, after closing its listener, for the connections it
/// accepted to deliver their first bytes (a client that connected and sent nothing is then
/// closed).
const UNREAD_GRACE: Duration = Duration::from_secs(1);

pub struct Application {
    listener: TcpListener,
    router: HttpService,
    state: AppState,
    draining: Draining,
    drain: Duration,
    request_timeout: Duration,
    background: Background,
    replica_check_interval: Duration,
    liveness_interval: Duration,
    run_background: Option<(ReindexOptions, WorkerOptions, PurgeOptions)>,
}

/// What the tasks beside the requests work on.
struct Background {
    shards: Shards,
    authenticator: Arc<Authenticator>,
    metrics: ShardMetrics,
    control: PgPool,
    lookups: ControlLookups,
    directory: Option<Arc<DirectoryRouter>>,
    expected_shard_migrations: Arc<BTreeSet<String>>,
    index: Arc<IndexStates>,
    jobs: Arc<JobCounts>,
    instance: InstanceName,
}

impl Application {
    pub async fn build(settings: Settings, options: ServeOptions) -> anyhow::Result<Self> {
        let topology = Arc::new(settings.topology.clone());
        tracing::info!(
            shards = topology.shards.len(),
            total_max_connections = crate::sharding::budget::total_max_connections(&topology),
            "topology loaded (compare total_max_connections x replicas with max_connections)"
        );
        if options.migrate {
            let targets = migrate::targets(&topology, &TargetFilter::default())?;
            migrate::run(&targets).await?;
        }
        let set = Arc::new(ShardSet::new(topology.clone())?);
        guards::refuse_privileged_roles(&set, options.allow_superuser).await?;
        guards::refuse_over_budget(&topology).await?;
        let control = control_pool(&topology, topology.control_pool_size)?;
        guards::refuse_privileged_control(&control, &topology, options.allow_superuser).await?;
        let (admin_token, session_secret) = guards::secrets(&control, &options).await?;
        // One breaker for the control database, shared by everything the request path asks
        // there.
        let lookups = ControlLookups::new(control.clone(), topology.lookup_bounds());
        if topology.directory_router {
            load_slot_map(&set, &lookups).await;
        }
        // One directory router and one key store shared by the request path and the control
        // listener (spawned in `run_until`), so invalidations reach the caches that serve.
        let directory = topology
            .directory_router
            .then(|| Arc::new(DirectoryRouter::with_lookups(lookups.clone(), &set)));
        let authenticator = Arc::new(guards::authenticator(
            &settings,
            session_secret.as_deref(),
            lookups.clone(),
        )?);
        let failed_credentials = Arc::new(FailedCredentials::new(
            settings.web.failed_credentials_per_minute,
            settings.web.trusted_proxies.clone(),
        ));
        let reads_control = directory.is_some() || authenticator.mode() == AuthMode::ApiKey;
        let control_breaker = reads_control.then(|| Arc::clone(lookups.breaker()));
        let router: Arc<dyn ShardRouter> = match &directory {
            Some(directory) => directory.clone(),
            None => Arc::new(PinRouter::from_shard_set(&set)),
        };
        let replicas = Arc::new(ReplicaStates::new(&set));
        let index = Arc::new(IndexStates::new(&set));
        let jobs = Arc::new(JobCounts::default());
        let shards = Shards::new(set, router, replicas);
        let instance = InstanceName::new(&options.instance_name);
        let fairness = Fairness::new(settings.tenancy.max_in_flight_per_tenant);
        let cross = CrossShard::new(shards.clone(), options.shard_timeout);
        let expected_shard_migrations = Arc::new(migrate::expected_versions(Kind::Shard));
        let shard_metrics = || ShardMetrics {
            shards: shards.clone(),
            control: control.clone(),
            control_breaker: control_breaker.clone(),
            directory: directory.clone(),
        };
        let metrics = Metrics::new(
            instance.clone(),
            vec![
                Arc::new(shard_metrics()) as Arc<dyn MetricSource>,
                index.clone() as Arc<dyn MetricSource>,
                jobs.clone() as Arc<dyn MetricSource>,
                Arc::new(fairness.clone()) as Arc<dyn MetricSource>,
            ],
            guards::sees_tenants(admin_token.clone()),
        );
        let admin = admin_token.map(|token| {
            AdminState::new(admin::Sources {
                token,
                failed_credentials: failed_credentials.clone(),
                shards: shards.clone(),
                cross: cross.clone(),
                control: ControlDb::new(control.clone(), options.shard_timeout),
                shard_timeout: options.shard_timeout,
                expected_shard_migrations: expected_shard_migrations.clone(),
                index: index.clone(),
                jobs: jobs.clone(),
                fairness: fairness.clone(),
                instance: instance.clone(),
            })
        });
        let draining = Draining::default();
        let state = AppState::new(state::Parts {
            readiness: Readiness::new(
                control.clone(),
                shards.clone(),
                directory.clone(),
                migrate::expected_versions(Kind::Control),
                expected_shard_migrations.clone(),
                ProbeTiming {
                    timeout: options.shard_timeout,
                    max_age: options.ready_max_age,
                },
                draining.clone(),
            ),
            shards: shards.clone(),
            cross,
            authenticator: authenticator.clone(),
            failed_credentials,
            fairness,
            metrics,
            instance: instance.clone(),
            stats: Default::default(),
            document: crate::web::openapi::ApiDocument::new(&state::api_document()),
            admin,
            control: lookups.clone(),
        });
        let listener = TcpListener::bind(options.bind)
            .await
            .with_context(|| format!("cannot bind {}", options.bind))?;
        let router = state.router(
            options.request_timeout,
            options.max_in_flight,
            &draining,
            settings.tenancy.secure_cookies,
        );
        Ok(Self {
            listener,
            router,
            draining,
            drain: options.drain,
            request_timeout: options.request_timeout,
            background: Background {
                metrics: shard_metrics(),
                authenticator,
                shards,
                control,
                lookups,
                directory,
                expected_shard_migrations,
                index,
                jobs,
                instance,
            },
            state,
            replica_check_interval: options.replica_check_interval,
            liveness_interval: options.liveness_interval,
            run_background: options.background.then_some((
                options.reindex,
                WorkerOptions {
                    import_rest: settings.imports.rest,
                    ..options.jobs
                },
                PurgeOptions {
                    every: options.feed_purge_every,
                    ..PurgeOptions::new(settings.changes.tombstone_retention)
                },
            )),
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

    /// Starts what runs beside the requests: the replay pollers, the idle pools' reaper, the
    /// replica and liveness monitors, the metrics upkeep, the directory listener (with directory
    /// routing), and when enabled the reindexers and the job worker. They run until aborted.
    fn spawn_tasks(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let b = &self.background;
        let (set, replicas) = b.shards.shared();
        let breakers = b.metrics.breakers().into_iter();
        let breakers = breakers.map(|(_, breaker)| Arc::clone(breaker)).collect();
        let mut pools = vec![b.control.clone()];
        for shard in set.iter() {
            pools.push(shard.primary_pool().clone());
            pools.extend(shard.replica_pool().cloned());
        }
        let idle = set.topology().pool_idle_timeout;
        let mut tasks = spawn_replay_pollers(Arc::clone(&set), Arc::clone(&replicas));
        tasks.extend([
            spawn_idle_reaper(pools, idle),
            spawn_replica_monitor(
                set,
                replicas,
                Arc::clone(&b.expected_shard_migrations),
                self.replica_check_interval,
            ),
            spawn_liveness_monitor(breakers, self.liveness_interval),
            self.state.parts().metrics.spawn_upkeep(),
        ]);
        let mut invalidated: Vec<Arc<dyn Invalidated>> = Vec::new();
        if let Some(router) = b.directory.clone() {
            invalidated.push(router);
            let set = b.shards.set();
            invalidated.push(set.slot_map().clone());
            tasks.push(set.slot_map().clone().spawn_reloader(
                Arc::new(set.topology().clone()),
                b.lookups.clone(),
                set.topology().directory_cache_ttl,
            ));
        }
        if b.authenticator.mode() == AuthMode::ApiKey {
            invalidated.push(b.authenticator.keys().clone());
        }
        let job_wakeups = Arc::new(JobWakeups::default());
        if self.run_background.is_some() {
            invalidated.push(job_wakeups.clone());
        }
        if !invalidated.is_empty() {
            let topology = b.shards.set().topology();
            tasks.push(listener::spawn(
                invalidated,
                topology.control_url.clone(),
                topology.connect_timeout,
            ));
        }
        if let Some((reindex, jobs, purge)) = self.run_background {
            tasks.extend(changes::purge::spawn_all(b.shards.set(), purge));
            tasks.extend(reindexer::spawn_all(
                b.shards.set(),
                Arc::clone(&b.index),
                b.instance.as_str(),
                reindex,
            ));
            let worker_id = format!(
                "{}/{}/{:08x}",
                b.instance.as_str(),
                std::process::id(),
                rand::random::<u32>()
            );
            tasks.push(worker::spawn(
                b.control.clone(),
                b.shards.clone(),
                worker_id,
                jobs,
                Arc::clone(&b.jobs),
                job_wakeups,
            ));
        }
        tasks
    }

    /// Runs only the background work (no HTTP) until `shutdown`: `bookmarks worker`.
    pub async fn run_background_until(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let tasks = self.spawn_tasks();
        tracing::info!(
            instance = self.background.instance.as_str(),
            "worker running"
        );
        shutdown.await;
        tasks.iter().for_each(|t| t.abort());
        tracing::info!("worker stopped");
    }

    /// Serves until `shutdown` completes, then leaves without failing a request: drains
    /// (not ready, `Connection: close`) for [`ServeOptions::drain`], refuses new connections,
    /// and waits for what is in flight, at most the request timeout.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let tasks = self.spawn_tasks();
        tracing::info!(addr = %self.local_addr(), instance = self.background.instance.as_str(), "serving");
        let (listener, close, closed) = ClosingListener::new(self.listener)?;
        let connections = listener.connections();
        let (draining, drain) = (self.draining.clone(), self.drain);
        let (stopping_tx, stopping) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            shutdown.await;
            draining.start();
            let _ = stopping_tx.send(());
            tracing::info!(
                drain_ms = drain.as_millis() as u64,
                "stopping: not ready, closing each connection after its response; then \
                 refusing new connections and finishing the requests in flight"
            );
            tokio::time::sleep(drain).await;
            close.close();
        });
        // hyper's graceful shutdown (idle connections closed, busy ones finished) starts
        // only once every accepted connection has delivered its first bytes: it would drop
        // one it has not read from yet, whose request the proxy has already sent.
        let all_read = connections.clone();
        let serve = axum::serve(
            listener,
            // The peer's address rides on every request (`ConnectInfo`): the failed
            // credential limit counts by client address.
            axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
                PeerAddress,
            >(self.router),
        )
        .with_graceful_shutdown(async move {
            if closed.await.is_ok() {
                let _ = tokio::time::timeout(UNREAD_GRACE, all_read.all_read()).await;
            }
        })
        .into_future();
        // The request timeout ends every request; the bound is for a client that holds a
        // connection without finishing a request.
        let in_flight_bound = self.request_timeout + Duration::from_secs(1);
        let leaving = async move {
            if stopping.await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(drain + UNREAD_GRACE + in_flight_bound).await;
            tracing::warn!(
                still_open = connections.count(),
                "connections still open after the request timeout; leaving them"
            );
        };
        let result = tokio::select! {
            result = serve => result,
            () = leaving => Ok(()),
        };
        tasks.iter().for_each(|t| t.abort());
        tracing::info!("stopped");
        result
    }
}

/// Loads the live slot map before the first request, so that a restarted replica routes a
/// moved range to its new owner from the start, and logs every difference from
/// `autumn.toml`. If the control database cannot be read, the replica starts on the file's
/// map (the shards refuse what it would misroute) and the reloader keeps trying.
async fn load_slot_map(set: &ShardSet, lookups: &ControlLookups) {
    let topology = set.topology();
    if set.slot_map().reload(topology, lookups).await.is_err() {
        return;
    }
    for drift in set.slot_map().snapshot().drift(topology) {
        tracing::warn!(
            shard = %drift.shard,
            config = %drift.config,
            live = %drift.live,
            edit = %drift.edit,
            "the live slot map differs from autumn.toml (range moves); to fold it in, write \
             `edit` in this shard's [[database.shards]] block, deploy, then run `bookmarks \
             slots compact`"
        );
    }
}
