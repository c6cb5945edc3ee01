//! `--verify`: the acknowledged-write checker. While the load runs, every write and its
//! outcome goes into a [`History`]; afterwards every tenant written to is read back (through
//! the service, and optionally straight from each shard's primary) and [`check`] compares
//! what the server promised with what is there: lost, phantom and misplaced writes, and how
//! each write of unknown outcome resolved.
//!
//! Layout: [`history`] (what was sent and what the answer promised), [`check`] (the pure
//! comparison, tested against hand-made histories), [`read_back`] (the reads).

pub mod check;
pub mod history;
pub mod read_back;

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::driver::Shared;

pub use check::{Finding, Observed, Resolution, ShardRow, Verdict, check};
pub use history::{History, Outcome, Write, WriteKind, classify};

/// How the read-back runs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VerifyConfig {
    /// Wait this long after the last request before reading back (replicas catch up,
    /// breakers close, moves finish their delete).
    #[serde(serialize_with = "super::seconds")]
    pub settle: Duration,
    /// Keep retrying a tenant whose read-back fails for this long, then give up on it.
    #[serde(serialize_with = "super::seconds")]
    pub patience: Duration,
    /// `(shard name, postgres URL)` of each shard primary to read directly; empty: through
    /// the service only (no misplacement check).
    #[serde(skip)]
    pub shards: Vec<(String, String)>,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            settle: Duration::from_secs(5),
            patience: Duration::from_secs(60),
            shards: Vec::new(),
        }
    }
}

/// After the run: waits `settle`, reads back every tenant written to (and the shards, when
/// given) and checks the history against what is there.
pub async fn run(shared: &Shared, config: &VerifyConfig) -> Verdict {
    let writes = shared.history().map(History::writes).unwrap_or_default();
    tokio::time::sleep(config.settle).await;
    let deadline = Instant::now() + config.patience;
    let tenants: Vec<usize> = writes
        .iter()
        .map(|w| w.tenant)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (seen, mut unreadable) = read_back::through_service(shared, &tenants, deadline).await;
    let direct = if config.shards.is_empty() {
        None
    } else {
        let names: Vec<String> = tenants.iter().map(|&t| shared.name(t).to_owned()).collect();
        match read_back::from_shards(&config.shards, &names, deadline).await {
            Ok(rows) => Some(rows),
            Err(mut failed) => {
                unreadable.append(&mut failed);
                None
            }
        }
    };
    check(
        shared.population().names(),
        &writes,
        &seen,
        shared.run_urls(),
        direct.as_deref(),
        unreadable,
    )
}
