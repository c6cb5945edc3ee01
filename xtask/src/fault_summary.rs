//! `cargo xtask fault-summary DIR…`: sums up fault runs for docs/reliability.md. Each DIR
//! is what `cargo xtask fault-run` left (its report.json). Prints two Markdown tables: per
//! run, the checker's verdict; per kind of fault over every run, what the clients saw in
//! its windows (requests, errors by kind, the worst window's p99 and how long the windows
//! lasted in all).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directories of fault runs (each with its report.json).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

/// The fault kinds in the order the second table lists them; others follow as met.
const ORDER: [&str; 10] = [
    "kill-web",
    "kill-worker",
    "kill-move",
    "pause-shard",
    "restart-shard",
    "stop-replica",
    "restart-control",
    "roll",
    "move",
    "outside every fault",
];

pub fn run(args: Args) -> crate::Outcome {
    let runs = args
        .dirs
        .iter()
        .map(|dir| load(dir).map(|report| (dir, report)))
        .collect::<Result<Vec<_>>>()?;
    println!(
        "| seed | requests | ok | writes acknowledged / refused / unknown | unknown resolved | lost | phantom | misplaced |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (dir, report) in &runs {
        println!(
            "{}",
            verdict_row(report).with_context(|| format!("{}/report.json", dir.display()))?
        );
    }
    let mut kinds: Vec<(String, Kind)> = Vec::new();
    for (dir, report) in &runs {
        add_windows(&mut kinds, report)
            .with_context(|| format!("{}/report.json", dir.display()))?;
    }
    kinds.sort_by_key(|(name, _)| ORDER.iter().position(|o| o == name).unwrap_or(ORDER.len()));
    println!();
    println!(
        "| fault | windows | seconds in all | requests | failed | errors by kind | worst window's p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, k) in &kinds {
        println!(
            "| {name} | {} | {:.0} | {} | {} | {} | {:.0} |",
            k.windows,
            k.seconds,
            k.requests,
            k.requests.saturating_sub(k.ok),
            errors_text(&k.errors),
            k.p99
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn load(dir: &Path) -> Result<Value> {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// The field at `pointer` (`/total/requests`) as a whole number.
fn count(report: &Value, pointer: &str) -> Result<u64> {
    report
        .pointer(pointer)
        .and_then(Value::as_u64)
        .with_context(|| {
            format!("no whole number at {pointer} (was it a --verify run with a timeline?)")
        })
}

/// One run: requests, writes by outcome, how the unknown ones resolved, the findings.
fn verdict_row(report: &Value) -> Result<String> {
    let writes = |outcome: &str| {
        report
            .pointer(&format!("/writes/{outcome}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let mut resolved: BTreeMap<String, u64> = BTreeMap::new();
    for unknown in report["unknown_writes"].as_array().into_iter().flatten() {
        let how = unknown["resolved"]
            .as_str()
            .context("an unknown write without `resolved`")?;
        *resolved.entry(how.replace('_', " ")).or_default() += 1;
    }
    let resolved = if resolved.is_empty() {
        "–".to_owned()
    } else {
        resolved
            .iter()
            .map(|(how, n)| format!("{n} {how}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(format!(
        "| {} | {} | {} | {} / {} / {} | {resolved} | {} | {} | {} |",
        count(report, "/config/seed")?,
        count(report, "/total/requests")?,
        count(report, "/total/ok")?,
        writes("acked"),
        writes("refused"),
        writes("unknown"),
        count(report, "/lost")?,
        count(report, "/phantom")?,
        count(report, "/misplaced")?,
    ))
}

/// One kind of fault over every run.
#[derive(Default)]
struct Kind {
    windows: u64,
    seconds: f64,
    requests: u64,
    ok: u64,
    /// In the order first met (ties of the sort keep it).
    errors: Vec<(String, u64)>,
    p99: f64,
}

/// Adds a run's fault windows, and the requests outside every window, to `kinds`.
fn add_windows(kinds: &mut Vec<(String, Kind)>, report: &Value) -> Result<()> {
    let faults = report
        .get("faults")
        .context("no `faults` (was the run given a timeline?)")?;
    let windows = faults["windows"]
        .as_array()
        .context("no `faults.windows`")?;
    for window in windows.iter().chain(std::iter::once(&faults["outside"])) {
        let name = window["fault"]
            .as_str()
            .context("a window without `fault`")?;
        let at = match kinds.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                kinds.push((name.to_owned(), Kind::default()));
                kinds.len() - 1
            }
        };
        let kind = &mut kinds[at].1;
        let seconds = |field: &str| {
            window[field]
                .as_f64()
                .with_context(|| format!("{name}: no `{field}`"))
        };
        kind.windows += 1;
        kind.seconds += (seconds("end_s")? - seconds("start_s")?).max(0.0);
        kind.requests += count(window, "/requests")?;
        kind.ok += count(window, "/ok")?;
        for (error, n) in window["errors"].as_object().into_iter().flatten() {
            let n = n
                .as_u64()
                .with_context(|| format!("{name}: errors.{error} is not a count"))?;
            match kind.errors.iter_mut().find(|(e, _)| e == error) {
                Some((_, total)) => *total += n,
                None => kind.errors.push((error.clone(), n)),
            }
        }
        kind.p99 = kind.p99.max(window["p99_ms"].as_f64().unwrap_or(0.0));
    }
    Ok(())
}

/// `503 shard_unavailable 12, timeout 3`, the commonest first; `–` for none.
fn errors_text(errors: &[(String, u64)]) -> String {
    if errors.is_empty() {
        return "–".to_owned();
    }
    let mut sorted = errors.to_vec();
    sorted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    sorted
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_listed_commonest_first_ties_in_the_order_met() {
        let errors = vec![
            ("a".to_owned(), 1),
            ("b".to_owned(), 5),
            ("c".to_owned(), 1),
        ];
        assert_eq!(errors_text(&errors), "b 5, a 1, c 1");
        assert_eq!(errors_text(&[]), "–");
    }

    #[test]
    fn a_run_is_one_row_of_the_verdict_table() {
        let report = serde_json::json!({
            "config": {"seed": 2},
            "total": {"requests": 100, "ok": 90},
            "writes": {"acked": 20, "refused": 3},
            "unknown_writes": [{"resolved": "not_applied"}, {"resolved": "applied"}, {"resolved": "applied"}],
            "lost": 0, "phantom": 0, "misplaced": 1,
        });
        assert_eq!(
            verdict_row(&report).unwrap(),
            "| 2 | 100 | 90 | 20 / 3 / 0 | 2 applied, 1 not applied | 0 | 0 | 1 |"
        );
        let unverified =
            serde_json::json!({"config": {"seed": 2}, "total": {"requests": 1, "ok": 1}});
        assert!(
            verdict_row(&unverified)
                .unwrap_err()
                .to_string()
                .contains("/lost")
        );
    }

    #[test]
    fn windows_add_up_per_kind() {
        let window = |fault: &str, start: f64, end: f64, p99: f64| {
            serde_json::json!({"fault": fault, "start_s": start, "end_s": end, "requests": 10, "ok": 8,
                "errors": {"timeout": 2}, "p99_ms": p99})
        };
        let report = serde_json::json!({"faults": {
            "windows": [window("move", 1.0, 3.0, 50.0), window("kill-web", 2.0, 7.5, 900.0), window("move", 4.0, 5.0, 70.0)],
            "outside": window("outside every fault", 0.0, 60.0, 20.0),
        }});
        let mut kinds = Vec::new();
        add_windows(&mut kinds, &report).unwrap();
        let moves = &kinds.iter().find(|(n, _)| n == "move").unwrap().1;
        assert_eq!((moves.windows, moves.requests, moves.ok), (2, 20, 16));
        assert_eq!(moves.seconds, 3.0);
        assert_eq!(moves.p99, 70.0);
        assert_eq!(errors_text(&moves.errors), "timeout 4");
    }
}
