//! The request timeout, and the API's JSON error body for the two answers the framework
//! would otherwise send empty: a request that ran out of time and a wrong method (keeping
//! the `Allow` header of the 405).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower::Service;

use super::around::{Answer, Around};
use super::error::ApiError;

/// Bounds every request by `request_timeout`; as a layer, `AroundLayer(JsonFallbacks {…})`.
#[derive(Clone, Copy)]
pub struct JsonFallbacks {
    pub request_timeout: Duration,
}

impl Around for JsonFallbacks {
    fn around<S>(&self, inner: &mut S, request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        // Cheap clones (a standard method is a constant, a URI shares its buffer): the text
        // is only built for the rare answers below, not on every request.
        let method = request.method().clone();
        let uri = request.uri().clone();
        let request_timeout = self.request_timeout;
        let answer = tokio::time::timeout(request_timeout, inner.call(request));
        Box::pin(async move {
            let response = match answer.await {
                Ok(Ok(response)) => response,
                // The access log names the request and its cause.
                Err(_) => return Ok(ApiError::RequestTimeout(request_timeout).into_response()),
            };
            if response.status() != StatusCode::METHOD_NOT_ALLOWED
                || response.headers().contains_key(header::CONTENT_TYPE)
            {
                return Ok(response);
            }
            let allow = response.headers().get(header::ALLOW).cloned();
            let mut json = ApiError::MethodNotAllowed {
                method: method.to_string(),
                path: uri.path().to_owned(),
            }
            .into_response();
            if let Some(allow) = allow {
                json.headers_mut().insert(header::ALLOW, allow);
            }
            Ok(json)
        })
    }
}
