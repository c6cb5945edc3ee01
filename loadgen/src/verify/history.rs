//! What the checker knows about each write: what was sent, when (its interval from send to
//! answer), and what the answer promised. [`classify`] turns an answer into that promise.

use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::ending::Ending;

/// The 503 codes whose message says "nothing was written" (or that refuse before any
/// shard is asked). Any other 5xx, `write_outcome_unknown` and `request_timeout` among them,
/// may have been applied.
pub const REFUSED_503_CODES: [&str; 8] = [
    "tenant_moving",
    "tenant_moved",
    "server_busy",
    "shard_unavailable",
    "control_unavailable",
    "auth_unavailable",
    "directory_unavailable",
    "directory_unknown_shard",
];

/// What an answer promises about a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "label", rename_all = "snake_case")]
pub enum Outcome {
    /// 2xx: it was applied.
    Acked,
    /// A 4xx, a 503 with a code from [`REFUSED_503_CODES`], or a connection that was never
    /// made: nothing was written. The label is the status (and code) or `connect`.
    Refused(String),
    /// Anything else (timeout, reset after sending, a 502, `write_outcome_unknown`): it may
    /// or may not have been applied.
    Unknown(String),
}

/// The promise of one write's answer; `code` is the JSON error code of a non-2xx answer.
pub fn classify(ending: Ending, code: Option<&str>) -> Outcome {
    let label = |s: u16| match code {
        Some(c) => format!("{s} {c}"),
        None => s.to_string(),
    };
    match ending {
        Ending::Status(s) if (200..300).contains(&s) => Outcome::Acked,
        Ending::Status(s) if (400..500).contains(&s) => Outcome::Refused(label(s)),
        Ending::Status(503) if code.is_some_and(|c| REFUSED_503_CODES.contains(&c)) => {
            Outcome::Refused(label(503))
        }
        Ending::Status(s) => Outcome::Unknown(label(s)),
        Ending::Failed("connect") => Outcome::Refused("connect".to_owned()),
        Ending::Failed(kind) => Outcome::Unknown(kind.to_owned()),
        Ending::NotSent => Outcome::Refused("not sent".to_owned()),
    }
}

/// A bookmark's states, as a write sets them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct States {
    pub unread: bool,
    pub archived: bool,
    pub favorite: bool,
}

impl States {
    /// The states `bits` pick (its lowest three), so that a seeded choice picks them.
    pub fn from_bits(bits: u64) -> Self {
        States {
            unread: bits & 1 != 0,
            archived: bits & 2 != 0,
            favorite: bits & 4 != 0,
        }
    }
}

/// What a bookmark write leaves: a title unique to the write, the collection it files the
/// bookmark in (none: `None`) and its states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Content {
    pub title: String,
    pub collection: Option<String>,
    #[serde(flatten)]
    pub states: States,
}

impl Content {
    /// A title in no collection, with no state set (prefill's, and the tests').
    pub fn titled(title: impl Into<String>) -> Self {
        Content {
            title: title.into(),
            collection: None,
            states: States::default(),
        }
    }
}

/// What a write asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WriteKind {
    /// `id` is known only from an acknowledgement; a create is found by its `url` otherwise.
    Create {
        url: String,
        #[serde(flatten)]
        content: Content,
        id: Option<String>,
    },
    /// Sets every field of [`Content`], so that the row shows one write's content whole.
    Update {
        id: String,
        #[serde(flatten)]
        content: Content,
    },
    Delete {
        id: String,
    },
    /// A collection, inside `parent` or at the top; its `name` is unique to the write, and
    /// `id` is known only from an acknowledgement.
    Collection {
        name: String,
        parent: Option<String>,
        id: Option<String>,
    },
}

/// One write: its tenant (by population index), what it asked, when it was sent and
/// answered (since the run started), and what the answer promised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Write {
    pub tenant: usize,
    /// Sent with the tenant's viewer key: the server must refuse it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub viewer: bool,
    /// Sent in a batch (`POST /api/bookmarks/batch`): applied with the other writes of its
    /// request, or not at all.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub batched: bool,
    #[serde(flatten)]
    pub kind: WriteKind,
    #[serde(skip)]
    pub sent: Duration,
    #[serde(skip)]
    pub ended: Duration,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Write {
    /// Whether the server may have applied it.
    pub fn maybe_applied(&self) -> bool {
        !matches!(self.outcome, Outcome::Refused(_))
    }

    /// Until when it may have taken effect: its answer, or forever when the answer is lost.
    pub fn effect_until(&self) -> Option<Duration> {
        match self.outcome {
            Outcome::Unknown(_) => None,
            _ => Some(self.ended),
        }
    }
}

/// Every write of a run, appended by the request tasks.
#[derive(Debug, Default)]
pub struct History {
    writes: Mutex<Vec<Write>>,
}

impl History {
    pub fn push(&self, write: Write) {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(write);
    }

    /// The writes so far, in the order their answers arrived.
    pub fn writes(&self) -> Vec<Write> {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_promise_nothing_was_written_are_refusals_and_the_rest_is_unknown() {
        let refused = |e, c| matches!(classify(e, c), Outcome::Refused(_));
        let unknown = |e, c| matches!(classify(e, c), Outcome::Unknown(_));
        assert_eq!(classify(Ending::Status(201), None), Outcome::Acked);
        assert!(refused(Ending::Status(404), Some("not_found")));
        assert!(refused(Ending::Status(429), None));
        assert!(refused(Ending::Status(503), Some("tenant_moving")));
        assert!(refused(Ending::Failed("connect"), None));
        assert!(unknown(Ending::Status(503), Some("write_outcome_unknown")));
        assert!(unknown(Ending::Status(503), Some("request_timeout")));
        assert!(unknown(Ending::Status(503), None));
        assert!(unknown(Ending::Status(502), None));
        assert!(unknown(Ending::Status(500), Some("internal")));
        assert!(unknown(Ending::Failed("timeout"), None));
        assert!(unknown(Ending::Failed("body"), None));
        assert_eq!(
            classify(Ending::Status(503), Some("tenant_moved")),
            Outcome::Refused("503 tenant_moved".to_owned())
        );
    }
}
