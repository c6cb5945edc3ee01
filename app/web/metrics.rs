//! Request metrics and their two views: `/metrics` (Prometheus text) and
//! `/actuator/metrics` (JSON, with a `database_shards` block of pool stats and slot counts,
//! and the directory cache's counters when directory routing is on). What else they show
//! comes from the [`MetricSource`]s the app registers (search, jobs, fairness).

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::OnceLock;
use std::time::Instant;

use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRef, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::{Map, Value, json};
use tower::Service;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::InstanceName;
use super::around::{Answer, Around};
use super::request_facts::RequestFacts;
use crate::pg::breaker::Breaker;
use crate::pg::pool::PgPool;
use crate::sharding::DirectoryRouter;
use crate::sharding::access::Shards;
use crate::telemetry::MetricSource;

/// The answer's serving shard. A constant, so the name is not parsed again per request.
const X_SHARD: HeaderName = HeaderName::from_static("x-shard");

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The process-wide recorder. Installed once: every app in the process (tests spawn
/// several) records into it and renders from it.
pub fn recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("http_request_duration_seconds".to_owned()),
                    LATENCY_BUCKETS,
                )
                .expect("buckets are non-empty")
                .set_buckets_for_metric(
                    Matcher::Full("move_wait_seconds".to_owned()),
                    LATENCY_BUCKETS,
                )
                .expect("buckets are non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed by an embedding program; then we
            // still render our own handle (which simply stays empty).
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Folds recorded latencies into their histograms every few seconds. The recorder keeps
/// every sample until then: without upkeep a server nobody scrapes would grow by eight
/// bytes per request.
fn spawn_upkeep(handle: PrometheusHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            handle.run_upkeep();
        }
    })
}

/// Times each request and records route, status and serving shard; sets `X-Shard`, and
/// `X-Read-From` and `X-Consistency-Token` (see [`super::consistency`]).
/// Layered onto the router as `AroundLayer(Track)`: it needs the matched route.
#[derive(Clone, Copy, Default)]
pub struct Track;

impl Around for Track {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        let started = Instant::now();
        // A matched path shares its text: no copy per request.
        let route = request.extensions().get::<MatchedPath>().cloned();
        let facts = RequestFacts::of(&mut request);
        let answer = inner.call(request);
        Box::pin(async move {
            let Ok(mut response) = answer.await;
            let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
            let status = response.status().as_u16();
            facts.with_shard(|shard| {
                RequestMetrics::with(route, status, shard.unwrap_or("none"), |m| {
                    if let Some(value) = &m.shard_header {
                        response.headers_mut().insert(X_SHARD, value.clone());
                    }
                    m.requests.increment(1);
                    m.duration.record(started.elapsed().as_secs_f64());
                })
            });
            super::consistency::label(&mut response, &facts, !route.starts_with("/api/"));
            Ok(response)
        })
    }
}

/// The registry handles of one (route, status, shard) label set, and its `X-Shard` value.
/// Looking them up in the registry costs a dozen allocations and two hashed, locked map
/// lookups per request; each worker thread keeps the handles it has used instead.
struct RequestMetrics {
    status: u16,
    shard: Box<str>,
    shard_header: Option<HeaderValue>,
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

/// Label sets remembered per thread, at most. Routes are the router's (a matched path or
/// "unmatched"), statuses and shards are few: this bound is never reached in practice, and
/// past it handles are looked up afresh, as before.
const REMEMBERED_LABEL_SETS: usize = 1024;

/// How many label sets are remembered, and each route's.
type Remembered = (usize, HashMap<Box<str>, Vec<RequestMetrics>>);

thread_local! {
    static REQUEST_METRICS: RefCell<Remembered> = RefCell::new((0, HashMap::new()));
}

impl RequestMetrics {
    fn new(route: &str, status: u16, shard: &str) -> Self {
        let labels = [
            ("route", route.to_owned()),
            ("status", status.to_string()),
            ("shard", shard.to_owned()),
        ];
        Self {
            status,
            shard: shard.into(),
            shard_header: (shard != "none")
                .then(|| HeaderValue::from_str(shard).ok())
                .flatten(),
            requests: metrics::counter!("http_requests_total", &labels),
            duration: metrics::histogram!("http_request_duration_seconds", &labels),
        }
    }

    /// Runs `f` with the handles of this label set.
    fn with(route: &str, status: u16, shard: &str, f: impl FnOnce(&RequestMetrics)) {
        REQUEST_METRICS.with(|cell| {
            let Ok(mut cache) = cell.try_borrow_mut() else {
                return f(&Self::new(route, status, shard));
            };
            let (count, by_route) = &mut *cache;
            let known = by_route.get(route).and_then(|sets| {
                sets.iter()
                    .find(|m| m.status == status && &*m.shard == shard)
            });
            if let Some(m) = known {
                return f(m);
            }
            let m = Self::new(route, status, shard);
            f(&m);
            if *count < REMEMBERED_LABEL_SETS {
                *count += 1;
                by_route.entry(route.into()).or_default().push(m);
            }
        });
    }
}

/// Whether a scrape may see series that name tenants (it presents the operator's token).
pub type SeesTenants = Arc<dyn Fn(&HeaderMap) -> bool + Send + Sync>;

/// The process's metrics: the recorder's handle and every source.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    instance: InstanceName,
    sources: Arc<[Arc<dyn MetricSource>]>,
    sees_tenants: SeesTenants,
}

impl Metrics {
    /// `sees_tenants` decides which scrapes get the series that name tenants (who the
    /// customers are and how busy each is); every other series is open to the internal
    /// network that scrapes it.
    pub fn new(
        instance: InstanceName,
        sources: Vec<Arc<dyn MetricSource>>,
        sees_tenants: SeesTenants,
    ) -> Self {
        Self {
            handle: recorder(),
            instance,
            sources: sources.into(),
            sees_tenants,
        }
    }

    /// Starts folding this process's recorded latencies into their histograms.
    pub fn spawn_upkeep(&self) -> tokio::task::JoinHandle<()> {
        spawn_upkeep(self.handle.clone())
    }
}

/// `/metrics` and `/actuator/metrics`.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Metrics: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(prometheus))
        .routes(routes!(actuator))
}

/// Prometheus text. Series that name tenants only for a scrape that presents the admin
/// token as a Bearer token.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = super::openapi::OPERATIONS_TAG,
    responses((status = 200, description = "Prometheus text exposition format 0.0.4.", content_type = "text/plain", body = String))
)]
async fn prometheus(State(metrics): State<Metrics>, headers: HeaderMap) -> impl IntoResponse {
    for source in metrics.sources.iter() {
        source.record();
    }
    let mut text = metrics.handle.render();
    let sees_tenants = (metrics.sees_tenants)(&headers);
    for source in metrics.sources.iter() {
        if sees_tenants || !source.names_tenants() {
            source.prometheus_text(&mut text);
        }
    }
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
}

/// The same figures as JSON, without any tenant's name.
#[utoipa::path(
    get,
    path = "/actuator/metrics",
    tag = super::openapi::OPERATIONS_TAG,
    responses((status = 200, description = "This process's figures.", content_type = "application/json", body = Object))
)]
async fn actuator(State(metrics): State<Metrics>) -> Json<Value> {
    let mut out = Map::new();
    out.insert("instance".to_owned(), json!(metrics.instance.as_str()));
    for source in metrics.sources.iter() {
        source.actuator(&mut out);
    }
    Json(Value::Object(out))
}

/// The shards and the control database: pool occupancy, circuit breakers, the directory
/// cache's counters, and the slot and connection budget.
pub struct ShardMetrics {
    pub shards: Shards,
    pub control: PgPool,
    /// The control database's breaker, when the request path reads it (directory routing,
    /// API keys).
    pub control_breaker: Option<Arc<Breaker>>,
    pub directory: Option<Arc<DirectoryRouter>>,
}

impl ShardMetrics {
    /// Every circuit breaker this process keeps, with the name its metrics carry: each
    /// shard's servers' (the shard's name), then the control database's ("control").
    pub fn breakers(&self) -> Vec<(&str, &Arc<Breaker>)> {
        let shards = self.shards.set().iter();
        let mut all: Vec<_> = shards
            .flat_map(|shard| shard.breakers().map(move |b| (shard.name(), b)))
            .collect();
        all.extend(self.control_breaker.iter().map(|b| ("control", b)));
        all
    }

    fn record_pool_gauges(&self) {
        let set = |target: &str, role: &'static str, pool: &PgPool| {
            let s = pool.status();
            let gauge = |state_label: &'static str, v: usize| {
                metrics::gauge!("db_pool_connections", "shard" => target.to_owned(), "role" => role, "state" => state_label).set(v as f64);
            };
            gauge("max", s.max_size);
            gauge("size", s.size);
            gauge("in_use", s.size.saturating_sub(s.available));
            gauge("waiting", s.waiting);
        };
        set("control", "primary", &self.control);
        for shard in self.shards.set().iter() {
            set(shard.name(), "primary", shard.primary_pool());
            if let Some(pool) = shard.replica_pool() {
                set(shard.name(), "replica", pool);
            }
        }
    }

    /// Each server's circuit breaker: open or not, and how often it has opened.
    fn record_breakers(&self) {
        for (target, breaker) in self.breakers() {
            let b = breaker.snapshot();
            let labels = [
                ("shard", target.to_owned()),
                ("role", b.role.as_str().to_owned()),
            ];
            metrics::gauge!("db_circuit_open", &labels).set(f64::from(u8::from(b.open)));
            metrics::counter!("db_circuit_trips_total", &labels).absolute(b.trips);
        }
    }

    /// Where each shard's tenant reads went, and its replica's lag at the last poll.
    fn record_replica_reads(&self) {
        for shard in self.shards.set().iter() {
            if shard.replica_pool().is_none() {
                continue;
            }
            let c = self.shards.replicas().counts(shard.id());
            let labels = [("shard", shard.name().to_owned())];
            metrics::counter!("replica_reads_total", &labels).absolute(c.replica);
            metrics::counter!("primary_reads_total", &labels).absolute(c.primary);
            metrics::counter!("token_waits_total", &labels).absolute(c.token_waits);
            metrics::counter!("token_fallbacks_total", &labels).absolute(c.token_fallbacks);
            // -1 while no poll has answered: the lag is unknown, not zero.
            let lag = c.lag_ms.map_or(-1.0, |ms| ms as f64 / 1000.0);
            metrics::gauge!("replica_replay_lag_seconds", &labels).set(lag);
        }
    }

    /// The directory router's counters are kept in the router (cheap atomics on the request
    /// path) and copied into the registry when scraped.
    fn record_directory(&self) {
        let Some(directory) = &self.directory else {
            return;
        };
        let s = directory.stats();
        metrics::counter!("directory_cache_hits_total").absolute(s.hits);
        metrics::counter!("directory_cache_misses_total").absolute(s.misses);
        metrics::counter!("directory_cache_stale_hits_total").absolute(s.stale_hits);
        metrics::counter!("directory_cache_evictions_total").absolute(s.evictions);
        metrics::counter!("directory_cache_flushes_total").absolute(s.flushes);
        metrics::gauge!("directory_cache_entries").set(s.entries as f64);
        metrics::gauge!("directory_listener_connected")
            .set(f64::from(u8::from(s.listener_connected)));
    }

    /// Writes that waited out a move's fence (their wait times are the `move_wait_seconds`
    /// histogram), were sent on to a tenant's new shard, or gave up.
    fn record_move_waits(&self) {
        let s = self.shards.move_waits().stats();
        metrics::counter!("move_waits_total").absolute(s.waited);
        metrics::counter!("move_reroutes_total").absolute(s.rerouted);
        metrics::counter!("move_wait_overflows_total", "reason" => "budget")
            .absolute(s.over_budget);
        metrics::counter!("move_wait_overflows_total", "reason" => "cap").absolute(s.over_cap);
        metrics::gauge!("move_waiting").set(s.waiting as f64);
    }
}

impl MetricSource for ShardMetrics {
    fn record(&self) {
        self.record_pool_gauges();
        self.record_breakers();
        self.record_replica_reads();
        self.record_directory();
        self.record_move_waits();
    }

    fn actuator(&self, out: &mut Map<String, Value>) {
        let mut shards = Map::new();
        // Owned now, range moves included (the live slot map), not as autumn.toml says.
        let owners = self.shards.set().slot_map().snapshot();
        for shard in self.shards.set().iter() {
            shards.insert(
                shard.name().to_owned(),
                json!({
                    "slots": owners.slot_count_of(shard.id().index()),
                    "primary": pool_json(shard.primary_pool()),
                    "replica": shard.replica_pool().map(pool_json),
                    "replica_ready": shard.replica_pool().map(|_| self.shards.replicas().is_ready(shard.id())),
                    "circuit": shard.breakers().map(|b| b.snapshot()).collect::<Vec<_>>(),
                }),
            );
        }
        out.insert("database_control".to_owned(), pool_json(&self.control));
        out.insert("database_shards".to_owned(), Value::Object(shards));
        out.insert(
            "directory".to_owned(),
            json!(self.directory.as_ref().map(|d| d.stats())),
        );
        out.insert(
            "control_circuit".to_owned(),
            json!(self.control_breaker.as_ref().map(|b| b.snapshot())),
        );
        out.insert(
            "total_max_connections".to_owned(),
            json!(self.shards.set().total_max_connections()),
        );
        out.insert(
            "move_waits".to_owned(),
            json!(self.shards.move_waits().stats()),
        );
    }
}

/// A pool's occupancy, as `/actuator/metrics` shows it.
pub fn pool_json(pool: &PgPool) -> Value {
    let s = pool.status();
    json!({
        "max_size": s.max_size,
        "size": s.size,
        "in_use": s.size.saturating_sub(s.available),
        "available": s.available,
        "waiting": s.waiting,
    })
}
