//! Fairness between tenants that share a shard: the per-tenant bulkhead, the busiest-tenant
//! summary behind `/metrics` and the admin page, and the placement advice drawn from it.
//!
//! Everything here is per web replica: each process limits and counts what it serves itself.

pub mod advice;
pub mod bulkhead;
pub mod busiest;

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower::Service;

use crate::telemetry::MetricSource;
use crate::web::around::{Answer, Around};
use crate::web::error::{ApiError, Reply};
use crate::web::extract::Tenant;
use crate::web::request_facts::RequestFacts;
use bulkhead::Bulkhead;
use busiest::{Busiest, Outcome};

/// This process's bulkhead and busiest-tenant summary. One `Arc`: handlers' state, and the
/// bulkhead layer that the router clones for every request.
#[derive(Clone)]
pub struct Fairness(Arc<Parts>);

struct Parts {
    bulkhead: Arc<Bulkhead>,
    busiest: Busiest,
}

/// The `code`s the fairness layer's answers carry.
pub const CODES: &[&str] = &["tenant_busy"];

/// Why the fairness layer refused a request.
#[derive(Debug, thiserror::Error)]
pub enum FairnessError {
    #[error("this tenant already has {limit} requests in progress on this server")]
    TenantBusy { limit: u32 },
}

impl From<FairnessError> for ApiError {
    fn from(e: FairnessError) -> Self {
        let FairnessError::TenantBusy { limit } = e;
        let reply = Reply::new(
            StatusCode::TOO_MANY_REQUESTS,
            "tenant_busy",
            format!(
                "{e}; nothing was done, retry after Retry-After seconds (at most {limit} \
                 requests of one tenant run at once, so that its shard's other tenants are \
                 served too)"
            ),
        )
        .detail("limit", limit)
        // A tenant's requests in progress usually finish within milliseconds.
        .retry_after(1);
        ApiError::Feature(Box::new(reply))
    }
}

impl Fairness {
    pub fn new(max_in_flight_per_tenant: u32) -> Self {
        Self(Arc::new(Parts {
            bulkhead: Bulkhead::new(max_in_flight_per_tenant),
            busiest: Busiest::new(),
        }))
    }

    /// At most this many requests of one tenant run at once in this process.
    pub fn limit(&self) -> u32 {
        self.0.bulkhead.limit()
    }

    /// The busiest tenants and, for those that dominate a shard, where they would go, given
    /// every configured shard's name.
    pub fn report(&self, shard_names: &[&str]) -> (busiest::BusiestReport, Vec<advice::Advice>) {
        let report = self.0.busiest.report();
        let advice = advice::advise(&report, shard_names);
        (report, advice)
    }

    /// The busiest tenants as Prometheus text: a fixed number of series (`busiest::TOP`
    /// tenants), never a label per tenant ever seen. Rendered at scrape time so that a tenant
    /// that drops out of the top leaves no series behind.
    pub fn prometheus_text(&self, out: &mut String) {
        let report = self.0.busiest.report();
        let mut family = |name: &str, help: &str, value: &dyn Fn(&busiest::TenantLoad) -> f64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (rank, t) in report.tenants.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{name}{{rank=\"{}\",tenant=\"{}\",shard=\"{}\"}} {}",
                    rank + 1,
                    t.tenant,
                    t.shard.as_deref().unwrap_or("none"),
                    value(t)
                );
            }
        };
        let window = report.window_seconds;
        family(
            "tenant_busiest_requests",
            &format!("Requests of this process's busiest tenants over the last {window} s."),
            &|t| t.requests as f64,
        );
        family(
            "tenant_busiest_shard_share",
            "The tenant's share of the requests its shard served in the same span.",
            &|t| t.shard_share,
        );
        family(
            "tenant_busiest_rejected",
            "Requests of the tenant refused by the per-tenant bulkhead (429) in the same span.",
            &|t| t.rejected as f64,
        );
        family(
            "tenant_busiest_p99_seconds",
            "The tenant's 99th percentile latency (upper bound of a coarse bucket).",
            &|t| t.p99_ms / 1000.0,
        );
    }
}

impl MetricSource for Fairness {
    fn prometheus_text(&self, out: &mut String) {
        Fairness::prometheus_text(self, out);
    }

    fn names_tenants(&self) -> bool {
        true
    }
}

/// Wraps the tenant routes, inside their authentication: admits each request through its
/// tenant's bulkhead (or answers 429) and records the outcome for the busiest-tenant
/// summary. Requests without a proven tenant pass untouched; the handler answers them with
/// the reason. As a layer: `AroundLayer(Admission::new(fairness))`.
#[derive(Clone)]
pub struct Admission(Fairness);

impl Admission {
    pub fn new(fairness: Fairness) -> Self {
        Self(fairness)
    }
}

impl Around for Admission {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        // The authentication layer in front proved the tenant; without one the handler
        // answers with the precise error.
        let Some(Tenant(tenant)) = request.extensions().get::<Tenant>().cloned() else {
            return Box::pin(inner.call(request));
        };
        let facts = RequestFacts::of(&mut request);
        let fairness = &self.0;
        let started = Instant::now();
        let Some(permit) = fairness.0.bulkhead.try_enter(&tenant) else {
            metrics::counter!("tenant_bulkhead_rejections_total").increment(1);
            fairness.0.busiest.record(
                &tenant,
                Outcome {
                    shard: None,
                    latency: started.elapsed(),
                    rejected: true,
                },
            );
            let busy = ApiError::from(FairnessError::TenantBusy {
                limit: fairness.0.bulkhead.limit(),
            });
            return Box::pin(std::future::ready(Ok(busy.into_response())));
        };
        let answer = inner.call(request);
        let fairness = fairness.clone();
        Box::pin(async move {
            let answer = answer.await;
            drop(permit);
            facts.with_shard(|shard| {
                fairness.0.busiest.record(
                    &tenant,
                    Outcome {
                        shard,
                        latency: started.elapsed(),
                        rejected: false,
                    },
                )
            });
            answer
        })
    }
}
