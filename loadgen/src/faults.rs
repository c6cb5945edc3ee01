//! `--timeline`: the load joined with a fault timeline. `cargo xtask nemesis` writes one JSON
//! line per fault start and end (`unix_ms`, `seq`, `fault`, `target`, `phase`, `detail`),
//! and a last `nemesis` line once it has healed the stack. Per fault window this reports
//! what the clients saw (requests, errors by kind, latency) beside the same figures outside
//! every window, and with `--verify` the read-back waits until the timeline says healed.
//!
//! A request belongs to every window its intended send time falls in (moves run beside the
//! other faults, so windows overlap), except that a window whose target is a tenant of the
//! run (a tenant move) holds that tenant's requests only: what a move costs is what its own
//! tenant sees. A fault that never ended lasts to the end of the run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `fault` of the nemesis's own first and last lines (not a window).
pub const NEMESIS: &str = "nemesis";

#[derive(Debug, Deserialize)]
struct Line {
    unix_ms: u64,
    seq: u64,
    fault: String,
    #[serde(default)]
    target: String,
    phase: String,
    #[serde(default)]
    detail: String,
}

/// One fault, from its start to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub seq: u64,
    pub fault: String,
    pub target: String,
    /// The start's detail, then the end's (`9s`, `shard0->shard1: done`).
    pub detail: String,
    pub start_unix_ms: u64,
    /// `None`: no end line (yet).
    pub end_unix_ms: Option<u64>,
}

/// What a timeline file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// In the order they started.
    pub faults: Vec<Fault>,
    /// The nemesis wrote its last line: everything it broke is healed.
    pub healed: bool,
}

impl Timeline {
    /// Parses the JSON lines of a timeline; an unreadable line is an error naming it.
    pub fn parse(text: &str) -> Result<Timeline, String> {
        let mut timeline = Timeline::default();
        for (n, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line: Line =
                serde_json::from_str(raw).map_err(|e| format!("line {}: {e}", n + 1))?;
            if line.fault == NEMESIS {
                timeline.healed |= line.phase == "end";
                continue;
            }
            let open = timeline
                .faults
                .iter_mut()
                .find(|f| f.seq == line.seq && f.end_unix_ms.is_none());
            match (line.phase.as_str(), open) {
                ("start", _) => timeline.faults.push(Fault {
                    seq: line.seq,
                    fault: line.fault,
                    target: line.target,
                    detail: line.detail,
                    start_unix_ms: line.unix_ms,
                    end_unix_ms: None,
                }),
                ("end", Some(fault)) => {
                    fault.end_unix_ms = Some(line.unix_ms);
                    if !line.detail.is_empty() {
                        if !fault.detail.is_empty() {
                            fault.detail.push_str("; ");
                        }
                        fault.detail.push_str(&line.detail);
                    }
                }
                ("end", None) => {
                    return Err(format!(
                        "line {}: fault {} ends but never started",
                        n + 1,
                        line.seq
                    ));
                }
                (other, _) => {
                    return Err(format!(
                        "line {}: phase {other:?} is neither start nor end",
                        n + 1
                    ));
                }
            }
        }
        Ok(timeline)
    }

    pub fn read(path: &Path) -> Result<Timeline, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Timeline::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Waits until the timeline at `path` says healed (true), or `patience` is up (false). A
/// file not written yet, or a line being written, is read again a second later.
pub async fn wait_until_healed(path: &Path, patience: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        if Timeline::read(path).is_ok_and(|t| t.healed) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One request, as the windows need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The tenant, by population index.
    pub tenant: usize,
    /// Intended send time, since the load started.
    pub at: Duration,
    /// From the intended send time to the end (`None`: not sent).
    pub latency: Option<Duration>,
    /// The error kind (`503 shard_unavailable`, `timeout`, …); `None` for a 2xx.
    pub error: Option<String>,
}

/// What the requests of one window (or of no window) saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowRow {
    pub seq: Option<u64>,
    pub fault: String,
    pub target: String,
    pub detail: String,
    /// Since the load started; negative when the fault began before it.
    pub start_s: f64,
    pub end_s: f64,
    pub requests: u64,
    pub ok: u64,
    pub errors: BTreeMap<String, u64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// The load joined with the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultReport {
    pub healed: bool,
    pub windows: Vec<WindowRow>,
    /// Requests in no fault window: the run's own baseline.
    pub outside: WindowRow,
    /// Errors per second of intended send time (for the plot).
    pub errors_per_second: Vec<u64>,
}

/// Latency percentiles, errors and counts of `samples`.
fn figures(row: &mut WindowRow, samples: &[&Sample]) {
    let mut ms: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.latency)
        .map(|l| l.as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    let rank = |q: f64| {
        (!ms.is_empty()).then(|| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1])
    };
    row.requests = samples.len() as u64;
    row.ok = samples.iter().filter(|s| s.error.is_none()).count() as u64;
    for e in samples.iter().filter_map(|s| s.error.as_ref()) {
        *row.errors.entry(e.clone()).or_default() += 1;
    }
    row.p50_ms = rank(0.5);
    row.p99_ms = rank(0.99);
    row.max_ms = ms.last().copied();
}

/// Joins `samples` (times since `load_start_unix_ms`, tenants indexing `names`) with
/// `timeline`.
pub fn join(
    timeline: &Timeline,
    load_start_unix_ms: u64,
    samples: &[Sample],
    names: &[String],
) -> FaultReport {
    let run_end = samples.iter().map(|s| s.at).max().unwrap_or_default();
    let since_start = |unix_ms: u64| (unix_ms as f64 - load_start_unix_ms as f64) / 1000.0;
    let mut inside = vec![false; samples.len()];
    let windows = timeline
        .faults
        .iter()
        .map(|f| {
            let start_s = since_start(f.start_unix_ms);
            let end_s = f
                .end_unix_ms
                .map(since_start)
                .unwrap_or(run_end.as_secs_f64());
            let tenant = names.iter().position(|n| *n == f.target);
            let members: Vec<&Sample> = samples
                .iter()
                .enumerate()
                .filter(|(_, s)| (start_s..=end_s).contains(&s.at.as_secs_f64()))
                .filter(|(_, s)| tenant.is_none_or(|t| t == s.tenant))
                .map(|(i, s)| {
                    inside[i] = true;
                    s
                })
                .collect();
            let mut row = WindowRow {
                seq: Some(f.seq),
                fault: f.fault.clone(),
                target: f.target.clone(),
                detail: f.detail.clone(),
                start_s,
                end_s,
                requests: 0,
                ok: 0,
                errors: BTreeMap::new(),
                p50_ms: None,
                p99_ms: None,
                max_ms: None,
            };
            figures(&mut row, &members);
            row
        })
        .collect();
    let rest: Vec<&Sample> = samples
        .iter()
        .zip(&inside)
        .filter(|(_, inside)| !**inside)
        .map(|(s, _)| s)
        .collect();
    let mut outside = WindowRow {
        seq: None,
        fault: "outside every fault".to_owned(),
        target: String::new(),
        detail: String::new(),
        start_s: 0.0,
        end_s: run_end.as_secs_f64(),
        requests: 0,
        ok: 0,
        errors: BTreeMap::new(),
        p50_ms: None,
        p99_ms: None,
        max_ms: None,
    };
    figures(&mut outside, &rest);
    let mut errors_per_second = vec![0; run_end.as_secs() as usize + 1];
    for s in samples.iter().filter(|s| s.error.is_some()) {
        errors_per_second[s.at.as_secs() as usize] += 1;
    }
    FaultReport {
        healed: timeline.healed,
        windows,
        outside,
        errors_per_second,
    }
}

impl FaultReport {
    /// The per-window table.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        let mut out = format!(
            "{:<44} {:>7} {:>7} {:>8} {:>8} {:>7} {:>8}  errors\n",
            "by fault window (seconds since the load began)",
            "start",
            "end",
            "requests",
            "ok",
            "p99 ms",
            "max ms"
        );
        for w in self.windows.iter().chain([&self.outside]) {
            let name = match w.seq {
                Some(seq) => format!("  #{seq} {} {}", w.fault, w.target),
                None => format!("  {}", w.fault),
            };
            let _ = writeln!(
                out,
                "{name:<44} {:>7.1} {:>7.1} {:>8} {:>8} {:>7} {:>8}  {}",
                w.start_s,
                w.end_s,
                w.requests,
                w.ok,
                ms(w.p99_ms),
                ms(w.max_ms),
                crate::ending::fmt_errors(&w.errors)
            );
            if !w.detail.is_empty() {
                let _ = writeln!(out, "      {}", w.detail);
            }
        }
        if !self.healed {
            out.push_str("the timeline has no final `nemesis` line: the stack may not be healed\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMELINE: &str = r#"
{"unix_ms":1000,"seq":0,"fault":"nemesis","target":"stack","phase":"start","detail":"seed 1"}
{"unix_ms":3000,"seq":1,"fault":"pause-shard","target":"postgres-shard-1","phase":"start","detail":"2s"}
{"unix_ms":4000,"seq":2,"fault":"move","target":"tenant-0007","phase":"start","detail":"shard0->shard1"}
{"unix_ms":5000,"seq":1,"fault":"pause-shard","target":"postgres-shard-1","phase":"end","detail":""}
{"unix_ms":9000,"seq":2,"fault":"move","target":"tenant-0007","phase":"end","detail":"shard0->shard1: done"}
"#;

    fn sample(at_ms: u64, latency_ms: u64, error: Option<&str>) -> Sample {
        Sample {
            tenant: 0,
            at: Duration::from_millis(at_ms),
            latency: Some(Duration::from_millis(latency_ms)),
            error: error.map(str::to_owned),
        }
    }

    #[test]
    fn a_timeline_pairs_starts_with_ends_and_knows_when_it_is_healed() {
        let t = Timeline::parse(TIMELINE).unwrap();
        assert!(!t.healed);
        assert_eq!(t.faults.len(), 2);
        assert_eq!(t.faults[0].end_unix_ms, Some(5000));
        assert_eq!(t.faults[1].detail, "shard0->shard1; shard0->shard1: done");
        let healed = format!(
            "{TIMELINE}{}",
            r#"{"unix_ms":9500,"seq":3,"fault":"nemesis","target":"stack","phase":"end","detail":"healed"}"#
        );
        assert!(Timeline::parse(&healed).unwrap().healed);
        let orphan = r#"{"unix_ms":1,"seq":7,"fault":"roll","target":"web1","phase":"end"}"#;
        assert!(
            Timeline::parse(orphan)
                .unwrap_err()
                .contains("never started")
        );
        let bad = Timeline::parse("{\"unix_ms\":1}\n").unwrap_err();
        assert!(bad.starts_with("line 1:"), "{bad}");
    }

    #[test]
    fn each_request_counts_in_every_window_it_was_due_in_and_the_rest_outside() {
        let t = Timeline::parse(TIMELINE).unwrap();
        // The load began at unix 2000 ms: the pause spans 1-3 s, the move 2-7 s.
        let samples = [
            sample(500, 2, None),
            sample(1500, 900, Some("503 shard_unavailable")),
            sample(2500, 5, None),
            sample(3500, 3, None),
            sample(8000, 4, Some("timeout")),
        ];
        let names = ["tenant-0001".to_owned()];
        let r = join(&t, 2000, &samples, &names);
        let pause = &r.windows[0];
        assert_eq!((pause.start_s, pause.end_s), (1.0, 3.0));
        assert_eq!((pause.requests, pause.ok), (2, 1));
        assert_eq!(pause.errors["503 shard_unavailable"], 1);
        assert_eq!(pause.p99_ms, Some(900.0));
        assert_eq!(pause.p50_ms, Some(5.0));
        let moving = &r.windows[1];
        assert_eq!(moving.requests, 2, "2.5 s and 3.5 s");
        assert_eq!(r.outside.requests, 2, "0.5 s and 8 s");
        assert_eq!(r.outside.errors["timeout"], 1);
        assert_eq!(r.errors_per_second, [0, 1, 0, 0, 0, 0, 0, 0, 1]);
        let table = r.table();
        assert!(table.contains("#1 pause-shard postgres-shard-1"), "{table}");
        assert!(table.contains("may not be healed"), "{table}");
    }

    #[test]
    fn a_move_window_holds_its_own_tenants_requests_only() {
        let t = Timeline::parse(TIMELINE).unwrap();
        let names = ["tenant-0001".to_owned(), "tenant-0007".to_owned()];
        let mut moved = sample(2500, 3, Some("503 tenant_moving"));
        moved.tenant = 1;
        let r = join(&t, 2000, &[sample(2600, 3, None), moved], &names);
        let window = &r.windows[1];
        assert_eq!(window.target, "tenant-0007");
        assert_eq!((window.requests, window.ok), (1, 0));
        assert_eq!(r.windows[0].requests, 2, "the pause holds everyone's");
        assert_eq!(r.outside.requests, 0);
    }

    #[test]
    fn a_fault_without_an_end_lasts_to_the_end_of_the_run() {
        let t = Timeline::parse(
            r#"{"unix_ms":2000,"seq":1,"fault":"kill-web","target":"web1","phase":"start"}"#,
        )
        .unwrap();
        let r = join(
            &t,
            1000,
            &[sample(500, 1, None), sample(4000, 1, None)],
            &[],
        );
        assert_eq!(r.windows[0].end_s, 4.0);
        assert_eq!(r.windows[0].requests, 1);
    }
}
