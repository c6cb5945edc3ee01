//! Why a shard could not serve a statement, told apart the way callers must act on it: a
//! timeout, a write whose outcome is unknown, or the tenant guard saying the tenant is
//! moving or has moved.

use std::time::Duration;

use super::router::RouteError;
use crate::pg::pool::CheckoutError;

/// Why a shard could not serve. Every variant names the shard (except routing failures,
/// which happen before a shard is known).
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("shard {shard} is unavailable: {source}")]
    Unavailable {
        shard: String,
        #[source]
        source: CheckoutError,
    },
    #[error("the read replica of shard {shard} is not ready and its fallback is fail_readiness")]
    ReplicaUnavailable { shard: String },
    #[error("shard {shard} did not answer within {timeout:?}")]
    Timeout { shard: String, timeout: Duration },
    /// The server's circuit breaker is open: it recently stopped answering.
    #[error("shard {shard} is unavailable: its {role} stopped answering (circuit open)")]
    CircuitOpen { shard: String, role: &'static str },
    /// A write was sent but its answer never came: it may or may not have been applied.
    #[error("shard {shard} did not confirm the write; its outcome is unknown")]
    WriteOutcomeUnknown { shard: String },
    #[error("query on shard {shard} failed: {source}")]
    Query {
        shard: String,
        #[source]
        source: diesel::result::Error,
    },
    #[error("no shard is named {0:?}")]
    UnknownShard(String),
    #[error(transparent)]
    Route(#[from] RouteError),
    /// The shard's tenant guard refused a write: the tenant is in the final phase of a move.
    #[error("shard {shard} refused the write: the tenant is being moved")]
    TenantMoving { shard: String },
    /// The shard's tenant guard refused a write: the tenant now lives on `to`.
    #[error("shard {shard} refused the write: the tenant has moved to shard {to}")]
    TenantMoved { shard: String, to: String },
}

/// The `HINT` prefixes of the errors raised by the shards' tenant guard (see the shard
/// migration that creates `_autumn_guard_tenant_write`).
const HINT_MOVING: &str = "autumn:tenant-moving";
const HINT_DEPARTED: &str = "autumn:tenant-departed:";
/// The shard gave the key's slot away in a range move (the slot guard).
const HINT_SLOT_DEPARTED: &str = "autumn:slot-departed:";

impl ShardError {
    /// The shard involved, when one is known.
    pub fn shard(&self) -> Option<&str> {
        match self {
            ShardError::Unavailable { shard, .. }
            | ShardError::ReplicaUnavailable { shard }
            | ShardError::Timeout { shard, .. }
            | ShardError::CircuitOpen { shard, .. }
            | ShardError::WriteOutcomeUnknown { shard, .. }
            | ShardError::Query { shard, .. }
            | ShardError::TenantMoving { shard }
            | ShardError::TenantMoved { shard, .. } => Some(shard),
            ShardError::UnknownShard(_) | ShardError::Route(_) => None,
        }
    }

    /// Classifies a query error: a lost connection means the shard went away mid-request (and a
    /// write's outcome is then unknown); the tenant guard's refusals say the tenant is moving or
    /// has moved. `lost` says the connection died with the error (see
    /// [`ShardConn::lost_after`](super::access::ShardConn::lost_after)): a server shutting down
    /// answers the statement it cuts with an error of its own before it closes the connection.
    pub fn from_query(
        shard: &str,
        intent: Intent,
        source: diesel::result::Error,
        lost: bool,
    ) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        if let Error::DatabaseError(_, info) = &source
            && let Some(hint) = info.hint()
        {
            if hint == HINT_MOVING {
                return ShardError::TenantMoving {
                    shard: shard.to_owned(),
                };
            }
            if let Some(to) = hint
                .strip_prefix(HINT_DEPARTED)
                .or_else(|| hint.strip_prefix(HINT_SLOT_DEPARTED))
            {
                return ShardError::TenantMoved {
                    shard: shard.to_owned(),
                    to: to.to_owned(),
                };
            }
        }
        // diesel-async reports every failure below the protocol (a closed or reset
        // connection, sent or not) as `UnableToSendCommand`: nothing says whether the
        // statement reached the server, so a write's outcome is unknown.
        let connection_failed = lost
            || matches!(
                source,
                Error::DatabaseError(
                    DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
                    _,
                ) | Error::BrokenTransactionManager
            );
        match (connection_failed, intent) {
            (true, Intent::Write) => ShardError::WriteOutcomeUnknown {
                shard: shard.to_owned(),
            },
            (true, Intent::Read) => ShardError::Unavailable {
                shard: shard.to_owned(),
                source: deadpool::managed::PoolError::Closed,
            },
            (false, _) => ShardError::Query {
                shard: shard.to_owned(),
                source,
            },
        }
    }
}

/// Whether a statement may change data: a write cut off by its deadline has an unknown
/// outcome, which clients must be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    Read,
    Write,
}
