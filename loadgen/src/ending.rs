//! How one request ended, and how a count of error kinds reads in a table. The recorder,
//! the write history and the fault timeline all count by these.

use std::collections::BTreeMap;

/// Error kind of a request that was due but not sent because `--max-in-flight` were out.
pub const IN_FLIGHT_CAP: &str = "in-flight-cap";

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A response with this status.
    Status(u16),
    /// No (complete) response: `timeout`, `connect`, `body` or `other`.
    Failed(&'static str),
    /// Due, but not sent: the in-flight cap was reached (open loop only).
    NotSent,
}

impl Ending {
    pub fn is_ok(self) -> bool {
        matches!(self, Ending::Status(s) if (200..300).contains(&s))
    }

    /// The key under which an error is counted (`503`, `timeout`, `in-flight-cap`).
    pub fn error_label(self) -> Option<String> {
        match self {
            Ending::Status(s) if (200..300).contains(&s) => None,
            Ending::Status(s) => Some(s.to_string()),
            Ending::Failed(kind) => Some(kind.to_owned()),
            Ending::NotSent => Some(IN_FLIGHT_CAP.to_owned()),
        }
    }
}

/// `429:12 503:3 timeout:1`, or `-`.
pub fn fmt_errors(errors: &BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return "-".to_owned();
    }
    let mut v: Vec<(&String, &u64)> = errors.iter().collect();
    // Statuses first in numeric order, then named kinds.
    v.sort_by_key(|(k, _)| {
        (
            k.parse::<u16>().is_err(),
            k.parse::<u16>().ok(),
            k.to_string(),
        )
    });
    v.iter()
        .map(|(k, n)| format!("{k}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}
