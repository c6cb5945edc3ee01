//! The live line on stderr while loadgen runs: a counter during prefill, then elapsed time,
//! requests, achieved rate, errors and p99 so far. Nothing is drawn unless asked for (the
//! CLI asks only when stderr is a terminal and `--quiet` is not given).

use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::report::Recorder;

/// A progress line, or nothing.
pub struct Line {
    bar: Option<ProgressBar>,
    ticker: Option<JoinHandle<()>>,
}

impl Line {
    /// A bar counting `total` steps of `label`.
    pub fn counter(show: bool, total: u64, label: &str) -> Line {
        let bar = show.then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "loadgen {prefix}: [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(label.to_owned());
            bar
        });
        Line { bar, ticker: None }
    }

    pub fn inc(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// A line refreshed four times a second from `recorder`.
    pub fn live(show: bool, recorder: Arc<Recorder>, label: &'static str) -> Line {
        if !show {
            return Line {
                bar: None,
                ticker: None,
            };
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} loadgen {prefix}: {msg}") {
            bar.set_style(style);
        }
        bar.set_prefix(label);
        let shown = bar.clone();
        let ticker = tokio::spawn(async move {
            let start = Instant::now();
            let mut every = tokio::time::interval(Duration::from_millis(250));
            loop {
                every.tick().await;
                let s = recorder.snapshot();
                let elapsed = start.elapsed().as_secs_f64();
                let rate = if elapsed > 0.0 {
                    s.requests as f64 / elapsed
                } else {
                    0.0
                };
                let p99 = s
                    .p99_ms
                    .map_or_else(|| "-".to_owned(), |p| format!("{p:.2} ms"));
                shown.set_message(format!(
                    "{elapsed:.1} s, {} requests, {rate:.1}/s, {} errors, p99 {p99}",
                    s.requests, s.errors
                ));
                shown.tick();
            }
        });
        Line {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// Stops refreshing and clears the line.
    pub fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
