//! Checking a presented API key: a per-process cache of what the key store said about each
//! key digest (a key, or the absence of one), kept honest by the key table's notifications
//! through the control listener, in front of lookups on the control database.
//!
//! The rules are the directory's: a revocation reaches every process at once (Postgres
//! delivers the NOTIFY at commit), and everything is flushed when the listener reconnects.
//! While the control database is unreachable, cached answers keep serving past their TTL
//! (a key that worked keeps working, a key nobody knew stays unknown) and a key with
//! nothing cached gets "unavailable", never a pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use quanta::Instant;

use super::api_key::{ApiKey, KeyDigest};
use super::keys::{self, CHANNEL, Credential};
use crate::pg::answer_cache::{AnswerCache, Cached};
use crate::pg::control::{ControlLookups, LookupError};
use crate::pg::listener::Invalidated;

/// Entries kept at most (keys, and digests nobody has a key for).
pub const CAPACITY: usize = 100_000;
/// How often a key's `last_used_at` is written, at most, by one process.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// A key the store knows, with when this process last noted its use.
pub struct KnownKey {
    pub credential: Credential,
    /// Seconds since the store started, of the last `last_used_at` write (0: never).
    touched: AtomicU64,
}

/// What a key check found.
#[derive(Clone)]
pub enum KeyCheck {
    Valid(Arc<KnownKey>),
    Revoked,
    Unknown,
    /// Nothing is cached for this key and the control database cannot be asked.
    Unavailable,
}

pub struct KeyStore {
    control: ControlLookups,
    cache: AnswerCache<KeyDigest, Option<Arc<KnownKey>>>,
    listener_connected: AtomicBool,
    /// Whether the last lookup failed, so failures are logged once, not per request.
    lookups_failing: AtomicBool,
    born: Instant,
}

impl KeyStore {
    pub fn new(control: ControlLookups, ttl: Duration) -> Self {
        Self {
            control,
            cache: AnswerCache::new(ttl, CAPACITY),
            listener_connected: AtomicBool::new(false),
            lookups_failing: AtomicBool::new(false),
            born: Instant::now(),
        }
    }

    /// What the store says about `key` now.
    pub async fn check(self: &Arc<Self>, key: &ApiKey) -> KeyCheck {
        self.check_digest(&key.digest()).await
    }

    /// What the store says about the key with this digest (a session names its key so).
    pub async fn check_digest(self: &Arc<Self>, digest: &KeyDigest) -> KeyCheck {
        let stale = match self.cache.get(digest, Instant::now()) {
            Cached::Fresh(answer) => return self.answer(answer),
            Cached::Expired(answer) => Some(answer),
            Cached::Absent => None,
        };
        let epoch = self.cache.epoch();
        let fetched = Instant::now();
        // Each one a statement on the control database: what the failed credential limit
        // spares it.
        metrics::counter!("api_key_lookups_total").increment(1);
        match self
            .control
            .run(async |c| keys::lookup(c, digest).await)
            .await
        {
            Ok(found) => {
                if self.lookups_failing.swap(false, Ordering::AcqRel) {
                    tracing::info!("API key lookups work again");
                }
                let answer = found.map(|credential| {
                    Arc::new(KnownKey {
                        credential,
                        touched: AtomicU64::new(0),
                    })
                });
                self.cache.insert(*digest, answer.clone(), fetched, epoch);
                self.answer(answer)
            }
            Err(cause) => {
                if !self.lookups_failing.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        %cause,
                        "API key lookups failing: cached keys keep working past their TTL, \
                         keys with nothing cached get 503"
                    );
                }
                match stale {
                    Some(answer) => self.answer(answer),
                    None => KeyCheck::Unavailable,
                }
            }
        }
    }

    fn answer(self: &Arc<Self>, answer: Option<Arc<KnownKey>>) -> KeyCheck {
        match answer {
            Some(known) if known.credential.revoked => KeyCheck::Revoked,
            Some(known) => {
                self.note_use(&known);
                KeyCheck::Valid(known)
            }
            None => KeyCheck::Unknown,
        }
    }

    /// Writes the key's `last_used_at`, at most once every [`TOUCH_EVERY`] per process, in
    /// the background: the request does not wait for it, and a failure costs only
    /// freshness of that column.
    fn note_use(self: &Arc<Self>, known: &Arc<KnownKey>) {
        let now = Instant::now()
            .saturating_duration_since(self.born)
            .as_secs()
            + 1;
        let last = known.touched.load(Ordering::Relaxed);
        if last != 0 && now < last + TOUCH_EVERY.as_secs() {
            return;
        }
        if known
            .touched
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let (store, id) = (Arc::clone(self), known.credential.id);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = store.control.run(async |c| keys::touch(c, id).await).await {
                    tracing::debug!(error = %e, key_id = id, "cannot note an API key's use");
                }
            });
        }
    }

    /// Ends every session signed in with the key whose digest this is (sign-out): its
    /// generation moves on in the control database, whose notification drops the key from
    /// every process's cache; this process drops it at once. Fails when the control
    /// database cannot be reached, and then nothing has ended.
    pub async fn end_sessions(&self, digest: &KeyDigest) -> Result<(), LookupError> {
        self.control
            .run(async |c| keys::end_sessions(c, digest).await)
            .await?;
        self.cache.evict(digest);
        Ok(())
    }

    /// Records what the control database says of a key, obtained elsewhere (a benchmark),
    /// as if it had just been looked up.
    pub fn remember(&self, digest: KeyDigest, credential: Option<Credential>) {
        let answer = credential.map(|credential| {
            Arc::new(KnownKey {
                credential,
                touched: AtomicU64::new(0),
            })
        });
        self.cache
            .insert(digest, answer, Instant::now(), self.cache.epoch());
    }

    pub fn listener_connected(&self) -> bool {
        self.listener_connected.load(Ordering::Acquire)
    }

    pub fn cached(&self) -> usize {
        self.cache.len()
    }
}

impl Invalidated for KeyStore {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn evict(&self, key: &str) {
        match KeyDigest::from_hex(key) {
            Some(digest) => {
                self.cache.evict(&digest);
            }
            // Not a digest this build writes: forget everything rather than guess.
            None => {
                self.cache.flush();
            }
        }
    }

    fn flush(&self) {
        self.cache.flush();
    }

    fn set_listener_connected(&self, connected: bool) {
        self.listener_connected.store(connected, Ordering::Release);
    }
}
