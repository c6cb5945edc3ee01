//! A pooled connection tied to its server's circuit breaker. Its statements run under a
//! deadline that detects a *silent* server: when a statement has waited a whole deadline
//! and the server has answered nothing else meanwhile (no other statement, no liveness
//! check), the statement is abandoned and the breaker opens. A statement that is merely
//! slow on a server that keeps answering (a lock wait, a loaded machine) goes on waiting,
//! bounded by the request's own timeout.
//!
//! A connection whose statement was cut off (by the deadline, or because the caller's
//! future was dropped, as the request timeout does) is discarded when this is dropped,
//! never returned to the pool, and the server is asked to cancel the statement (a cancel
//! request on a connection of its own): a server that is merely slow would otherwise keep
//! working on a statement nobody waits for, and abandoned statements would pile up toward
//! `max_connections`. A silent server may not hear the request; its `statement_timeout`
//! (set on every pooled connection) ends the statement when it runs again. Shard
//! connections and the control database's lookups all go through it.

use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::Object;
use diesel_async::AsyncPgConnection;
use quanta::Instant;

use super::breaker::Breaker;
use super::pool::{PgConn, Pooled};

/// A statement on the connection was cut off: by this call's deadline, or by an earlier one.
#[derive(Debug)]
pub struct CutOff;

pub struct DeadlineConn {
    /// `Some` until `Drop`.
    conn: Option<PgConn>,
    /// A statement may be in flight on `conn`.
    dirty: bool,
    breaker: Arc<Breaker>,
    deadline: Duration,
}

impl DeadlineConn {
    pub fn new(conn: PgConn, breaker: Arc<Breaker>, deadline: Duration) -> Self {
        Self {
            conn: Some(conn),
            dirty: false,
            breaker,
            deadline,
        }
    }

    pub fn breaker(&self) -> &Arc<Breaker> {
        &self.breaker
    }

    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The connection, without a deadline: for background work whose statements are
    /// bounded by their own batch sizes, not by a request.
    pub fn raw(&mut self) -> &mut AsyncPgConnection {
        self.conn
            .as_mut()
            .expect("the connection is only taken when the DeadlineConn is dropped")
    }

    /// Runs `work`, abandoning it once the server has been silent for a whole deadline.
    /// Then the connection will be discarded and the server's breaker is open.
    pub async fn within<T>(
        &mut self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> T,
    ) -> Result<T, CutOff> {
        self.within_pooled(async |pooled| work(pooled).await).await
    }

    /// [`DeadlineConn::within`], for work that also settles the session (see
    /// [`Pooled::settle`]).
    pub async fn within_pooled<T>(
        &mut self,
        work: impl AsyncFnOnce(&mut Pooled) -> T,
    ) -> Result<T, CutOff> {
        if self.dirty {
            return Err(CutOff);
        }
        self.dirty = true;
        let conn = self
            .conn
            .as_mut()
            .expect("the connection is only taken when the DeadlineConn is dropped");
        let mut work = std::pin::pin!(work(conn));
        loop {
            let window = Instant::now();
            match tokio::time::timeout(self.deadline, &mut work).await {
                Ok(outcome) => {
                    self.dirty = false;
                    self.breaker.answered();
                    return Ok(outcome);
                }
                // Slow, not silent: the server answers others.
                Err(_) if self.breaker.answered_since(window) => continue,
                Err(_) => {
                    self.breaker
                        .trip("statement deadline passed, server silent");
                    return Err(CutOff);
                }
            }
        }
    }
}

impl DeadlineConn {
    /// Closes the connection instead of returning it to the pool.
    pub fn discard(mut self) {
        if let Some(conn) = self.conn.take() {
            drop(Object::take(conn));
        }
    }
}

impl Drop for DeadlineConn {
    fn drop(&mut self) {
        if self.dirty
            && let Some(conn) = self.conn.take()
        {
            cancel_in_background(conn.cancel_token(), self.breaker.probe_timeout());
            // Out of the pool for good; dropping it closes the socket.
            drop(Object::take(conn));
        }
    }
}

/// Asks the server to cancel the statement running on the connection `token` is for,
/// without waiting for it (and giving up after `bound`).
fn cancel_in_background(token: tokio_postgres::CancelToken, bound: Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        match tokio::time::timeout(bound, token.cancel_query(tokio_postgres::NoTls)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "cancel request failed"),
            Err(_) => tracing::debug!("cancel request not delivered in time"),
        }
    });
}
