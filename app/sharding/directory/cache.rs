//! The directory router's per-process cache: what the directory said about a key, and when.
//!
//! Written here rather than taken from a caching crate because its rules are the router's
//! own: expired entries are kept, since they are what serves while the control database is
//! unreachable, and an answer read before an invalidation must never be stored after it
//! (the epoch below), or a re-pin could be undone by a slow lookup.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use quanta::Instant;

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

/// A cache lookup's outcome.
#[derive(Debug)]
pub enum Cached {
    Fresh(Decision),
    /// Older than the TTL: ask the directory again, but this may still serve if it cannot
    /// be asked.
    Expired(Decision),
    Absent,
}

struct Entry {
    decision: Decision,
    fetched: Instant,
}

type Map = HashMap<Box<str>, Entry, foldhash::fast::RandomState>;

pub struct DirectoryCache {
    map: RwLock<Map>,
    ttl: Duration,
    /// Bumped, under the write lock, by every invalidation.
    epoch: AtomicU64,
}

impl DirectoryCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            map: RwLock::new(Map::default()),
            ttl,
            epoch: AtomicU64::new(0),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn get(&self, key: &str, now: Instant) -> Cached {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        match map.get(key) {
            Some(e) if now.saturating_duration_since(e.fetched) < self.ttl => {
                Cached::Fresh(e.decision.clone())
            }
            Some(e) => Cached::Expired(e.decision.clone()),
            None => Cached::Absent,
        }
    }

    /// Read before asking the directory; hand it back to [`Self::insert`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Stores what the directory answered, unless an invalidation arrived after `epoch`
    /// was read: the answer may predate the change the invalidation announced. Returns
    /// whether it was stored.
    pub fn insert(&self, key: &str, decision: Decision, fetched: Instant, epoch: u64) -> bool {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if self.epoch.load(Ordering::Acquire) != epoch {
            return false;
        }
        if map.len() >= CAPACITY && !map.contains_key(key) {
            make_room(&mut map, fetched, self.ttl);
        }
        map.insert(key.into(), Entry { decision, fetched });
        true
    }

    /// Forgets one key (its directory row changed). Returns whether it was cached.
    pub fn evict(&self, key: &str) -> bool {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        self.epoch.fetch_add(1, Ordering::AcqRel);
        map.remove(key).is_some()
    }

    /// Forgets everything (changes may have been missed). Returns how many entries went.
    pub fn flush(&self) -> usize {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let n = map.len();
        map.clear();
        n
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drops expired entries, then, if that was not enough, an arbitrary tenth (hash order is
/// random): a cache only ever costs a lookup by forgetting.
fn make_room(map: &mut Map, now: Instant, ttl: Duration) {
    map.retain(|_, e| now.saturating_duration_since(e.fetched) < ttl);
    if map.len() >= CAPACITY {
        let victims: Vec<Box<str>> = map.keys().take(CAPACITY / 10).cloned().collect();
        for key in victims {
            map.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::router::RouteVia;
    use crate::sharding::slot::ShardKey;

    fn routed() -> Decision {
        Decision::Routed(Route {
            slot: ShardKey::Str("t").slot(),
            shard: crate::sharding::shard_set::ShardId::from_index(0),
            via: RouteVia::Hash,
        })
    }

    #[test]
    fn an_answer_read_before_an_eviction_is_not_stored_after_it() {
        let cache = DirectoryCache::new(Duration::from_secs(30));
        let epoch = cache.epoch();
        cache.evict("t");
        assert!(!cache.insert("t", routed(), Instant::now(), epoch));
        assert!(matches!(cache.get("t", Instant::now()), Cached::Absent));
        assert!(cache.insert("t", routed(), Instant::now(), cache.epoch()));
        assert!(matches!(cache.get("t", Instant::now()), Cached::Fresh(_)));
    }

    #[test]
    fn entries_past_their_ttl_are_reported_expired_but_kept() {
        let cache = DirectoryCache::new(Duration::from_millis(10));
        let then = Instant::now();
        cache.insert("t", routed(), then, cache.epoch());
        let later = then + Duration::from_millis(11);
        assert!(matches!(cache.get("t", later), Cached::Expired(_)));
        assert_eq!(cache.flush(), 1);
        assert!(matches!(cache.get("t", later), Cached::Absent));
    }

    #[test]
    fn the_cache_never_grows_past_its_capacity() {
        let cache = DirectoryCache::new(Duration::from_secs(30));
        let now = Instant::now();
        for i in 0..CAPACITY + 5 {
            cache.insert(&format!("tenant-{i}"), routed(), now, cache.epoch());
        }
        assert!(cache.len() <= CAPACITY);
        assert!(matches!(
            cache.get(&format!("tenant-{}", CAPACITY + 4), now),
            Cached::Fresh(_)
        ));
    }
}
