//! What contributes figures to the process's metrics. The HTTP layer renders them
//! (`/metrics`, `/actuator/metrics`); the background workers (reindexer, job worker) and the
//! features implement it without knowing that layer.

use serde_json::{Map, Value};

/// Something that contributes to `/metrics` and `/actuator/metrics`: the shards' pools and
/// breakers here, and each feature's own figures (registered by the app's assembly, so this
/// layer knows no feature).
pub trait MetricSource: Send + Sync {
    /// Copies current values into the registry just before `/metrics` renders it.
    fn record(&self) {}
    /// Series rendered by hand, appended after the registry's.
    fn prometheus_text(&self, _out: &mut String) {}
    /// Top-level entries of `/actuator/metrics`.
    fn actuator(&self, _out: &mut Map<String, Value>) {}
    /// Whether its series name tenants: then only a scrape that may see who the customers
    /// are gets them (the HTTP layer's `Metrics` decides which scrapes may).
    fn names_tenants(&self) -> bool {
        false
    }
}
