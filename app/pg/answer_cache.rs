//! A per-process cache of answers read from the control database (a tenant's directory row,
//! an API key), kept honest by notifications: the directory and the key store each keep
//! one.
//!
//! Written here rather than taken from a caching crate because its rules are the routing
//! layer's own: expired entries are kept, since they are what serves while the control
//! database is unreachable; an answer read before an invalidation must never be stored
//! after it (the epoch below), or a re-pin or a revocation could be undone by a slow
//! lookup; and when the cache is full, entries nobody has asked for since they were stored
//! go before those in use, so a flood of invented keys cannot push out the ones real
//! clients keep asking for.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use quanta::Instant;

/// A lookup's outcome.
#[derive(Debug)]
pub enum Cached<V> {
    Fresh(V),
    /// Older than the TTL: ask again, but this may still serve if nobody can be asked.
    Expired(V),
    Absent,
}

struct Entry<V> {
    value: V,
    fetched: Instant,
    /// Asked for since it was stored, or since the last time room was made.
    used: AtomicBool,
}

type Map<K, V> = HashMap<K, Entry<V>, foldhash::fast::RandomState>;

pub struct AnswerCache<K, V> {
    map: RwLock<Map<K, V>>,
    ttl: Duration,
    capacity: usize,
    /// Bumped, under the write lock, by every invalidation.
    epoch: AtomicU64,
}

impl<K: Hash + Eq, V: Clone> AnswerCache<K, V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            map: RwLock::new(Map::default()),
            ttl,
            capacity,
            epoch: AtomicU64::new(0),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn get<Q>(&self, key: &Q, now: Instant) -> Cached<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        let Some(e) = map.get(key) else {
            return Cached::Absent;
        };
        // Written only when it changes: a hot entry's line is not bounced between cores.
        if !e.used.load(Ordering::Relaxed) {
            e.used.store(true, Ordering::Relaxed);
        }
        if now.saturating_duration_since(e.fetched) < self.ttl {
            Cached::Fresh(e.value.clone())
        } else {
            Cached::Expired(e.value.clone())
        }
    }

    /// Read before asking the control database; hand it back to [`Self::insert`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Stores an answer, unless an invalidation arrived after `epoch` was read: the answer
    /// may predate the change the invalidation announced. Returns whether it was stored.
    pub fn insert(&self, key: K, value: V, fetched: Instant, epoch: u64) -> bool {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        if self.epoch.load(Ordering::Acquire) != epoch {
            return false;
        }
        if map.len() >= self.capacity && !map.contains_key(&key) {
            make_room(&mut map, fetched, self.ttl, self.capacity);
        }
        let entry = Entry {
            value,
            fetched,
            used: AtomicBool::new(false),
        };
        map.insert(key, entry);
        true
    }

    /// Forgets one key (its answer changed). Returns whether it was cached.
    pub fn evict<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
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

/// Drops expired entries; then, if that was not enough, those nobody asked for since the
/// last time room was made; then, if every entry is in use, an arbitrary tenth (hash order
/// is random). A cache only ever costs a lookup by forgetting. The survivors start unused.
fn make_room<K: Hash + Eq, V>(map: &mut Map<K, V>, now: Instant, ttl: Duration, capacity: usize) {
    map.retain(|_, e| now.saturating_duration_since(e.fetched) < ttl);
    if map.len() >= capacity {
        map.retain(|_, e| e.used.load(Ordering::Relaxed));
    }
    if map.len() >= capacity {
        let mut dropped = 0;
        map.retain(|_, _| {
            dropped += 1;
            dropped > capacity / 10
        });
    }
    for e in map.values() {
        e.used.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(ttl: Duration, capacity: usize) -> AnswerCache<Box<str>, u32> {
        AnswerCache::new(ttl, capacity)
    }

    #[test]
    fn an_answer_read_before_an_eviction_is_not_stored_after_it() {
        let cache = cache(Duration::from_secs(30), 10);
        let epoch = cache.epoch();
        cache.evict("t");
        assert!(!cache.insert("t".into(), 1, Instant::now(), epoch));
        assert!(matches!(cache.get("t", Instant::now()), Cached::Absent));
        assert!(cache.insert("t".into(), 1, Instant::now(), cache.epoch()));
        assert!(matches!(cache.get("t", Instant::now()), Cached::Fresh(1)));
    }

    #[test]
    fn entries_past_their_ttl_are_reported_expired_but_kept() {
        let cache = cache(Duration::from_millis(10), 10);
        let then = Instant::now();
        cache.insert("t".into(), 1, then, cache.epoch());
        let later = then + Duration::from_millis(11);
        assert!(matches!(cache.get("t", later), Cached::Expired(1)));
        assert_eq!(cache.flush(), 1);
        assert!(matches!(cache.get("t", later), Cached::Absent));
    }

    #[test]
    fn the_cache_never_grows_past_its_capacity() {
        let capacity = 1000;
        let cache = cache(Duration::from_secs(30), capacity);
        let now = Instant::now();
        for i in 0..capacity + 5 {
            cache.insert(format!("tenant-{i}").into(), 1, now, cache.epoch());
        }
        assert!(cache.len() <= capacity);
        assert!(matches!(
            cache.get(format!("tenant-{}", capacity + 4).as_str(), now),
            Cached::Fresh(1)
        ));
    }

    #[test]
    fn a_flood_of_keys_nobody_asks_for_again_does_not_push_out_the_keys_in_use() {
        let capacity = 1000;
        let cache = cache(Duration::from_secs(30), capacity);
        let now = Instant::now();
        let real: Vec<String> = (0..100).map(|i| format!("real-{i}")).collect();
        for key in &real {
            cache.insert(key.as_str().into(), 1, now, cache.epoch());
        }
        for round in 0..40 {
            // The real keys are asked for again and again (at least once between two
            // times room is made); invented ones once each.
            for key in &real {
                assert!(
                    matches!(cache.get(key.as_str(), now), Cached::Fresh(1)),
                    "{key} was pushed out in round {round}"
                );
            }
            for i in 0..capacity / 2 {
                let invented = format!("invented-{round}-{i}");
                cache.insert(invented.into(), 2, now, cache.epoch());
            }
        }
        assert!(cache.len() <= capacity);
    }
}
