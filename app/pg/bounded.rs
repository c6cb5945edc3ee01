//! One piece of work on a server (a checkout and its statements) under one time bound, and
//! why it did not finish.

use std::time::Duration;

use super::pool::CheckoutError;

/// Why bounded work on a server did not finish; for logs and operators' messages.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    Checkout(#[from] CheckoutError),
    #[error("{0}")]
    Query(#[from] diesel::result::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Runs `work`, giving up after `limit`.
pub async fn within<T>(
    limit: Duration,
    work: impl Future<Output = Result<T, ServerError>>,
) -> Result<T, ServerError> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or(Err(ServerError::Timeout(limit)))
}
