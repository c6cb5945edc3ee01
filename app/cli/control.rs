//! One control database connection for a one-shot command, bounded by the connect timeout,
//! and why it could not be had.

use std::time::Duration;

use crate::pg::pool::{CheckoutError, PgConn, PoolBuildError};
use crate::sharding::Topology;
use crate::sharding::row_security::control_pool;

/// Why a command could not use the control database; printed after what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum ControlUnreachable {
    #[error(transparent)]
    Pool(#[from] PoolBuildError),
    #[error("no connection within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Checkout(#[from] CheckoutError),
    #[error("{0}")]
    Query(#[from] diesel::result::Error),
}

/// A control connection for one command, within the connect timeout (and a second more).
pub async fn connect(topology: &Topology) -> Result<PgConn, ControlUnreachable> {
    let pool = control_pool(topology, 1)?;
    let bound = topology.connect_timeout + Duration::from_secs(1);
    Ok(tokio::time::timeout(bound, pool.get())
        .await
        .map_err(|_| ControlUnreachable::Timeout(bound))??)
}
