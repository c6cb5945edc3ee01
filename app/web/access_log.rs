//! The access log: one line per answered request (request id, method, path, status,
//! latency, tenant, serving shard), and for a failed one its cause, which the client is not
//! told (a [`Cause`] on the response, from `ApiError`).
//!
//! Failures are logged at their cause's level (WARN at least for a server error) and slow
//! answers at INFO; every other answer only at DEBUG
//! (`RUST_LOG=info,bookmarks_sharded::web::access_log=debug` shows them). In front of the
//! replicas nginx already writes a line per request with tenant, shard and request id, and
//! formatting a second one cost the app about a sixth of its instructions per read, plus a
//! `write` syscall (docs/load-testing.md).
//!
//! There is no span per request: opening one cost about 5 % of a read's instructions
//! whether or not anything was logged in it. The request id is on the request's line, and
//! the causes that used to be logged inside the span are written on that line.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::response::Response;
use tower::Service;
use tracing::Level;

use super::REQUEST_ID;
use super::around::{Answer, Around};
use super::request_facts::RequestFacts;

/// Answers at least this slow are logged at INFO.
pub const SLOW: Duration = Duration::from_millis(500);

/// Why an answer failed, in words for operators: attached to the response by whoever
/// built it, taken off and written by the access log.
#[derive(Clone, Debug)]
pub struct Cause {
    pub level: Level,
    /// A short fixed phrase: the line's message.
    pub what: &'static str,
    /// The underlying error, as text.
    pub detail: String,
}

/// The access log, as a layer: `AroundLayer(AccessLog)`.
#[derive(Clone, Copy, Default)]
pub struct AccessLog;

impl Around for AccessLog {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        let started = Instant::now();
        let facts = RequestFacts::of(&mut request);
        // Cheap clones: a standard method is a constant, a URI and a header value share
        // their buffers.
        let method = request.method().clone();
        let uri = request.uri().clone();
        let id = request.headers().get(REQUEST_ID).cloned();
        let answer = inner.call(request);
        Box::pin(async move {
            let Ok(mut response) = answer.await;
            let latency = started.elapsed();
            let status = response.status();
            let cause = response.extensions_mut().remove::<Cause>();
            let waited = facts.waited();
            let (level, what) = match &cause {
                // The more severe of the cause's level and the status's.
                Some(c) if status.is_server_error() => (c.level.min(Level::WARN), c.what),
                Some(c) => (c.level, c.what),
                None if status.is_server_error() => (Level::WARN, "failed"),
                // Clients saw a delay instead of an error: say so, and for how long.
                None if waited.is_some() => (Level::INFO, "waited out a tenant move"),
                None if latency >= SLOW => (Level::INFO, "slow"),
                None => (Level::DEBUG, "answered"),
            };
            // One callsite per level: a tracing callsite's level is fixed.
            macro_rules! answered {
                ($level:expr) => {
                    tracing::event!(
                        $level,
                        request_id = tracing::field::display(
                            id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("-")
                        ),
                        method = %method,
                        path = %uri.path(),
                        status = status.as_u16(),
                        latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
                        tenant = facts.tenant().map(tracing::field::display),
                        shard = facts.with_shard(|s| s.map(str::to_owned)).map(tracing::field::display),
                        move_wait_ms = waited.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
                        error = cause.as_ref().map(|c| tracing::field::display(&c.detail)),
                        "{what}",
                    )
                };
            }
            match level {
                Level::ERROR => answered!(Level::ERROR),
                Level::WARN => answered!(Level::WARN),
                Level::INFO => answered!(Level::INFO),
                _ => answered!(Level::DEBUG),
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
                "/internal",
                get(|| async {
                    crate::web::error::ApiError::Internal(anyhow::anyhow!("disk on fire"))
                }),
            )
            .route(
                "/waited",
                get(|facts: axum::Extension<RequestFacts>| async move {
                    facts
                        .observer()
                        .waited(std::time::Duration::from_millis(137));
                    "written after the fence lifted"
                }),
            )
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
    async fn an_internal_error_is_logged_once_with_its_cause_and_request_id() {
        let logged = logged_at_info("/internal").await;
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines.len(), 1, "{logged}");
        let line = lines[0];
        assert!(line.contains("ERROR"), "{line}");
        assert!(line.contains("internal error"), "{line}");
        assert!(line.contains("disk on fire"), "{line}");
        assert!(line.contains("request_id=req-42"), "{line}");
        assert!(line.contains("status=500"), "{line}");
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

    #[tokio::test]
    async fn a_request_that_waited_out_a_move_is_logged_at_info_with_how_long() {
        let line = logged_at_info("/waited").await;
        assert!(line.contains(" INFO "), "{line}");
        assert!(
            line.contains("waited out a tenant move") && line.contains("move_wait_ms=137"),
            "{line}"
        );
        assert!(line.contains("status=200"), "{line}");
    }
}
