//! Read-your-own-writes as a client keeps it: each tenant's latest consistency token, sent
//! back on every read, and the reads that came back stale anyway (with `--verify`), plus
//! where the service says each read was served (`X-Read-From`).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::header::HeaderValue;
use serde::Serialize;

/// A token as the service writes it: `1:<shard>:<epoch>:<hex position>`; opaque, except
/// that a client must keep the later of two.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    shard: String,
    epoch: u64,
    lsn: u64,
    value: HeaderValue,
}

impl Token {
    fn parse(value: &HeaderValue) -> Option<Self> {
        let text = value.to_str().ok()?;
        let mut parts = text.split(':');
        let (Some("1"), Some(shard), Some(epoch), Some(lsn), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        Some(Self {
            shard: shard.to_owned(),
            epoch: epoch.parse().ok()?,
            lsn: u64::from_str_radix(lsn, 16).ok()?,
            value: value.clone(),
        })
    }

    /// Whether `self` stands for at least what `other` does: a later position on the same
    /// shard, or a later arrival epoch (the tenant moved between them).
    fn covers(&self, other: &Token) -> bool {
        if self.shard == other.shard {
            self.lsn >= other.lsn
        } else {
            // On a tie the newer answer wins: a write that followed its tenant to a new
            // shard before its web replica heard of the move carries the old epoch.
            self.epoch > other.epoch
        }
    }
}

/// Where the service said reads were served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadsFrom {
    pub replica: u64,
    pub primary: u64,
}

/// One read that did not show a write the client had been told was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleRead {
    pub tenant: String,
    pub id: String,
    /// The answer's `X-Read-From`.
    pub read_from: String,
}

/// Every tenant's latest token and what reads did.
pub struct Consistency {
    /// Whether reads carry the token at all (`--no-tokens` turns it off).
    send: bool,
    latest: Vec<Mutex<Option<Token>>>,
    /// Ids a delete was sent for (whatever its answer): a later 404 for them is no stale read.
    deleting: Vec<Mutex<HashSet<String>>>,
    replica: AtomicU64,
    primary: AtomicU64,
    stale: Mutex<Vec<StaleRead>>,
}

impl Consistency {
    pub fn new(tenants: usize, send: bool) -> Self {
        Self {
            send,
            latest: (0..tenants).map(|_| Mutex::new(None)).collect(),
            deleting: (0..tenants).map(|_| Mutex::new(HashSet::new())).collect(),
            replica: AtomicU64::new(0),
            primary: AtomicU64::new(0),
            stale: Mutex::new(Vec::new()),
        }
    }

    /// The token to send with `tenant`'s next read.
    pub fn token(&self, tenant: usize) -> Option<HeaderValue> {
        if !self.send {
            return None;
        }
        let latest = self.latest[tenant]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        latest.as_ref().map(|t| t.value.clone())
    }

    /// Keeps `value` if it stands for more than the token kept so far. Answers arrive out of
    /// order: a token is never replaced by one it covers.
    pub fn wrote(&self, tenant: usize, value: &HeaderValue) {
        let Some(token) = Token::parse(value) else {
            return;
        };
        let mut latest = self.latest[tenant]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match latest.as_ref() {
            Some(kept) if kept.covers(&token) && kept != &token => {}
            _ => *latest = Some(token),
        }
    }

    /// Counts a read by the server its `X-Read-From` names.
    pub fn read_from(&self, value: &str) {
        let counter = if value.starts_with("replica") {
            &self.replica
        } else {
            &self.primary
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn deleting(&self, tenant: usize, id: &str) {
        self.deleting[tenant]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_owned());
    }

    /// A read of `id`, known from an acknowledged write and sent with the token, answered
    /// 404: stale, unless a delete of it was sent.
    pub fn not_found(&self, tenant: usize, name: &str, id: &str, read_from: &str) {
        let deleted = self.deleting[tenant]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id);
        if !deleted {
            self.stale
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(StaleRead {
                    tenant: name.to_owned(),
                    id: id.to_owned(),
                    read_from: read_from.to_owned(),
                });
        }
    }

    pub fn reads_from(&self) -> ReadsFrom {
        ReadsFrom {
            replica: self.replica.load(Ordering::Relaxed),
            primary: self.primary.load(Ordering::Relaxed),
        }
    }

    pub fn stale_reads(&self) -> Vec<StaleRead> {
        self.stale.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> HeaderValue {
        HeaderValue::from_str(text).unwrap()
    }

    #[test]
    fn a_tenant_keeps_the_token_that_covers_the_others_whatever_order_they_arrive_in() {
        let c = Consistency::new(1, true);
        c.wrote(0, &value("1:shard0:0:20"));
        c.wrote(0, &value("1:shard0:0:10"));
        assert_eq!(c.token(0), Some(value("1:shard0:0:20")));
        // After a move: the later epoch wins, then positions on the new shard.
        c.wrote(0, &value("1:shard1:1:5"));
        c.wrote(0, &value("1:shard0:0:30"));
        assert_eq!(c.token(0), Some(value("1:shard1:1:5")));
        c.wrote(0, &value("garbage"));
        assert_eq!(c.token(0), Some(value("1:shard1:1:5")));
    }

    #[test]
    fn a_404_for_an_id_a_delete_was_sent_for_is_no_stale_read() {
        let c = Consistency::new(1, true);
        c.deleting(0, "a");
        c.not_found(0, "t", "a", "replica; why=token");
        c.not_found(0, "t", "b", "replica; why=token");
        let stale = c.stale_reads();
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].id, "b");
    }
}
