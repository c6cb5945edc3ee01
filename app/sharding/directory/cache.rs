//! What the directory router caches per process: what the directory said about a key
//! (an [`AnswerCache`] keeps it, with the rules every control-database answer follows).

use std::sync::Arc;

use crate::pg::answer_cache::AnswerCache;
use crate::sharding::router::{Route, RouteError};

/// Entries kept at most. Every tenant seen is cached (misses too), so without a bound a
/// client inventing tenant ids could grow the process without limit.
pub const CAPACITY: usize = 100_000;

/// What the directory decided for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Where the key's directory row places it.
    Routed(Route),
    /// The key has no row: config pins and the live slot map decide, at each request (so a
    /// slot map change applies at once, not when this entry expires).
    NoRow,
    /// The key's row names a shard that is not configured here.
    UnknownShard(Arc<str>),
}

impl Decision {
    /// The route, given what pins and the slot map say for a key without a row.
    pub fn to_result(&self, without_row: impl FnOnce() -> Route) -> Result<Route, RouteError> {
        match self {
            Decision::Routed(route) => Ok(*route),
            Decision::NoRow => Ok(without_row()),
            Decision::UnknownShard(shard) => Err(RouteError::UnknownShard {
                shard: shard.to_string(),
            }),
        }
    }
}

/// Tenant key → what its directory row says.
pub type DirectoryCache = AnswerCache<Box<str>, Decision>;
