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

use tokio::time::Instant;

use crate::config::VerifyConfig;
use crate::service::Service;

pub use check::{CollectionRow, Finding, Observed, Resolution, RunMarks, ShardRow, Verdict, check};
pub use history::{Content, History, Outcome, States, Write, WriteKind, classify};

/// After the run: waits `settle`, reads back every tenant written to (and the shards, when
/// given) and checks the history against what is there.
pub async fn run(
    service: &Service,
    writes: Vec<Write>,
    run: RunMarks<'_>,
    config: &VerifyConfig,
) -> Verdict {
    tokio::time::sleep(config.settle).await;
    let deadline = Instant::now() + config.patience;
    let tenants: Vec<usize> = writes
        .iter()
        .map(|w| w.tenant)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (seen, mut unreadable) = read_back::through_service(service, &tenants, deadline).await;
    let direct = if config.shards.is_empty() {
        None
    } else {
        let names: Vec<String> = tenants
            .iter()
            .map(|&t| service.name(t).to_owned())
            .collect();
        match read_back::from_shards(&config.shards, &names, deadline).await {
            Ok(rows) => Some(rows),
            Err(mut failed) => {
                unreadable.append(&mut failed);
                None
            }
        }
    };
    check(
        service.names(),
        &writes,
        &seen,
        run,
        direct.as_deref(),
        unreadable,
    )
}
