//! Read-your-own-writes across replicas and moves: the consistency token a write answers
//! with, and where a tenant read goes given the token it brings back.
//!
//! A token names the shard a write committed on, the arrival epoch the writing process
//! knew (see [`super::arrivals`]) and the shard's WAL position after the commit. A read
//! bringing it may use the shard's replica once the replica has replayed that position
//! (and the shard's latest arrival). A token minted on another shard, before the tenant
//! moved here, is honoured by the arrival: the move recorded, before routing changed, a
//! position on this shard that contains every row it copied, so every write the token
//! stands for. Anything a token cannot vouch for (a shard not configured, an epoch newer
//! than this process has heard of) sends the read to the primary: a token is never a
//! reason to answer stale.

use std::fmt;
use std::time::Duration;

use super::shard_name::ShardName;

/// What a client sends back in `X-Consistency-Token`: opaque to it, and exactly
/// `1:<shard>:<epoch>:<WAL position in hex>` (see [`TOKEN_PATTERN`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyToken {
    pub shard: ShardName,
    pub epoch: u64,
    pub lsn: u64,
}

/// The token's grammar, for the API document (the parser accepts exactly this).
pub const TOKEN_PATTERN: &str = "^1:[A-Za-z0-9_.-]{1,63}:[0-9]{1,18}:[0-9A-F]{1,16}$";

/// Why a token could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("is not a consistency token this service issued (send back the value a write answered)")]
pub struct NotAToken;

impl ConsistencyToken {
    pub fn parse(raw: &str) -> Result<Self, NotAToken> {
        let mut parts = raw.split(':');
        let (Some("1"), Some(shard), Some(epoch), Some(lsn), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(NotAToken);
        };
        let digits = |s: &str, max: usize, ok: fn(u8) -> bool| {
            !s.is_empty() && s.len() <= max && s.bytes().all(ok)
        };
        if !digits(epoch, 18, |b| b.is_ascii_digit())
            || !digits(lsn, 16, |b| {
                b.is_ascii_digit() || (b'A'..=b'F').contains(&b)
            })
        {
            return Err(NotAToken);
        }
        Ok(Self {
            shard: ShardName::parse(shard).map_err(|_| NotAToken)?,
            epoch: epoch.parse().map_err(|_| NotAToken)?,
            lsn: u64::from_str_radix(lsn, 16).map_err(|_| NotAToken)?,
        })
    }
}

impl fmt::Display for ConsistencyToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1:{}:{}:{:X}", self.shard, self.epoch, self.lsn)
    }
}

/// Which server served a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Replica,
    Primary,
}

/// Why a read went where it went (`X-Read-From: <server>; why=<why>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Replica: it had replayed the read's token. Primary: it had not, in time, or the
    /// token could not vouch for this shard.
    Token,
    /// Replica: no token, and the replica is within `max_replica_lag_ms` (the answer may
    /// be that stale). Primary: the replica is further behind, or has not replayed the
    /// shard's latest arrival.
    Lag,
    /// Primary: no token, and `reads_without_token = "primary"`.
    NoToken,
    /// Primary: the shard has no replica, or it is not ready.
    NoReplica,
}

/// Where a tenant read went and why, as `X-Read-From` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFrom {
    pub server: Server,
    pub why: Why,
    /// For a replica read without a token: the replica's lag at its last poll.
    pub lag: Option<Duration>,
}

impl ReadFrom {
    pub fn primary(why: Why) -> Self {
        Self {
            server: Server::Primary,
            why,
            lag: None,
        }
    }

    /// The `X-Read-From` value, e.g. `replica; why=lag; lag_ms=3` or `primary; why=token`.
    pub fn header_value(&self) -> String {
        let server = match self.server {
            Server::Replica => "replica",
            Server::Primary => "primary",
        };
        let why = match self.why {
            Why::Token => "token",
            Why::Lag => "lag",
            Why::NoToken => "no_token",
            Why::NoReplica => "no_replica",
        };
        match self.lag {
            Some(lag) => format!("{server}; why={why}; lag_ms={}", lag.as_millis()),
            None => format!("{server}; why={why}"),
        }
    }
}

/// What a read's replica must have replayed, decided from its token before checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// No token: the shard's floor, within the lag bound.
    Floor(u64),
    /// A token this shard can honour: this position (the floor included).
    Token(u64),
    /// A token nothing here can vouch for: the primary.
    Primary,
}

/// What a read bringing `token` (or none) needs on `shard`, whose replicas must have
/// replayed `floor`, in a process that has heard of arrivals up to `known_epoch`.
pub fn need(
    token: Option<&ConsistencyToken>,
    shard: &ShardName,
    floor: u64,
    known_epoch: u64,
) -> Need {
    let Some(token) = token else {
        return Need::Floor(floor);
    };
    if token.epoch > known_epoch {
        // Minted after a move this process has not heard of: its route may be stale.
        return Need::Primary;
    }
    if token.shard == *shard {
        Need::Token(token.lsn.max(floor))
    } else if floor > 0 {
        // Minted before the tenant moved here: the arrival contains every copied write.
        Need::Token(floor)
    } else {
        // Nothing ever arrived here, so the token is not from an earlier placement.
        Need::Primary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(name: &str) -> ShardName {
        ShardName::parse(name).unwrap()
    }

    #[test]
    fn a_token_reads_back_as_it_was_written() {
        let t = ConsistencyToken {
            shard: shard("shard0"),
            epoch: 7,
            lsn: 0x16B_3748,
        };
        assert_eq!(t.to_string(), "1:shard0:7:16B3748");
        assert_eq!(ConsistencyToken::parse(&t.to_string()), Ok(t));
    }

    #[test]
    fn anything_but_the_exact_grammar_is_not_a_token() {
        for bad in [
            "",
            "1:shard0:7",
            "2:shard0:7:1A",
            "1:shard0:7:1a",
            "1:shard0:-7:1A",
            "1::7:1A",
            "1:shard 0:7:1A",
            "1:shard0:7:1A:",
            "1:shard0:7:00000000000000001",
            "1:shard0:1234567890123456789:1A",
        ] {
            assert_eq!(ConsistencyToken::parse(bad), Err(NotAToken), "{bad:?}");
        }
        for good in [
            "1:shard0:0:0",
            "1:a.b-c_d:123456789012345678:FFFFFFFFFFFFFFFF",
        ] {
            assert!(ConsistencyToken::parse(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn a_read_without_a_token_needs_the_shards_floor() {
        assert_eq!(need(None, &shard("s0"), 40, 3), Need::Floor(40));
    }

    #[test]
    fn a_token_from_this_shard_needs_its_position_or_the_floor_if_that_is_later() {
        let t = |lsn| ConsistencyToken {
            shard: shard("s0"),
            epoch: 3,
            lsn,
        };
        assert_eq!(need(Some(&t(90)), &shard("s0"), 40, 3), Need::Token(90));
        // Minted on this shard before the tenant left and came back: the arrival decides.
        assert_eq!(need(Some(&t(10)), &shard("s0"), 40, 3), Need::Token(40));
    }

    #[test]
    fn a_token_from_the_shard_a_tenant_left_needs_the_arrival_here() {
        let t = ConsistencyToken {
            shard: shard("s1"),
            epoch: 2,
            lsn: 900,
        };
        assert_eq!(need(Some(&t), &shard("s0"), 40, 3), Need::Token(40));
        // Nothing ever arrived here: the token cannot be from an earlier placement.
        assert_eq!(need(Some(&t), &shard("s0"), 0, 3), Need::Primary);
    }

    #[test]
    fn a_token_newer_than_every_arrival_this_process_knows_reads_the_primary() {
        let t = ConsistencyToken {
            shard: shard("s0"),
            epoch: 9,
            lsn: 90,
        };
        assert_eq!(need(Some(&t), &shard("s0"), 40, 3), Need::Primary);
    }
}
