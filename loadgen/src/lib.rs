//! `loadgen`: a load generator for the bookmarks API. It sends a mix of list, get, create,
//! update and delete requests for a population of tenants (uniform or Zipf-skewed, plus
//! whales that take a fixed share), open loop at a fixed rate (latency from each request's
//! intended send time, so a slow server cannot hide queueing) or closed loop with a fixed
//! number of workers, and reports latency percentiles and errors per tenant class and per
//! shard (`X-Shard`), as a table, JSON and an SVG plot. With `--verify` it also records
//! every write's outcome and checks afterwards that no acknowledged write was lost, no
//! refused one appeared and no row sits on the wrong shard.
//!
//! Layout: [`population`] (who), [`mix`] (what), [`driver`] (when: open/closed loop, the
//! HTTP calls), [`report`] (histograms, tables, JSON), [`plot`] (SVG), [`progress`] (the
//! live line), [`verify`] (the acknowledged-write checker), [`faults`] (the load joined
//! with a fault timeline), [`cli`] (flags → [`Config`]; `src/main.rs` only parses and calls
//! it).

pub mod cli;
pub mod config;
pub mod consistency;
pub mod driver;
pub mod ending;
pub mod faults;
pub mod mix;
pub mod plot;
pub mod population;
pub mod progress;
pub mod report;
pub mod service;
pub mod verify;

pub use config::{Config, ConfigError, Load, MAX_DURATION, MAX_PARALLEL, VerifyConfig};
pub use mix::{Mix, MixError, Op};
pub use population::{Population, PopulationError, Whale, WhaleError};
pub use report::Report;
pub use verify::Verdict;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("cannot create the tenants' API keys: {0}")]
    Keys(String),
    #[error("--events: {0}")]
    Events(String),
    #[error("--timeline {0}")]
    Timeline(String),
    #[error("{0}")]
    WhaleImport(String),
}

/// Prefills, then sends load as configured until the duration or request count is reached
/// and every sent request has ended; returns what was measured (with `verify`, and the
/// checker's verdict).
pub async fn run(config: &Config) -> Result<Report, RunError> {
    run_with_events(config, None).await
}

/// [`run`], also writing one JSON line per request to `events`.
pub async fn run_with_events(
    config: &Config,
    events: Option<std::fs::File>,
) -> Result<Report, RunError> {
    let population = config.validate()?;
    let keys = match &config.admin_token {
        Some(token) => driver::provision_keys(config, &population, token)
            .await
            .map_err(RunError::Keys)?,
        None => Vec::new(),
    };
    // A viewer per tenant when the mix sends viewers' writes (it needs the admins' keys).
    let viewer_keys = if config.mix.weight(mix::Op::Viewer) > 0 && !keys.is_empty() {
        driver::provision_viewers(config, &population, &keys)
            .await
            .map_err(RunError::Keys)?
    } else {
        Vec::new()
    };
    let shared = std::sync::Arc::new(driver::Shared::new(
        config,
        population,
        keys,
        viewer_keys,
        events,
    )?);
    driver::whale_imports(&shared, config)
        .await
        .map_err(RunError::WhaleImport)?;
    let prefill = driver::prefill(&shared, config).await;
    let window = match config.load {
        Load::Open {
            rate,
            max_in_flight,
        } => driver::open_loop(&shared, config, rate, max_in_flight).await,
        Load::Closed { concurrency } => driver::closed_loop(&shared, config, concurrency).await,
    };
    let mut report = shared.recorder().finish(config, window, prefill);
    report.reads_from = shared.consistency().reads_from();
    if let Err(e) = shared.flush_events() {
        return Err(RunError::Events(e.to_string()));
    }
    if let Some(v) = &config.verify {
        if let Some(path) = &config.timeline
            && !faults::wait_until_healed(path, v.patience).await
        {
            eprintln!(
                "loadgen: {} says nothing of a healed stack after {:?}; reading back anyway",
                path.display(),
                v.patience
            );
        }
        let writes = shared
            .history()
            .map(verify::History::writes)
            .unwrap_or_default();
        let mut verdict = verify::run(shared.service(), writes, shared.run_marks(), v).await;
        verdict.stale_ids = shared.consistency().stale_reads();
        verdict.stale = verdict.stale_ids.len();
        report.verdict = Some(verdict);
    }
    if let Some(path) = &config.timeline {
        let timeline = faults::Timeline::read(path).map_err(RunError::Timeline)?;
        let samples = shared.take_samples();
        report.faults = Some(faults::join(
            &timeline,
            shared.load_start_unix_ms(),
            &samples,
            shared.population().names(),
        ));
    }
    Ok(report)
}
