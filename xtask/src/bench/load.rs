//! loadgen, as a library, against a compose stack of a harness's own ([`crate::compose::Stack`]):
//! one run ([`run`]), its files where `loadgen --json/--plot … | tee NAME.txt` put them
//! ([`save`]), the cells of the Markdown summaries the harnesses print ([`ms`],
//! [`errors`], [`row`]), and [`interruptible`], so that Ctrl-C still takes the stack down.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;

use anyhow::{Context, Result, bail};
use loadgen::report::Row;
use loadgen::{Config, Load, Report};

/// An open loop at `rate` requests/s with loadgen's default in-flight cap (`--rate`).
pub fn open(rate: f64) -> Load {
    Load::Open {
        rate,
        max_in_flight: loadgen::cli::DEFAULT_MAX_IN_FLIGHT,
    }
}

/// One loadgen run with `config`: its report, or why it could not start. Warns, as the
/// loadgen command does, when no request succeeded.
pub async fn run(config: &Config) -> Result<Report> {
    let report = loadgen::run(config)
        .await
        .with_context(|| format!("loadgen against {}", config.base_url))?;
    if report.total.requests > 0 && report.total.ok == 0 {
        eprintln!(
            "loadgen: no request succeeded; is the service at {} up?",
            config.base_url
        );
    }
    Ok(report)
}

/// One of a report's files.
#[derive(Clone, Copy, Debug)]
pub enum File {
    /// `NAME.txt`: the table loadgen prints.
    Table,
    /// `NAME.json`: what `loadgen --json` writes.
    Json,
    /// `NAME.svg`: what `loadgen --plot` writes.
    Plot,
}

/// Writes each of `files` of `report` as `DIR/NAME.{txt,json,svg}`.
pub fn save(report: &Report, dir: &Path, name: &str, files: &[File]) -> Result<()> {
    for file in files {
        let (extension, text) = match file {
            File::Table => ("txt", report.table()),
            File::Json => ("json", report.to_json()),
            File::Plot => ("svg", loadgen::plot::svg(report)),
        };
        let path = dir.join(format!("{name}.{extension}"));
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The row called `name` among `rows` (a class, a shard, an operation).
pub fn row<'a>(rows: &'a [Row], name: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.name == name)
}

/// Milliseconds to one decimal, "-" when there is no figure.
pub fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

/// Errors by kind as `kind:count …`, "0" when there were none (or no row).
pub fn errors(by_kind: Option<&BTreeMap<String, u64>>) -> String {
    match by_kind {
        Some(by_kind) if !by_kind.is_empty() => by_kind
            .iter()
            .map(|(kind, count)| format!("{kind}:{count}"))
            .collect::<Vec<_>>()
            .join(" "),
        _ => "0".to_owned(),
    }
}

/// Runs `task` to its end, or until Ctrl-C: then it is dropped (and with it what it was
/// running) and an error returned, so that the caller's stack is still taken down.
pub async fn interruptible<T>(task: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::select! {
        result = task => result,
        _ = tokio::signal::ctrl_c() => bail!("interrupted"),
    }
}
