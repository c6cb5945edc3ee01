//! The access log: one line per answered request (method, path, status, latency, tenant,
//! serving shard), inside a `request` span that gives every line logged on the way the
//! request id.
//!
//! Server errors are logged at WARN and slow answers at INFO; every other answer only at
//! DEBUG (`RUST_LOG=info,bookmarks_sharded::web::access_log=debug` shows them). In front of
//! the replicas nginx already writes a line per request with tenant, shard and request id,
//! and formatting a second one cost the app about a sixth of its instructions per read, plus
//! a `write` syscall (docs/load-testing.md).

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::response::Response;
use tower::Service;
use tracing::{Instrument, Level};

use super::REQUEST_ID;
use super::around::{Answer, Around};
use super::extract::RequestFacts;

/// Answers at least this slow are logged at INFO.
pub const SLOW: Duration = Duration::from_millis(500);

/// The access log, as a layer: `AroundLayer(AccessLog)`.
#[derive(Clone, Copy, Default)]
pub struct AccessLog;

impl Around for AccessLog {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible>,
        S::Future: Send + 'static,
    {
        let started = Instant::now();
        let facts = RequestFacts::of(&mut request);
        // Cheap clones: a standard method is a constant and a URI shares its buffer.
        let method = request.method().clone();
        let uri = request.uri().clone();
        let id = request
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        let span = tracing::info_span!("request", request_id = %id);
        let answer = span.in_scope(|| inner.call(request));
        Box::pin(async move {
            let Ok(response) = answer.instrument(span.clone()).await;
            let _serving = span.enter();
            let latency = started.elapsed();
            let status = response.status();
            // One callsite per level: a tracing callsite's level is fixed.
            macro_rules! answered {
                ($level:expr, $message:literal) => {
                    tracing::event!(
                        $level,
                        method = %method,
                        path = %uri.path(),
                        status = status.as_u16(),
                        latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
                        tenant = facts.tenant().map(tracing::field::display),
                        shard = facts.shard().map(tracing::field::display),
                        $message,
                    )
                };
            }
            if status.is_server_error() {
                answered!(Level::WARN, "failed");
            } else if latency >= SLOW {
                answered!(Level::INFO, "slow");
            } else {
                answered!(Level::DEBUG, "answered");
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    /// Log output kept in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Serves one request to `path` through the access log at the default level, INFO,
    /// and returns what was logged.
    async fn logged_at_info(path: &str) -> String {
        let app = Router::new()
            .route("/ok", get(|| async { "fine" }))
            .route("/broken", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(SLOW).await;
                    "late"
                }),
            )
            .layer(crate::web::around::AroundLayer(AccessLog));
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let request = Request::builder()
            .uri(path)
            .header(REQUEST_ID, "req-42")
            .body(Body::empty())
            .unwrap();
        app.oneshot(request).await.unwrap();
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    #[tokio::test]
    async fn an_ordinary_answer_is_not_logged_at_info() {
        assert_eq!(logged_at_info("/ok").await, "");
    }

    #[tokio::test]
    async fn a_server_error_is_logged_as_a_warning_with_its_request_id() {
        let line = logged_at_info("/broken").await;
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains("request_id=req-42"), "{line}");
        assert!(line.contains("status=503"), "{line}");
        assert!(line.contains("path=/broken"), "{line}");
    }

    #[tokio::test]
    async fn a_slow_answer_is_logged_at_info() {
        let line = logged_at_info("/slow").await;
        assert!(line.contains(" INFO "), "{line}");
        assert!(
            line.contains("slow") && line.contains("status=200"),
            "{line}"
        );
    }
}
