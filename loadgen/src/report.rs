//! What a run measured: HDR histograms of latency (microseconds) per tenant class, per shard
//! and in total, errors by kind, per-tenant counts and a per-second series; turned at the
//! end into a [`Report`] that prints as a table and serializes as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::config::Config;
use crate::ending::{Ending, fmt_errors};
use crate::mix::Op;

/// Latencies above this (one hour, in µs) are recorded as this.
const HIST_MAX_US: u64 = 3_600_000_000;

/// Class of the whale tenants together.
pub const WHALES: &str = "whales";
/// Class of every tenant that is not a whale.
pub const OTHERS: &str = "others";
/// Shard of a request whose response had no `X-Shard` (or that got no response).
pub const NO_SHARD: &str = "none";
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("constant bounds are valid")
}

/// Counts and latencies of one row (a class, a shard, the total).
struct Agg {
    hist: Histogram<u64>,
    requests: u64,
    not_sent: u64,
    ok: u64,
    errors: BTreeMap<String, u64>,
}

impl Agg {
    fn new() -> Self {
        Agg {
            hist: histogram(),
            requests: 0,
            not_sent: 0,
            ok: 0,
            errors: BTreeMap::new(),
        }
    }

    fn add(&mut self, ending: Ending, error: Option<&str>, latency_us: Option<u64>) {
        if ending == Ending::NotSent {
            self.not_sent += 1;
        } else {
            self.requests += 1;
        }
        if ending.is_ok() {
            self.ok += 1;
        }
        if let Some(e) = error {
            *self.errors.entry(e.to_owned()).or_default() += 1;
        }
        if let Some(us) = latency_us {
            self.hist.saturating_record(us.max(1));
        }
    }

    fn row(&self, name: &str, window: Duration) -> Row {
        let q = |q: f64| (!self.hist.is_empty()).then(|| ms(self.hist.value_at_quantile(q)));
        Row {
            name: name.to_owned(),
            requests: self.requests,
            not_sent: self.not_sent,
            ok: self.ok,
            rate: rate(self.requests, window),
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: (!self.hist.is_empty()).then(|| ms(self.hist.max())),
            errors: self.errors.clone(),
        }
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn rate(n: u64, window: Duration) -> f64 {
    if window.is_zero() {
        0.0
    } else {
        (n as f64 / window.as_secs_f64() * 10.0).round() / 10.0
    }
}

/// One second of one class in the series: open while requests of that second may still
/// complete, then reduced to its percentiles (so a long run keeps little per second).
struct Slot {
    count: u64,
    hist: Option<Histogram<u32>>,
    summary: Option<(f64, f64)>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            count: 0,
            hist: Some(Histogram::new_with_bounds(1, HIST_MAX_US, 2).expect("constant bounds")),
            summary: None,
        }
    }

    fn close(&mut self) {
        if let Some(h) = self.hist.take()
            && !h.is_empty()
        {
            self.summary = Some((ms(h.value_at_quantile(0.5)), ms(h.value_at_quantile(0.99))));
        }
    }
}

/// Per-tenant counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TenantCounts {
    pub name: String,
    pub whale: bool,
    /// The shard that answered this tenant's prefill (from `X-Shard`), if any did.
    pub home_shard: Option<String>,
    pub requests: u64,
    pub not_sent: u64,
    pub ok: u64,
    pub errors: BTreeMap<String, u64>,
    /// Requests by the `X-Shard` of their response (`none` without one).
    pub shards: BTreeMap<String, u64>,
}

struct Stats {
    whale_count: usize,
    /// Only with two or more whales: each whale is also a class of its own.
    whale_classes: bool,
    total: Agg,
    classes: BTreeMap<String, Agg>,
    shards: BTreeMap<String, Agg>,
    /// "others on shard0": a class on its tenants' home shard.
    class_shards: BTreeMap<String, Agg>,
    /// By operation (`list`, `create`, …): reads and writes apart.
    ops: BTreeMap<&'static str, Agg>,
    tenants: Vec<TenantCounts>,
    /// series[second][0 = whales, 1 = others]
    series: Vec<[Slot; 2]>,
    closed_before: usize,
    horizon_s: u64,
}

/// Collects every request's outcome while a run goes on (shared by all request tasks).
pub struct Recorder {
    stats: Mutex<Stats>,
}

/// What the progress line shows.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    pub requests: u64,
    pub errors: u64,
    pub p99_ms: Option<f64>,
}

impl Recorder {
    /// `names` are the tenants by index, the first `whale_count` of them whales. A request
    /// can complete up to `timeout` after it was sent; its second of the series stays open
    /// that long.
    pub fn new(names: &[String], whale_count: usize, timeout: Duration) -> Self {
        let tenants = names
            .iter()
            .enumerate()
            .map(|(i, n)| TenantCounts {
                name: n.clone(),
                whale: i < whale_count,
                ..TenantCounts::default()
            })
            .collect();
        Recorder {
            stats: Mutex::new(Stats {
                whale_count,
                whale_classes: whale_count > 1,
                total: Agg::new(),
                classes: BTreeMap::new(),
                shards: BTreeMap::new(),
                class_shards: BTreeMap::new(),
                ops: BTreeMap::new(),
                tenants,
                series: Vec::new(),
                closed_before: 0,
                horizon_s: timeout.as_secs() + 5,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes the shard that answered a tenant's prefill.
    pub fn set_home_shard(&self, tenant: usize, shard: &str) {
        let mut s = self.lock();
        if let Some(t) = s.tenants.get_mut(tenant)
            && t.home_shard.is_none()
        {
            t.home_shard = Some(shard.to_owned());
        }
    }

    /// Records one request of `tenant`, due `at` after the start, that took `latency` from
    /// its intended send time (none if it was not sent).
    pub fn record(
        &self,
        tenant: usize,
        op: Op,
        shard: Option<&str>,
        ending: Ending,
        at: Duration,
        latency: Option<Duration>,
    ) {
        let error = ending.error_label();
        let error = error.as_deref();
        let latency_us = latency.map(|l| u64::try_from(l.as_micros()).unwrap_or(u64::MAX));
        let shard = shard.unwrap_or(NO_SHARD);
        let mut guard = self.lock();
        let s = &mut *guard;
        let whale = tenant < s.whale_count;
        s.total.add(ending, error, latency_us);
        s.ops
            .entry(op.name())
            .or_insert_with(Agg::new)
            .add(ending, error, latency_us);
        let class = if whale { WHALES } else { OTHERS };
        agg(&mut s.classes, class).add(ending, error, latency_us);
        if whale && s.whale_classes {
            agg(&mut s.classes, &s.tenants[tenant].name).add(ending, error, latency_us);
        }
        if ending != Ending::NotSent {
            // The tenant's home shard (where its prefill landed) when known, so that a
            // failed request without X-Shard still counts where its tenant lives.
            let home = s.tenants.get(tenant).and_then(|t| t.home_shard.as_deref());
            let key = format!("{class} on {}", home.unwrap_or(shard));
            agg(&mut s.class_shards, &key).add(ending, error, latency_us);
            agg(&mut s.shards, shard).add(ending, error, latency_us);
        }
        if let Some(t) = s.tenants.get_mut(tenant) {
            if ending == Ending::NotSent {
                t.not_sent += 1;
            } else {
                t.requests += 1;
                match t.shards.get_mut(shard) {
                    Some(n) => *n += 1,
                    None => {
                        t.shards.insert(shard.to_owned(), 1);
                    }
                }
            }
            if ending.is_ok() {
                t.ok += 1;
            }
            if let Some(e) = error {
                *t.errors.entry(e.to_owned()).or_default() += 1;
            }
        }
        if ending != Ending::NotSent {
            s.add_to_series(whale, at, latency_us);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let s = self.lock();
        Snapshot {
            requests: s.total.requests,
            errors: s.total.errors.values().sum(),
            p99_ms: (!s.total.hist.is_empty()).then(|| ms(s.total.hist.value_at_quantile(0.99))),
        }
    }

    /// The report; `window` is how long requests were being sent (rates are per it).
    /// Takes the per-tenant counts out: call once, when every request has ended.
    pub fn finish(&self, config: &Config, window: Duration, prefill: PrefillSummary) -> Report {
        let mut guard = self.lock();
        let s = &mut *guard;
        let mut classes = Vec::new();
        // whales, then each whale, then others
        if let Some(a) = s.classes.get(WHALES) {
            classes.push(a.row(WHALES, window));
        }
        for t in s.tenants.iter().filter(|t| t.whale) {
            if let Some(a) = s.classes.get(t.name.as_str()) {
                classes.push(a.row(&t.name, window));
            }
        }
        if let Some(a) = s.classes.get(OTHERS) {
            classes.push(a.row(OTHERS, window));
        }
        let shards = s.shards.iter().map(|(n, a)| a.row(n, window)).collect();
        let class_shards = s
            .class_shards
            .iter()
            .map(|(n, a)| a.row(n, window))
            .collect();
        let operations = s.ops.iter().map(|(n, a)| a.row(n, window)).collect();
        let mut series = Vec::new();
        for (second, slots) in s.series.iter_mut().enumerate() {
            for (slot, class) in slots.iter_mut().zip([WHALES, OTHERS]) {
                slot.close();
                if slot.count > 0 {
                    series.push(SeriesPoint {
                        second: second as u64,
                        class: class.to_owned(),
                        count: slot.count,
                        p50_ms: slot.summary.map(|p| p.0),
                        p99_ms: slot.summary.map(|p| p.1),
                    });
                }
            }
        }
        let whale_tenants = s.tenants.iter().filter(|t| t.whale).cloned().collect();
        Report {
            config: config.clone(),
            window_s: window.as_secs_f64(),
            prefill,
            total: s.total.row("total", window),
            classes,
            shards,
            class_shards,
            operations,
            whale_tenants,
            tenants: std::mem::take(&mut s.tenants),
            series,
            verdict: None,
            reads_from: Default::default(),
            faults: None,
        }
    }
}

/// The aggregate kept under `key`, created empty the first time (the key is copied only
/// then: this runs for every request).
fn agg<'m>(map: &'m mut BTreeMap<String, Agg>, key: &str) -> &'m mut Agg {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), Agg::new());
    }
    map.get_mut(key).expect("inserted above")
}

impl Stats {
    fn add_to_series(&mut self, whale: bool, at: Duration, latency_us: Option<u64>) {
        let second = at.as_secs() as usize;
        while self.series.len() <= second {
            self.series.push([Slot::new(), Slot::new()]);
        }
        let slot = &mut self.series[second][usize::from(!whale)];
        slot.count += 1;
        if let (Some(h), Some(us)) = (slot.hist.as_mut(), latency_us) {
            h.saturating_record(us.max(1));
        }
        // Seconds whose requests have all completed (or timed out) no longer need a histogram.
        let done = at
            .as_secs()
            .saturating_sub(self.horizon_s)
            .min(self.series.len() as u64) as usize;
        while self.closed_before < done {
            for slot in &mut self.series[self.closed_before] {
                slot.close();
            }
            self.closed_before += 1;
        }
    }
}

/// One row of the table: a class, a shard or the total.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    /// Requests sent (each got a response or failed).
    pub requests: u64,
    /// Requests due but not sent because of `--max-in-flight` (also in `errors`).
    pub not_sent: u64,
    /// Responses with a 2xx status.
    pub ok: u64,
    /// Requests sent per second of the send window.
    pub rate: f64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Errors by kind: a status (`503`), `timeout`, `connect`, `body`, `other`, `in-flight-cap`.
    pub errors: BTreeMap<String, u64>,
}

/// One second of one class: how many requests were due in it and their latency.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoint {
    pub second: u64,
    pub class: String,
    pub count: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// What prefill did (not part of the measurement).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PrefillSummary {
    pub per_tenant: usize,
    /// Create requests sent.
    pub requests: u64,
    pub created: u64,
    /// 409 answers: the bookmark was already there.
    pub existing: u64,
    pub errors: BTreeMap<String, u64>,
    pub seconds: f64,
}

/// Everything a run measured, with the configuration it ran with.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: Config,
    /// How long requests were being sent; rates are per this.
    pub window_s: f64,
    pub prefill: PrefillSummary,
    pub total: Row,
    /// `whales` (all whales), each whale when there are several, `others`.
    pub classes: Vec<Row>,
    /// By the `X-Shard` response header; `none` without one.
    pub shards: Vec<Row>,
    /// Each class by its tenants' home shard ("others on shard0"; the shard that answered
    /// the tenant's prefill, else the request's own `X-Shard`): how a shard's minnows fare
    /// next to a whale.
    pub class_shards: Vec<Row>,
    /// By operation: `list` and `get` are the reads, the rest write.
    pub operations: Vec<Row>,
    pub whale_tenants: Vec<TenantCounts>,
    /// Every tenant (whales first); not in the JSON, which would grow with the population.
    #[serde(skip)]
    pub tenants: Vec<TenantCounts>,
    /// Per second (of intended send time) and class (`whales`, `others`).
    pub series: Vec<SeriesPoint>,
    /// The checker's findings (`--verify`), at the top level of the JSON: `lost`,
    /// `phantom`, `misplaced`, `unknown` and the lists beside them.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::verify::Verdict>,
    /// Where the service served the reads (`X-Read-From`): the replicas' share.
    pub reads_from: crate::consistency::ReadsFrom,
    /// Per fault window (`--timeline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::faults::FaultReport>,
}

fn fmt_ms(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

impl Report {
    /// The plain-text tables: by tenant class, by shard, and the total.
    pub fn table(&self) -> String {
        let names = self
            .classes
            .iter()
            .chain(&self.shards)
            .chain(&self.class_shards)
            .map(|r| r.name.len() + 4);
        let width = names.max().unwrap_or(0).max(14);
        let mut out = String::new();
        let header = |out: &mut String, title: &str| {
            let _ = writeln!(
                out,
                "{title:<width$} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  errors",
                "requests", "rate/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"
            );
        };
        let line = |out: &mut String, indent: usize, r: &Row| {
            let name = format!("{:indent$}{}", "", r.name);
            let _ = writeln!(
                out,
                "{name:<width$} {:>9} {:>8.1} {:>8} {:>8} {:>8} {:>8} {:>8}  {}",
                r.requests,
                r.rate,
                fmt_ms(r.p50_ms),
                fmt_ms(r.p90_ms),
                fmt_ms(r.p99_ms),
                fmt_ms(r.p999_ms),
                fmt_ms(r.max_ms),
                fmt_errors(&r.errors)
            );
        };
        header(&mut out, "by tenant class");
        for r in &self.classes {
            let indent = if r.name == WHALES || r.name == OTHERS {
                2
            } else {
                4
            };
            line(&mut out, indent, r);
        }
        out.push('\n');
        header(&mut out, "by shard");
        for r in &self.shards {
            line(&mut out, 2, r);
        }
        out.push('\n');
        header(&mut out, "by class, home shard");
        for r in &self.class_shards {
            line(&mut out, 2, r);
        }
        out.push('\n');
        header(&mut out, "by operation");
        for r in &self.operations {
            line(&mut out, 2, r);
        }
        out.push('\n');
        line(&mut out, 0, &self.total);
        let _ = writeln!(
            out,
            "\n{} requests in {:.1} s ({} due but not sent: in-flight cap)",
            self.total.requests, self.window_s, self.total.not_sent
        );
        let reads = self.reads_from.replica + self.reads_from.primary;
        if reads > 0 {
            let _ = writeln!(
                out,
                "reads: {} served by replicas, {} by primaries ({:.1} % on replicas)",
                self.reads_from.replica,
                self.reads_from.primary,
                self.reads_from.replica as f64 * 100.0 / reads as f64
            );
        }
        if self.prefill.requests > 0 {
            let _ = writeln!(
                out,
                "prefill: {} created, {} already there, errors {} ({:.1} s)",
                self.prefill.created,
                self.prefill.existing,
                fmt_errors(&self.prefill.errors),
                self.prefill.seconds
            );
        }
        if !self.whale_tenants.is_empty() {
            let sent = self.total.requests + self.total.not_sent;
            for w in &self.whale_tenants {
                let share = if sent == 0 {
                    0.0
                } else {
                    (w.requests + w.not_sent) as f64 / sent as f64 * 100.0
                };
                let _ = writeln!(
                    out,
                    "whale {}: {:.1} % of requests, {} ok, errors {}",
                    w.name,
                    share,
                    w.ok,
                    fmt_errors(&w.errors)
                );
            }
        }
        if let Some(f) = &self.faults {
            out.push('\n');
            out.push_str(&f.table());
        }
        if let Some(v) = &self.verdict {
            out.push_str(&v.summary());
        }
        out
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["acme", "globex", "tenant-0001", "tenant-0002"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn rows_count_by_class_shard_and_tenant() {
        let r = Recorder::new(&names(), 2, Duration::from_secs(5));
        let ms = Duration::from_millis;
        r.record(
            0,
            Op::List,
            Some("shard1"),
            Ending::Status(200),
            ms(10),
            Some(ms(2)),
        );
        r.record(
            1,
            Op::Create,
            Some("shard0"),
            Ending::Status(429),
            ms(20),
            Some(ms(3)),
        );
        r.record(
            2,
            Op::List,
            None,
            Ending::Failed("connect"),
            ms(1500),
            Some(ms(1)),
        );
        r.record(3, Op::Get, None, Ending::NotSent, ms(1600), None);
        let report = r.finish(
            &Config::default(),
            Duration::from_secs(2),
            Default::default(),
        );
        assert_eq!(report.total.requests, 3);
        assert_eq!(report.total.not_sent, 1);
        assert_eq!(report.total.ok, 1);
        let names: Vec<&str> = report.classes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["whales", "acme", "globex", "others"]);
        assert_eq!(report.classes[0].requests, 2);
        assert_eq!(report.classes[3].requests, 1);
        assert_eq!(report.classes[3].errors["in-flight-cap"], 1);
        let shards: Vec<&str> = report.shards.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(shards, ["none", "shard0", "shard1"]);
        assert_eq!(
            fmt_errors(&report.total.errors),
            "429:1 connect:1 in-flight-cap:1"
        );
        assert_eq!(report.tenants[1].errors["429"], 1);
        let ops: Vec<(&str, u64)> = report
            .operations
            .iter()
            .map(|r| (r.name.as_str(), r.requests))
            .collect();
        assert_eq!(ops, [("create", 1), ("get", 0), ("list", 2)]);
        assert_eq!(report.whale_tenants.len(), 2);
        assert_eq!(report.series.len(), 2, "{:?}", report.series);
        assert_eq!(report.series[0].class, "whales");
        assert_eq!(report.series[0].count, 2);
        assert_eq!(report.series[1].second, 1);
        let table = report.table();
        assert!(table.contains("429:1 connect:1 in-flight-cap:1"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["total"]["requests"], 3);
        assert!(json.get("tenants").is_none());
    }

    #[test]
    fn old_seconds_are_reduced_to_percentiles() {
        let r = Recorder::new(&names(), 0, Duration::from_secs(1));
        for s in 0..20 {
            r.record(
                2,
                Op::Get,
                Some("shard0"),
                Ending::Status(200),
                Duration::from_secs(s),
                Some(Duration::from_millis(s + 1)),
            );
        }
        {
            let stats = r.lock();
            assert!(stats.series[0][1].hist.is_none());
            assert!(stats.series[19][1].hist.is_some());
        }
        let report = r.finish(
            &Config::default(),
            Duration::from_secs(20),
            Default::default(),
        );
        assert_eq!(report.series.len(), 20);
        let p = &report.series[4];
        assert_eq!(p.p99_ms.map(f64::round), Some(5.0));
    }
}
