//! Request metrics and their two views: `/metrics` (Prometheus text) and
//! `/actuator/metrics` (JSON, with a `database_shards` block of pool stats and slot counts,
//! and the directory cache's counters when directory routing is on).

use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::OnceLock;
use std::time::Instant;

use axum::Json;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::{Value, json};
use tower::Service;

use super::around::{Answer, Around};
use super::extract::RequestFacts;
use super::state::AppState;
use crate::sharding::shard_set::PgPool;

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
pub fn spawn_upkeep(handle: PrometheusHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            handle.run_upkeep();
        }
    })
}

/// Times each request and records route, status and serving shard; sets `X-Shard`.
/// Layered onto the router as `AroundLayer(Track)`: it needs the matched route.
#[derive(Clone, Copy, Default)]
pub struct Track;

impl Around for Track {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible>,
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
            let shard = facts.shard().unwrap_or("none");
            let status = response.status().as_u16();
            RequestMetrics::with(route, status, shard, |m| {
                if let Some(value) = &m.shard_header {
                    response.headers_mut().insert(X_SHARD, value.clone());
                }
                m.requests.increment(1);
                m.duration.record(started.elapsed().as_secs_f64());
            });
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

fn pool_json(pool: &PgPool) -> Value {
    let s = pool.status();
    json!({
        "max_size": s.max_size,
        "size": s.size,
        "in_use": s.size.saturating_sub(s.available),
        "available": s.available,
        "waiting": s.waiting,
    })
}

fn record_pool_gauges(state: &AppState) {
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
    set("control", "primary", &state.control);
    for shard in state.shards.set().iter() {
        set(shard.name(), "primary", shard.primary_pool());
        if let Some(pool) = shard.replica_pool() {
            set(shard.name(), "replica", pool);
        }
    }
}

/// Each server's circuit breaker: open or not, and how often it has opened.
fn record_breakers(state: &AppState) {
    for (target, breaker) in state.breakers() {
        let b = breaker.snapshot();
        let labels = [
            ("shard", target.to_owned()),
            ("role", b.role.as_str().to_owned()),
        ];
        metrics::gauge!("db_circuit_open", &labels).set(f64::from(u8::from(b.open)));
        metrics::counter!("db_circuit_trips_total", &labels).absolute(b.trips);
    }
}

/// The directory router's counters are kept in the router (cheap atomics on the request
/// path) and copied into the registry when scraped.
fn record_directory(state: &AppState) {
    let Some(directory) = &state.directory else {
        return;
    };
    let s = directory.stats();
    metrics::counter!("directory_cache_hits_total").absolute(s.hits);
    metrics::counter!("directory_cache_misses_total").absolute(s.misses);
    metrics::counter!("directory_cache_stale_hits_total").absolute(s.stale_hits);
    metrics::counter!("directory_cache_evictions_total").absolute(s.evictions);
    metrics::counter!("directory_cache_flushes_total").absolute(s.flushes);
    metrics::gauge!("directory_cache_entries").set(s.entries as f64);
    metrics::gauge!("directory_listener_connected").set(f64::from(u8::from(s.listener_connected)));
}

/// The search index as this process last saw each shard, and the job queue's counts.
fn record_background(state: &AppState) {
    for (shard, s) in &state.index.shards {
        let s = s.snapshot();
        let label = || ("shard", shard.clone());
        metrics::gauge!("search_index_lag_seconds", &[label()]).set(s.lag_ms as f64 / 1000.0);
        metrics::gauge!("search_index_pending", &[label()]).set(s.pending as f64);
        metrics::gauge!("search_reindexer_leader", &[label()])
            .set(f64::from(u8::from(s.leader_here)));
        metrics::counter!("search_indexed_rows_total", &[label()]).absolute(s.indexed_here);
    }
    for (job_state, n) in state.jobs.snapshot() {
        metrics::gauge!("jobs", "state" => job_state).set(n as f64);
    }
}

/// Per shard: backlog, lag, and whether this process leads its reindexing.
pub fn index_json(state: &AppState) -> Value {
    let shards = state
        .index
        .shards
        .iter()
        .map(|(shard, s)| (shard.clone(), json!(s.snapshot())))
        .collect();
    Value::Object(shards)
}

pub async fn prometheus(State(state): State<AppState>) -> impl IntoResponse {
    record_pool_gauges(&state);
    record_breakers(&state);
    record_directory(&state);
    record_background(&state);
    let mut text = state.metrics.render();
    text.push_str(&state.fairness.prometheus_text());
    (
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
}

pub async fn actuator(State(state): State<AppState>) -> Json<Value> {
    let mut shards = serde_json::Map::new();
    for shard in state.shards.set().iter() {
        shards.insert(
            shard.name().to_owned(),
            json!({
                "slots": shard.spec().slot_count(),
                "primary": pool_json(shard.primary_pool()),
                "replica": shard.replica_pool().map(pool_json),
                "replica_ready": shard.replica_pool().map(|_| state.shards.replicas().is_ready(shard.id())),
                "circuit": shard.breakers().map(|b| b.snapshot()).collect::<Vec<_>>(),
            }),
        );
    }
    Json(json!({
        "instance": state.instance_name,
        "database_control": pool_json(&state.control),
        "database_shards": shards,
        "directory": state.directory.as_ref().map(|d| d.stats()),
        "control_circuit": state.directory.as_ref().map(|d| d.breaker().snapshot()),
        "search_index": index_json(&state),
        "jobs": state
            .jobs
            .snapshot()
            .into_iter()
            .map(|(job_state, n)| (job_state, json!(n)))
            .collect::<serde_json::Map<_, _>>(),
        "total_max_connections": state.shards.set().total_max_connections(),
    }))
}
