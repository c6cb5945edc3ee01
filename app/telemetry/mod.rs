//! Logs and metrics plumbing: the log subscriber (human-readable lines on stderr, or JSON
//! with `LOG_FORMAT=json`; filtered by `RUST_LOG`, default `info`) and [`MetricSource`],
//! what contributes figures to the metrics endpoints.

mod metric_source;

pub use metric_source::MetricSource;

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = if std::env::var("LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    // A subscriber may already be installed (tests); keep it.
    let _ = result;
}
