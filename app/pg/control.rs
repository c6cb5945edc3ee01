//! Statements the request path sends to the control database (a directory lookup, an API
//! key lookup): each checked out through the control database's circuit breaker within the
//! acquire timeout and run under the query deadline, so a silent control database costs a
//! request one bounded wait, and then nothing while the breaker is open.

use std::sync::Arc;
use std::time::Duration;

use diesel_async::AsyncPgConnection;

use super::breaker::{Breaker, Role};
use super::db_url::DbUrl;
use super::deadline::{CutOff, DeadlineConn};
use super::pool::{CheckoutError, PgPool};

/// Why a lookup got no answer; for the log (never driver text for clients).
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("circuit open: the control database stopped answering")]
    CircuitOpen,
    #[error("{0}")]
    Checkout(CheckoutError),
    #[error("no connection within {0:?}")]
    NoConnection(Duration),
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
    #[error("{0}")]
    Query(diesel::result::Error),
}

/// Where lookups go and how long each step may take.
#[derive(Debug, Clone)]
pub struct LookupBounds {
    /// The server the breaker probes while it is open.
    pub url: DbUrl,
    pub connect_timeout: Duration,
    /// Bound on getting a connection.
    pub acquire_timeout: Duration,
    /// Bound on one statement (while the server answers nothing else).
    pub query_timeout: Duration,
}

/// The control pool with its breaker and bounds. Clones share the breaker.
#[derive(Clone)]
pub struct ControlLookups {
    pool: PgPool,
    breaker: Arc<Breaker>,
    /// Bound on getting a connection.
    acquire_timeout: Duration,
    /// Bound on one statement (while the server answers nothing else).
    query_timeout: Duration,
}

impl ControlLookups {
    /// Lookups through `pool`, with a breaker of their own for the control database.
    pub fn new(pool: PgPool, bounds: LookupBounds) -> Self {
        Self {
            pool,
            breaker: Breaker::new(
                "control database".to_owned(),
                Role::Control,
                bounds.url,
                bounds.connect_timeout,
            ),
            acquire_timeout: bounds.acquire_timeout,
            query_timeout: bounds.query_timeout,
        }
    }

    /// The control database's breaker: for the liveness monitor, health and metrics.
    pub fn breaker(&self) -> &Arc<Breaker> {
        &self.breaker
    }

    /// Runs `work` on a control connection; the error says, for the log, why it could not
    /// (never driver text for clients). Fails at once while the breaker is open.
    pub async fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> diesel::QueryResult<T>,
    ) -> Result<T, LookupError> {
        if self.breaker.is_open() {
            return Err(LookupError::CircuitOpen);
        }
        let bound = self.acquire_timeout;
        let conn = match tokio::time::timeout(bound, self.breaker.checkout(&self.pool)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(LookupError::Checkout(e)),
            Err(_) => return Err(LookupError::NoConnection(bound)),
        };
        let mut conn = DeadlineConn::new(conn, Arc::clone(&self.breaker), self.query_timeout);
        conn.within(work)
            .await
            .map_err(|CutOff| LookupError::NoAnswer(self.query_timeout))?
            .map_err(LookupError::Query)
    }
}
