//! `ShardName`: the stable identity of a shard in config, logs, metrics, health and the CLI.

use std::fmt;
use std::sync::Arc;

/// A shard name: 1–63 characters of ASCII letters, digits, `_`, `-` or `.`.
///
/// The limits keep a name safe to use unquoted as a metric label, a health component name
/// (`db:shard:<name>`) and a CLI argument. Shared text: every request served labels its
/// answer and its errors with one, and a clone must not allocate.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardName(Arc<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardNameError {
    #[error("shard name is empty")]
    Empty,
    #[error("shard name {0:?} is longer than 63 characters")]
    TooLong(String),
    #[error("shard name {0:?} may only contain ASCII letters, digits, '_', '-' and '.'")]
    BadCharacter(String),
}

impl ShardName {
    pub fn parse(raw: &str) -> Result<Self, ShardNameError> {
        if raw.is_empty() {
            return Err(ShardNameError::Empty);
        }
        if raw.len() > 63 {
            return Err(ShardNameError::TooLong(raw.to_owned()));
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(ShardNameError::BadCharacter(raw.to_owned()));
        }
        Ok(Self(raw.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShardName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ShardName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
