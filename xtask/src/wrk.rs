//! `wrk` runs and what they print: requests per second, the latency percentiles of
//! `--latency`, and answers that were not 2xx.

use anyhow::{Context, Result};
use tokio::process::Command;

use crate::process::output;

/// What one wrk run measured.
#[derive(Clone, Debug)]
pub struct Wrk {
    pub requests_per_sec: f64,
    /// The 50th and 99th percentiles in ms (present with `--latency`).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub requests: u64,
    pub non_2xx: u64,
    /// wrk's whole output.
    pub output: String,
}

/// Runs wrk with `args` (threads, connections, duration, headers, the URL).
pub async fn run(args: &[&str]) -> Result<Wrk> {
    let text = output(Command::new("wrk").args(args)).await?;
    parse(&text).with_context(|| format!("wrk {}: {text}", args.join(" ")))
}

/// Reads wrk's printout.
pub fn parse(text: &str) -> Result<Wrk> {
    let mut wrk = Wrk {
        requests_per_sec: 0.0,
        p50_ms: None,
        p99_ms: None,
        requests: 0,
        non_2xx: 0,
        output: text.to_owned(),
    };
    let mut rate = None;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", value, ..] => rate = value.parse().ok(),
            ["50%", value, ..] => wrk.p50_ms = duration_ms(value),
            ["99%", value, ..] => wrk.p99_ms = duration_ms(value),
            ["Non-2xx", "or", "3xx", "responses:", n, ..] => wrk.non_2xx = n.parse().unwrap_or(0),
            [n, "requests", "in", ..] => wrk.requests = n.parse().unwrap_or(0),
            _ => {}
        }
    }
    wrk.requests_per_sec = rate.context("no Requests/sec line")?;
    Ok(wrk)
}

/// wrk's durations (`812.00us`, `1.25ms`, `2.01s`, `1.5m`) in ms.
pub fn duration_ms(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        _ => return None,
    };
    Some(number * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_printout_is_read_into_rate_percentiles_and_failures() {
        let text = "Running 10s test @ http://127.0.0.1:1/x\n  2 threads and 8 connections\n  \
            Latency Distribution\n     50%  812.00us\n     75%    1.02ms\n     99%    2.50ms\n  \
            52011 requests in 10.00s, 9.1MB read\n  Non-2xx or 3xx responses: 3\n\
            Requests/sec:   5201.10\nTransfer/sec:    931.1KB\n";
        let wrk = parse(text).unwrap();
        assert_eq!(wrk.requests_per_sec, 5201.10);
        assert_eq!(wrk.p50_ms, Some(0.812));
        assert_eq!(wrk.p99_ms, Some(2.5));
        assert_eq!(wrk.requests, 52011);
        assert_eq!(wrk.non_2xx, 3);
    }

    #[test]
    fn durations_in_every_unit_wrk_prints_become_milliseconds() {
        let close = |text: &str, ms: f64| duration_ms(text).is_some_and(|v| (v - ms).abs() < 1e-6);
        assert!(close("2.01s", 2010.0));
        assert!(close("1.5m", 90_000.0));
        assert!(close("640.5us", 0.6405));
        assert_eq!(duration_ms("12"), None);
    }
}
