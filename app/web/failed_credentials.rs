//! The limit on guessing: every failed credential check (an unknown, revoked or malformed
//! API key, a forged session, a wrong admin token, a refused sign-in) counts against the
//! client's address, and an address with `[web] failed_credentials_per_minute` failures in
//! its current minute gets 429 with `Retry-After` for every credential it presents until
//! that minute is over, answered from memory: a refused guess costs no database query.
//!
//! Each web replica counts on its own, so behind N replicas an address gets up to N times
//! the limit; that still turns a guessing attack's millions of tries a minute into dozens.
//! While no failure is younger than a minute, a request with good credentials checks one
//! atomic (and the clock) and takes no lock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{Extensions, HeaderMap};

use super::client_address::{self, ClientAddress};
use crate::configuration::proxies::TrustedProxies;

/// How long failures count against an address.
pub const WINDOW: Duration = Duration::from_secs(60);

/// More addresses than this are not counted until some of their minutes end: the table's
/// memory stays bounded when an attack comes from very many addresses (which a per-address
/// limit cannot stop anyway).
const MAX_ADDRESSES: usize = 100_000;

/// One per process, shared by every door that checks credentials.
pub struct FailedCredentials {
    per_minute: u32,
    proxies: TrustedProxies,
    born: Instant,
    /// Milliseconds after `born` when the youngest failure's minute ends; 0 before any.
    quiet_after_ms: AtomicU64,
    by_client: Mutex<HashMap<ClientAddress, Minute>>,
}

/// An address's failures since `start`.
#[derive(Debug, Clone, Copy)]
struct Minute {
    start: Instant,
    failures: u32,
}

/// An address that is refused for now: retry after this many seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub client: ClientAddress,
    pub retry_after: u32,
    pub per_minute: u32,
}

impl FailedCredentials {
    /// `per_minute = 0` counts nothing and refuses nobody.
    pub fn new(per_minute: u32, proxies: TrustedProxies) -> Self {
        Self {
            per_minute,
            proxies,
            born: Instant::now(),
            quiet_after_ms: AtomicU64::new(0),
            by_client: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the request's client may present credentials now.
    pub fn check(&self, headers: &HeaderMap, extensions: &Extensions) -> Result<(), Refused> {
        let quiet_after = self.quiet_after_ms.load(Ordering::Relaxed);
        if quiet_after == 0 {
            return Ok(());
        }
        let now = Instant::now();
        if self.ms_since_born(now) >= quiet_after {
            return Ok(());
        }
        match client_address::client(&self.proxies, headers, extensions) {
            Some(client) => self.check_client(client, now),
            None => Ok(()),
        }
    }

    /// Counts a failed credential check against the request's client.
    pub fn failed(&self, headers: &HeaderMap, extensions: &Extensions) {
        if let Some(client) = client_address::client(&self.proxies, headers, extensions) {
            self.failed_client(client, Instant::now());
        }
    }

    fn check_client(&self, client: ClientAddress, now: Instant) -> Result<(), Refused> {
        let table = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
        match table.get(&client) {
            Some(minute) if minute.failures >= self.per_minute && !minute.over(now) => {
                let left = WINDOW.saturating_sub(now.saturating_duration_since(minute.start));
                Err(Refused {
                    client,
                    // Whole seconds, rounded up: retrying at once would be refused again.
                    retry_after: left.as_secs_f64().ceil().max(1.0) as u32,
                    per_minute: self.per_minute,
                })
            }
            _ => Ok(()),
        }
    }

    fn failed_client(&self, client: ClientAddress, now: Instant) {
        if self.per_minute == 0 {
            return;
        }
        metrics::counter!("failed_credentials_total").increment(1);
        let mut table = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
        if !table.contains_key(&client) && table.len() >= MAX_ADDRESSES {
            table.retain(|_, minute| !minute.over(now));
            if table.len() >= MAX_ADDRESSES {
                tracing::warn!(%client, "failed credentials: too many addresses counted; not counting this one");
                return;
            }
        }
        let minute = table.entry(client).or_insert(Minute::starting(now));
        if minute.over(now) {
            *minute = Minute::starting(now);
        }
        minute.failures += 1;
        if minute.failures == self.per_minute {
            tracing::warn!(
                %client,
                per_minute = self.per_minute,
                "failed credentials: this address is refused for the rest of its minute"
            );
        }
        // Addresses whose minute has ended are dropped now and then, so that the table
        // holds about the addresses that matter now.
        if table.len().is_multiple_of(1024) {
            table.retain(|_, minute| !minute.over(now));
        }
        let quiet_after = self.ms_since_born(now + WINDOW).max(1);
        self.quiet_after_ms
            .fetch_max(quiet_after, Ordering::Relaxed);
    }

    fn ms_since_born(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.born).as_millis() as u64
    }
}

impl Minute {
    fn starting(now: Instant) -> Self {
        Self {
            start: now,
            failures: 0,
        }
    }

    fn over(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.start) >= WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(address: &str) -> ClientAddress {
        ClientAddress::of(address.parse().unwrap())
    }

    #[test]
    fn an_address_is_refused_after_its_limit_until_its_minute_ends() {
        let limit = FailedCredentials::new(3, TrustedProxies::none());
        let (me, other, start) = (at("192.0.2.1"), at("192.0.2.2"), Instant::now());
        for _ in 0..3 {
            assert_eq!(limit.check_client(me, start), Ok(()));
            limit.failed_client(me, start);
        }
        let refused = limit
            .check_client(me, start + Duration::from_millis(100))
            .unwrap_err();
        assert_eq!(refused.retry_after, 60);
        assert_eq!(
            limit
                .check_client(me, start + Duration::from_millis(59_500))
                .unwrap_err()
                .retry_after,
            1
        );
        assert_eq!(limit.check_client(other, start), Ok(()), "others are not");
        assert_eq!(limit.check_client(me, start + WINDOW), Ok(()));
        limit.failed_client(me, start + WINDOW);
        assert_eq!(
            limit.check_client(me, start + WINDOW),
            Ok(()),
            "a new minute starts from nothing"
        );
    }

    #[test]
    fn nothing_is_counted_with_a_limit_of_zero_and_the_fast_path_knows_when_all_is_quiet() {
        let off = FailedCredentials::new(0, TrustedProxies::none());
        off.failed_client(at("192.0.2.1"), Instant::now());
        assert_eq!(off.quiet_after_ms.load(Ordering::Relaxed), 0);
        let limit = FailedCredentials::new(5, TrustedProxies::none());
        let start = limit.born + Duration::from_secs(1);
        limit.failed_client(at("192.0.2.1"), start);
        assert_eq!(limit.quiet_after_ms.load(Ordering::Relaxed), 61_000);
        limit.failed_client(at("192.0.2.2"), start - Duration::from_millis(500));
        assert_eq!(
            limit.quiet_after_ms.load(Ordering::Relaxed),
            61_000,
            "the youngest failure decides"
        );
    }
}
