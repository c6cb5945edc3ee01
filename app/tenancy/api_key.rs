//! API keys: what one looks like, how it is minted, and what is stored of it.
//!
//! A key is `bks_` and 64 hex digits (256 random bits). The prefix lets people and secret
//! scanners tell what leaked; the length and alphabet let a request with something else in
//! its `Authorization` header be refused before anything is looked up.
//!
//! Only the key's SHA-256 is stored. A fast hash is enough here, unlike for passwords:
//! passwords need a slow hash because people choose guessable ones, but a key has 256
//! random bits, so its digest cannot be reversed or searched for whatever the hash costs.

use std::fmt;

use rand::RngCore;
use sha2::{Digest, Sha256};

pub const PREFIX: &str = "bks_";
const RANDOM_BYTES: usize = 32;
/// `bks_` and two hex digits per random byte.
pub const LENGTH: usize = PREFIX.len() + 2 * RANDOM_BYTES;

/// A key in the documented format (not yet known to exist). Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    #[error("an API key starts with {PREFIX:?}")]
    Prefix,
    #[error("an API key is {LENGTH} characters long")]
    Length,
    #[error("an API key is {PREFIX:?} followed by lowercase hex digits")]
    Alphabet,
}

impl ApiKey {
    /// A new random key.
    pub fn generate() -> Self {
        let mut bytes = [0u8; RANDOM_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Self(format!("{PREFIX}{}", hex(&bytes)))
    }

    pub fn parse(raw: &str) -> Result<Self, KeyFormatError> {
        let Some(random) = raw.strip_prefix(PREFIX) else {
            return Err(KeyFormatError::Prefix);
        };
        if raw.len() != LENGTH {
            return Err(KeyFormatError::Length);
        }
        if !random
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(KeyFormatError::Alphabet);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The key itself: shown once, when it is created.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What is stored of it, and what it is looked up by.
    pub fn digest(&self) -> KeyDigest {
        KeyDigest(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A key's SHA-256: what the control database stores and what caches are keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyDigest(pub [u8; 32]);

impl KeyDigest {
    /// Lowercase hex, as the table's notifications carry it.
    pub fn to_hex(self) -> String {
        hex(&self.0)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self(out))
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_differ() {
        let (a, b) = (ApiKey::generate(), ApiKey::generate());
        assert_ne!(a, b);
        assert_eq!(ApiKey::parse(a.expose()), Ok(a.clone()));
        assert_eq!(a.expose().len(), LENGTH);
        assert!(a.expose().starts_with("bks_"));
    }

    #[test]
    fn keys_of_another_format_are_refused_by_name() {
        let good = ApiKey::generate().expose().to_owned();
        assert_eq!(ApiKey::parse(&good[4..]), Err(KeyFormatError::Prefix));
        assert_eq!(
            ApiKey::parse(&good[..LENGTH - 1]),
            Err(KeyFormatError::Length)
        );
        let upper = format!("bks_{}", good[4..].to_uppercase());
        assert_eq!(ApiKey::parse(&upper), Err(KeyFormatError::Alphabet));
        assert_eq!(ApiKey::parse(""), Err(KeyFormatError::Prefix));
    }

    #[test]
    fn a_digest_reads_back_from_its_hex_and_hides_the_key() {
        let key = ApiKey::generate();
        let digest = key.digest();
        assert_eq!(KeyDigest::from_hex(&digest.to_hex()), Some(digest));
        assert_eq!(KeyDigest::from_hex("zz"), None);
        assert!(!format!("{key:?}").contains(&key.expose()[4..]));
        assert!(!digest.to_hex().contains(&key.expose()[4..]));
    }
}
