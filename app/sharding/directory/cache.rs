//! What the directory router caches per process: what the directory said about a key
//! (an [`AnswerCache`] keeps it, with the rules every control-database answer follows).

use std::sync::Arc;

use crate::sharding::answer_cache::AnswerCache;
use crate::sharding::router::{Route, RouteError};

/// Entries kept at most. Every tenant seen is cached (misses too), so without a bound a
/// client inventing tenant ids could grow the process without limit.
pub const CAPACITY: usize = 100_000;

/// What the directory decided for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Where the key goes: by its directory row, or (no row) by config pin or hash.
    Routed(Route),
    /// The key's row names a shard that is not configured here.
    UnknownShard(Arc<str>),
}

impl Decision {
    pub fn to_result(&self) -> Result<Route, RouteError> {
        match self {
            Decision::Routed(route) => Ok(*route),
            Decision::UnknownShard(shard) => Err(RouteError::UnknownShard {
                shard: shard.to_string(),
            }),
        }
    }
}

/// Tenant key → what its directory row says.
pub type DirectoryCache = AnswerCache<Box<str>, Decision>;
