//! The tenant routes' door: checks what proves the request may act as a tenant (see
//! `tenancy::auth`) and records the outcome on the request, before the bulkhead and before
//! any extractor. The `Tenant` extractor, and every shard extractor built on it, then hands
//! handlers only a tenant that was proven, or answers with the reason (401, 403, 503); a
//! refused request never reaches a shard. A member whose role only reads is refused every
//! method but GET, HEAD and OPTIONS here (403 `forbidden_role`). A failed check (a wrong,
//! revoked or malformed key, a forged session) counts against the client's address, and an
//! address over its limit is answered 429 here, before its credentials are looked up.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use tower::Service;

use axum::response::IntoResponse;

use super::around::{Answer, Around};
use super::consistency::{self, Brought};
use super::error::ApiError;
use super::failed_credentials::FailedCredentials;
use super::request_facts::{RequestFacts, remember_tenant};
use crate::configuration::AuthMode;
use crate::tenancy::auth::{AuthError, Authenticator};
use crate::tenancy::members::Role;

/// Why the request may not act as a tenant, kept on it for the extractors.
#[derive(Debug, Clone)]
pub struct AuthFailure(pub AuthError);

/// As a layer: `AroundLayer(Authenticate::new(authenticator, limit))`, outermost on the
/// tenant routes.
#[derive(Clone)]
pub struct Authenticate {
    authenticator: Arc<Authenticator>,
    failed_credentials: Arc<FailedCredentials>,
}

impl Authenticate {
    pub fn new(
        authenticator: Arc<Authenticator>,
        failed_credentials: Arc<FailedCredentials>,
    ) -> Self {
        Self {
            authenticator,
            failed_credentials,
        }
    }
}

impl Around for Authenticate {
    fn around<S>(&self, inner: &mut S, mut request: Request) -> Answer
    where
        S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
        S::Future: Send + 'static,
    {
        // Facts first, so that the tenant is kept in them even without an outer layer.
        RequestFacts::of(&mut request);
        let authenticator = Arc::clone(&self.authenticator);
        let limit = Arc::clone(&self.failed_credentials);
        // The check may wait for the control database: take the service that was polled
        // ready and leave a clone in its place.
        let mut ready = std::mem::replace(inner, inner.clone());
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            // Only credentials are limited: a trusted gateway's header is not a guess, and a
            // request that presents none (the sign-in page) costs no lookup.
            if authenticator.mode() == AuthMode::ApiKey
                && let Err(refused) = limit.check(&parts.headers, &parts.extensions)
                && authenticator.presents_credentials(&parts)
            {
                return Ok(ApiError::from(refused).into_response());
            }
            match authenticator.authenticate(&parts).await {
                // A role that only reads is refused every other method here, once for every
                // tenant route, so that no write operation depends on remembering to check.
                Ok(proven) if !parts.method.is_safe() && !proven.role.writes() => {
                    parts
                        .extensions
                        .insert(AuthFailure(AuthError::ForbiddenRole {
                            role: proven.role,
                            needs: Role::Editor,
                        }));
                }
                Ok(proven) => {
                    // Every tenant route refuses a garbage token, whether it reads a shard
                    // or not, as the API document says.
                    match consistency::brought(&parts) {
                        Ok(token) => parts.extensions.insert(Brought(token)),
                        Err(refused) => return Ok(refused.into_response()),
                    };
                    remember_tenant(&mut parts.extensions, &proven.tenant);
                    parts.extensions.insert(proven);
                }
                Err(e) => {
                    if e.is_failed_check() {
                        limit.failed(&parts.headers, &parts.extensions);
                    }
                    parts.extensions.insert(AuthFailure(e));
                }
            }
            ready.call(Request::from_parts(parts, body)).await
        })
    }
}
