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
use super::pool::PgPool;

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
    ) -> Result<T, String> {
        if self.breaker.is_open() {
            return Err("circuit open: the control database stopped answering".to_owned());
        }
        let bound = self.acquire_timeout;
        let conn = match tokio::time::timeout(bound, self.breaker.checkout(&self.pool)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no connection within {bound:?}")),
        };
        let mut conn = DeadlineConn::new(conn, Arc::clone(&self.breaker), self.query_timeout);
        conn.within(work)
            .await
            .map_err(|CutOff| format!("no answer within {:?}", self.query_timeout))?
            .map_err(|e| e.to_string())
    }
}
