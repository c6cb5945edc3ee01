//! `/health` (liveness), `/ready` and `/actuator/health` (readiness with live checks).
//!
//! Readiness probes the control database and every shard's primary and replica, including
//! migration parity, concurrently and each within the shard timeout, so one dead server
//! costs a probe that long and no more. A shard primary that passed stands on its server's
//! liveness until its recheck is due ([`PrimaryChecks`]).
//!
//! `/ready` is public and bypasses the in-flight limit, so it must not let a caller turn
//! requests into database work: a call answers the last probe's report while it is younger
//! than `ready_max_age` (1 s), and one probe runs at a time however many calls wait for it.
//! The report is written out once per probe, for both scopes: a flood of calls then costs a
//! copy of bytes each, whatever the number of shards the body lists.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::InstanceName;
use super::drain::Draining;
use super::extract::ApiQuery;
use crate::pg::health::probe;
use crate::pg::pool::{AfterCheck, PgPool};
use crate::sharding::DirectoryRouter;
use crate::sharding::access::Shards;
use crate::sharding::health::{PrimaryChecks, check_replica};
use crate::sharding::topology::ReplicaFallback;

/// Everything readiness looks at: the control database, every shard's servers (and the
/// migrations each must have applied), and the directory listener.
#[derive(Clone)]
pub struct Readiness(Arc<Probed>);

struct Probed {
    control: PgPool,
    shards: Shards,
    directory: Option<Arc<DirectoryRouter>>,
    expected_control_migrations: BTreeSet<String>,
    expected_shard_migrations: Arc<BTreeSet<String>>,
    /// Bound on one probe.
    timeout: Duration,
    /// Set once this replica is stopping: then it is not ready, whatever the databases say.
    draining: Draining,
    /// How long a probe's report answers `/ready` before the next call probes again.
    max_age: Duration,
    /// The last probe's answers and when it started; locked for the whole of a probe, so
    /// that the calls arriving meanwhile wait for its answers instead of probing too.
    last: Mutex<Option<(Instant, Answers)>>,
    /// Shard primaries whose full check passed, and until when that stands.
    primaries: PrimaryChecks,
}

/// One report as `/ready` sends it for each scope: status code and JSON body, written once.
#[derive(Clone)]
struct Answers {
    all: (StatusCode, Bytes),
    replica: (StatusCode, Bytes),
}

impl Answers {
    fn of(report: Report) -> Self {
        let Report {
            body: mut report,
            replica_up,
        } = report;
        let all_up = report["status"] == "UP";
        let mut render = |up: bool| {
            report["status"] = json!(status(up));
            let code = if up {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (code, Bytes::from(report.to_string()))
        };
        Self {
            all: render(all_up),
            replica: render(replica_up),
        }
    }

    fn for_scope(&self, scope: ReadyScope) -> Response {
        let (code, body) = match scope {
            ReadyScope::All => &self.all,
            ReadyScope::Replica => &self.replica,
        };
        (
            *code,
            [(header::CONTENT_TYPE, "application/json")],
            body.clone(),
        )
            .into_response()
    }
}

/// One probe's findings: the body `/ready` sends, and whether this replica can serve.
#[derive(Debug, Clone)]
pub struct Report {
    pub body: Value,
    /// Not stopping, and the control database answers with no migration of this build's
    /// pending (a newer release's schema serves it): what `scope=replica` asks.
    pub replica_up: bool,
}

/// How long one server's check may take, and how long a probe's report is answered.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTiming {
    pub timeout: Duration,
    pub max_age: Duration,
}

impl Readiness {
    pub fn new(
        control: PgPool,
        shards: Shards,
        directory: Option<Arc<DirectoryRouter>>,
        expected_control_migrations: BTreeSet<String>,
        expected_shard_migrations: Arc<BTreeSet<String>>,
        timing: ProbeTiming,
        draining: Draining,
    ) -> Self {
        Self(Arc::new(Probed {
            control,
            shards,
            directory,
            expected_control_migrations,
            expected_shard_migrations,
            timeout: timing.timeout,
            draining,
            max_age: timing.max_age,
            last: Mutex::new(None),
            primaries: PrimaryChecks::default(),
        }))
    }
}

/// `/health`, `/ready` and `/actuator/health`.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Readiness: FromRef<S>,
    InstanceName: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(actuator_health))
}

/// Liveness: the process is serving. Database trouble must not get it restarted.
#[utoipa::path(
    get,
    path = "/health",
    tag = super::openapi::OPERATIONS_TAG,
    responses((status = 200, description = "The process is serving: `{\"status\": \"UP\", \"components\": {…}}`.", content_type = "application/json", body = Object))
)]
async fn health(State(instance): State<InstanceName>) -> Json<Value> {
    Json(json!({
        "status": "UP",
        "components": {
            "process": { "status": "UP", "details": { "instance": instance.as_str() } }
        }
    }))
}

/// Which components decide `/ready`'s answer. The body always reports every one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadyScope {
    /// Every component: the whole deployment is serving (what an operator waits on).
    #[default]
    All,
    /// What differs between replicas: this one is not stopping and reaches the control
    /// database, where none of its migrations is pending (a newer release's schema, as
    /// during a rolling update, still serves it). A shard that is down is down for every
    /// replica, so a balancer that dropped replicas for it would turn one shard's outage
    /// into everyone's: this is the scope for a load balancer's or Kubernetes' probe.
    Replica,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReadyParams {
    /// `all` (default): every component must be up. `replica`: this replica is not
    /// stopping and the control database has its migrations (or a newer release's); shards
    /// are reported but do not decide. `replica` is for balancers and Kubernetes probes.
    #[param(inline)]
    scope: Option<ReadyScope>,
}

/// Readiness: the control database and every shard's servers answer, with the migrations
/// this build expects, and this replica is not stopping. Says nothing about any tenant.
/// Answered from a probe at most `READY_MAX_AGE_MS` (1 s) old; a stopping replica says so
/// at once.
#[utoipa::path(
    get,
    path = "/ready",
    tag = super::openapi::OPERATIONS_TAG,
    params(ReadyParams),
    responses(
        (status = 200, description = "Every component the scope names is up: `{\"status\": \"UP\", \"components\": {…}}`.", content_type = "application/json", body = Object),
        (status = 400, description = "`invalid_query`: `scope` is neither `all` nor `replica`, or another parameter was sent.", body = super::openapi::ErrorBody),
        (status = 503, description = "A component the scope names is down, or this replica is stopping (component `process`); the body says which (same shape as 200).", content_type = "application/json", body = Object),
    )
)]
async fn ready(
    State(readiness): State<Readiness>,
    ApiQuery(params): ApiQuery<ReadyParams>,
) -> Response {
    readiness
        .recent_answers()
        .await
        .for_scope(params.scope.unwrap_or_default())
}

/// `/ready` under the name Spring-style tooling looks for.
#[utoipa::path(
    get,
    path = "/actuator/health",
    tag = super::openapi::OPERATIONS_TAG,
    responses(
        (status = 200, description = "As `/ready`.", content_type = "application/json", body = Object),
        (status = 503, description = "As `/ready`.", content_type = "application/json", body = Object),
    )
)]
async fn actuator_health(State(readiness): State<Readiness>) -> Response {
    readiness.recent_answers().await.for_scope(ReadyScope::All)
}

fn status(up: bool) -> &'static str {
    if up { "UP" } else { "DOWN" }
}

impl Readiness {
    /// The answers of a probe at most `max_age` old: the last one's, or a new one's (which
    /// the calls arriving while it runs share).
    async fn recent_answers(&self) -> Answers {
        let state = &*self.0;
        if state.draining.is_on() {
            // Known without a probe, and a balancer must learn it at once.
            return Answers::of(self.report().await);
        }
        let mut last = state.last.lock().await;
        if let Some((at, answers)) = &*last
            && at.elapsed() < state.max_age
        {
            return answers.clone();
        }
        let at = Instant::now();
        let answers = Answers::of(self.report().await);
        metrics::counter!("ready_probes_total").increment(1);
        *last = Some((at, answers.clone()));
        answers
    }

    /// Builds the component report; the replica checks also update replica readiness.
    pub async fn report(&self) -> Report {
        let state = &*self.0;
        if state.draining.is_on() {
            // Nothing to probe: whatever the databases say, this replica is leaving.
            let body = json!({
                "status": "DOWN",
                "components": {
                    "process": {
                        "status": "DOWN",
                        "details": {
                            "draining": "this replica is stopping: it finishes the requests it \
                                         has and takes no new ones; send them to another"
                        }
                    }
                }
            });
            return Report {
                body,
                replica_up: false,
            };
        }
        let timeout = state.timeout;
        let shards = state.shards.set();
        // Owned now, range moves included (the live slot map), not as autumn.toml says.
        let owners = shards.slot_map().snapshot();
        let control = probe(
            &state.control,
            false,
            &state.expected_control_migrations,
            timeout,
            None,
            AfterCheck::Return,
        );
        let per_shard = futures::future::join_all(shards.iter().map(|shard| async move {
            let expected = &state.expected_shard_migrations;
            let primary = state.primaries.probe(shards, shard, expected, timeout);
            let replica = check_replica(shard, state.shards.replicas(), expected, timeout);
            let (primary, replica) = futures::join!(primary, replica);
            (shard, primary, replica)
        }));
        let (control, per_shard) = futures::join!(control, per_shard);
        let replica_up = control.up || control.newer_schema;

        let mut all_up = control.up;
        let mut components = serde_json::Map::new();
        components.insert(
            "db:control".to_owned(),
            json!({ "status": status(control.up), "details": { "primary": control.detail } }),
        );
        for (shard, primary, replica) in per_shard {
            let mut up = primary.up;
            let mut details = json!({
                "primary": primary.detail,
                "slots": owners.slot_count_of(shard.id().index()),
                "circuit": shard
                    .breakers()
                    .map(|b| {
                        let state = if b.is_open() { "open" } else { "closed" };
                        (b.role().as_str().to_owned(), json!(state))
                    })
                    .collect::<serde_json::Map<_, _>>(),
            });
            if let Some(replica) = replica {
                if replica.up {
                    details["replica"] = json!(replica.detail);
                    details["reads"] = json!("replica");
                } else {
                    details["replica"] = json!(format!("down: {}", replica.detail));
                    match shard.replica_fallback() {
                        ReplicaFallback::Primary => {
                            details["reads"] = json!("primary (replica_fallback = primary)");
                        }
                        ReplicaFallback::FailReadiness => {
                            up = false;
                            details["reads"] = json!("refused (replica_fallback = fail_readiness)");
                        }
                    }
                }
            }
            all_up &= up;
            components.insert(
                format!("db:shard:{}", shard.name()),
                json!({ "status": status(up), "details": details }),
            );
        }
        if let Some(directory) = &state.directory {
            // Not a readiness failure: while the listener is away, cached routes serve and
            // misses still reach the control database (whose own component says if it cannot).
            let stats = directory.stats();
            components.insert(
            "directory".to_owned(),
            json!({
                "status": "UP",
                "details": {
                    "listener": if stats.listener_connected {
                        "connected"
                    } else {
                        "disconnected: cached routes serve until their TTL, then ask the control database"
                    },
                    "cache_entries": stats.entries,
                    "cache_ttl_ms": directory.ttl().as_millis() as u64,
                },
            }),
        );
        }
        Report {
            body: json!({ "status": status(all_up), "components": components }),
            replica_up,
        }
    }
}
