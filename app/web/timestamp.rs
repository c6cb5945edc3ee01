//! Timestamps in JSON, written in one piece.
//!
//! chrono's own `Serialize` hands a timestamp to serde_json through `fmt` a character at a
//! time, and serde_json escapes each piece on its own. Formatting into a `String` first and
//! handing that over once writes the same text (RFC 3339, `Z`, as many fraction digits as
//! needed) for about a third of the instructions: a page of 20 bookmarks (40 timestamps)
//! costs 12 % fewer in all (`cargo xtask bench instructions --endpoint
//! list`, docs/load-testing.md). Use it on timestamps served in bulk:
//! `#[serde(serialize_with = "crate::web::timestamp::rfc3339")]`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

/// Writes `at` exactly as chrono's `Serialize` does, in one string.
pub fn rfc3339<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[derive(serde::Serialize)]
    struct Ours(#[serde(serialize_with = "rfc3339")] DateTime<Utc>);

    #[test]
    fn timestamps_are_written_exactly_as_chronos_own_serialize_writes_them() {
        let second = Utc.with_ymd_and_hms(2026, 12, 5, 8, 25, 7).unwrap();
        for nanos in [0, 120_000_000, 123_456_000, 123_456_789, 1_000] {
            let at = second + chrono::Duration::nanoseconds(nanos);
            assert_eq!(
                serde_json::to_string(&Ours(at)).unwrap(),
                serde_json::to_string(&at).unwrap(),
                "{nanos} ns"
            );
        }
    }
}
