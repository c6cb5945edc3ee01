//! The key→slot hash: a permanent contract shared by every process that routes.
//!
//! Changing anything here re-routes existing tenants to shards that do not hold their data,
//! so the functions are pinned by golden vectors (`tests/slot-vectors.tsv`) and the slot
//! count is a constant, not a setting.

use std::fmt;

/// Number of logical slots. Fixed forever; resharding moves slots, never rehashes keys.
pub const SLOT_COUNT: u16 = 16384;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A logical slot, always in `0..SLOT_COUNT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(u16);

impl Slot {
    /// The slot with this index, or `None` when the index is outside `0..SLOT_COUNT`.
    pub fn new(index: u32) -> Option<Self> {
        (index < u32::from(SLOT_COUNT)).then_some(Self(index as u16))
    }

    pub fn index(self) -> u16 {
        self.0
    }

    /// Every slot in ascending order.
    pub fn all() -> impl Iterator<Item = Slot> {
        (0..SLOT_COUNT).map(Slot)
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A routing key. Strings and bytes hash their bytes; integers hash their value, so the
/// integer `42` and the string `"42"` are different keys on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardKey<'a> {
    Str(&'a str),
    Bytes(&'a [u8]),
    Int(i64),
}

impl<'a> ShardKey<'a> {
    #[inline]
    pub fn slot(self) -> Slot {
        let hash = match self {
            ShardKey::Str(s) => fnv1a64(s.as_bytes()),
            ShardKey::Bytes(b) => fnv1a64(b),
            ShardKey::Int(i) => splitmix64(i as u64),
        };
        Slot((hash % u64::from(SLOT_COUNT)) as u16)
    }

    /// The key as text, when it is text (pins and directories are keyed by text).
    pub fn as_text(self) -> Option<&'a str> {
        match self {
            ShardKey::Str(s) => Some(s),
            ShardKey::Bytes(b) => std::str::from_utf8(b).ok(),
            ShardKey::Int(_) => None,
        }
    }
}

impl<'a> From<&'a str> for ShardKey<'a> {
    fn from(s: &'a str) -> Self {
        ShardKey::Str(s)
    }
}

impl<'a> From<&'a String> for ShardKey<'a> {
    fn from(s: &'a String) -> Self {
        ShardKey::Str(s)
    }
}

impl<'a> From<&'a [u8]> for ShardKey<'a> {
    fn from(b: &'a [u8]) -> Self {
        ShardKey::Bytes(b)
    }
}

impl From<i64> for ShardKey<'_> {
    fn from(i: i64) -> Self {
        ShardKey::Int(i)
    }
}

/// FNV-1a, 64-bit, over raw bytes.
#[inline]
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// The splitmix64 finalizer: spreads sequential integers (user ids, row ids) over all slots.
#[inline]
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
