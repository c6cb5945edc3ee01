//! The admin page's reads of the control database (the directory, the moves), each bounded
//! so that a silent control database costs a section of the page, not the whole page.

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use futures::future::BoxFuture;

use crate::pg::pool::PgPool;

/// The control database's pool and the bound on one admin read of it.
#[derive(Clone)]
pub struct ControlDb {
    pool: PgPool,
    bound: Duration,
}

/// Why a section could not be read, as the page may show it (a kind of failure; the
/// driver's words go to the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("unreachable")]
    Unreachable,
    #[error("no answer within {ms} ms")]
    NoAnswer { ms: u128 },
}

impl ControlDb {
    pub fn new(pool: PgPool, bound: Duration) -> Self {
        Self { pool, bound }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs `work` on a control connection within the bound; `what` names it in the log.
    pub async fn run<T, E: std::fmt::Display>(
        &self,
        what: &str,
        work: impl for<'c> FnOnce(&'c mut AsyncPgConnection) -> BoxFuture<'c, Result<T, E>>,
    ) -> Result<T, ControlError> {
        let attempt = async {
            let mut conn = self.pool.get().await.map_err(|e| e.to_string())?;
            work(&mut conn).await.map_err(|e| e.to_string())
        };
        match tokio::time::timeout(self.bound, attempt).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(cause)) => {
                tracing::warn!(error = %cause, "admin: cannot {what}");
                Err(ControlError::Unreachable)
            }
            Err(_) => Err(ControlError::NoAnswer {
                ms: self.bound.as_millis(),
            }),
        }
    }
}
