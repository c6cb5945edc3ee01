//! Request ids: every request carries one in `X-Request-Id` (the caller's, nginx's
//! `$request_id` behind the stack, or one minted here) and every answer repeats it, so that
//! the app's log lines can be matched to the caller's and to nginx's.
//!
//! One layer does both halves. tower-http's pair of layers formatted each minted UUID
//! through `fmt` into a `String`, parsed it back into a header value and kept a copy in the
//! request's extensions: about 4 % of a read's instructions (docs/load-testing.md).

use std::convert::Infallible;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::Response;
use tower::Service;
use uuid::Uuid;

use super::REQUEST_ID;
use super::around::{Answer, Around};

/// As a layer: `AroundLayer(RequestIds)`.
#[derive(Clone, Copy, Default)]
pub struct RequestIds;

impl Around for RequestIds {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        let id = match request.headers().get(REQUEST_ID) {
            // A header value shares its buffer: no copy.
            Some(id) => id.clone(),
            None => {
                let id = mint();
                request.headers_mut().insert(REQUEST_ID, id.clone());
                id
            }
        };
        let answer = inner.call(request);
        Box::pin(async move {
            let Ok(mut response) = answer.await;
            response.headers_mut().entry(REQUEST_ID).or_insert(id);
            Ok(response)
        })
    }
}

/// A fresh random id (UUID v4), encoded straight into the header value's bytes.
fn mint() -> HeaderValue {
    let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
    let text = Uuid::new_v4().hyphenated().encode_lower(&mut text);
    // Hex digits and hyphens are always a valid header value.
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("-"))
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;
    use crate::web::around::AroundLayer;

    /// Answers with the request id the handler saw, in the body.
    fn app() -> Router {
        Router::new()
            .route(
                "/",
                get(|request: Request| async move {
                    request
                        .headers()
                        .get(REQUEST_ID)
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default()
                }),
            )
            .layer(AroundLayer(RequestIds))
    }

    async fn seen_and_answered(request: Request) -> (String, String) {
        let response = app().oneshot(request).await.unwrap();
        let answered = response.headers()[REQUEST_ID].to_str().unwrap().to_owned();
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        (String::from_utf8(body.to_vec()).unwrap(), answered)
    }

    #[tokio::test]
    async fn the_callers_request_id_reaches_the_handler_and_comes_back() {
        let request = Request::builder()
            .uri("/")
            .header(REQUEST_ID, "from-nginx-1")
            .body(Body::empty())
            .unwrap();
        let (seen, answered) = seen_and_answered(request).await;
        assert_eq!(seen, "from-nginx-1");
        assert_eq!(answered, "from-nginx-1");
    }

    #[tokio::test]
    async fn a_request_without_an_id_gets_a_fresh_uuid_that_its_answer_repeats() {
        let request = || Request::builder().uri("/").body(Body::empty()).unwrap();
        let (seen, answered) = seen_and_answered(request()).await;
        assert_eq!(seen, answered);
        assert_eq!(Uuid::parse_str(&seen).unwrap().get_version_num(), 4);
        let (again, _) = seen_and_answered(request()).await;
        assert_ne!(seen, again, "each request gets its own id");
    }
}
