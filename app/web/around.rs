//! The shape shared by the request path's own layers (access log, request timeout, request
//! metrics, authentication, tenant bulkhead): something that wraps one call of the service
//! inside it.
//!
//! They are services rather than `middleware::from_fn`, which clones the inner service,
//! boxes it into a `Next` and boxes a larger future on every request; that plumbing cost
//! more than the work of those layers (docs/load-testing.md).

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::Response;
use futures::future::BoxFuture;
use tower::{Layer, Service};

/// What a wrapped call gives back: the response, once served.
pub type Answer = BoxFuture<'static, Result<Response, Infallible>>;

/// One layer's work around a call.
pub trait Around: Clone + Send + Sync + 'static {
    /// Serves `request` with `inner`, which has been polled ready. A layer that must await
    /// something before calling it takes it out with `std::mem::replace(inner,
    /// inner.clone())`, so that the ready one is what is called.
    fn around<S>(&self, inner: &mut S, request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static;
}

/// Layers an [`Around`] onto a service or a router.
#[derive(Clone, Copy, Default)]
pub struct AroundLayer<A>(pub A);

impl<A: Clone, S> Layer<S> for AroundLayer<A> {
    type Service = Wrapped<A, S>;

    fn layer(&self, inner: S) -> Wrapped<A, S> {
        Wrapped {
            around: self.0.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct Wrapped<A, S> {
    around: A,
    inner: S,
}

impl<A, S> Service<Request> for Wrapped<A, S>
where
    A: Around,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Answer {
        self.around.around(&mut self.inner, request)
    }
}
