//! A bound on the requests one replica works on at once. Past it a request is answered at
//! the door (503 `server_busy`, `Retry-After`), before it takes memory, a pool's queue or a
//! database connection: however many requests one client opens, the replica keeps room to
//! answer. Liveness and readiness are never refused, so an overloaded replica is not
//! restarted for being busy.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tower::Service;

use super::around::{Answer, Around};
use super::error::Reply;

/// As a layer: `AroundLayer(InFlightLimit::new(n))`.
#[derive(Clone)]
pub struct InFlightLimit {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl InFlightLimit {
    pub fn new(limit: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }
}

impl Around for InFlightLimit {
    fn around<S>(&self, inner: &mut S, request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        if matches!(request.uri().path(), "/health" | "/ready") {
            return Box::pin(inner.call(request));
        }
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            metrics::counter!("http_requests_refused_busy_total").increment(1);
            let busy = Reply::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                format!(
                    "this server is working on {} requests already; nothing was done, retry \\
                     after Retry-After seconds",
                    self.limit
                ),
            )
            .retry_after(1);
            return Box::pin(std::future::ready(Ok(busy.into_response())));
        };
        let answer = inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            drop(permit);
            answer
        })
    }
}
