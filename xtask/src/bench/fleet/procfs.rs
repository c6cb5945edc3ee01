//! What the fleet benchmark reads of /proc: a process's CPU time and memory, the whole
//! machine's busy time, and the clock tick they are counted in.

use anyhow::{Context, Result, bail};

use crate::process;

/// Clock ticks per second, the unit of /proc's CPU times (`getconf CLK_TCK`).
pub async fn clock_ticks() -> Result<f64> {
    let text = process::output(tokio::process::Command::new("getconf").arg("CLK_TCK")).await?;
    text.trim()
        .parse()
        .with_context(|| format!("getconf CLK_TCK printed {text:?}"))
}

/// A process's user and system CPU time so far, in clock ticks (/proc/PID/stat).
pub fn cpu_ticks(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis,
    // where field 3 (the state) comes first, so utime (14) and stime (15) are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (tick(11), tick(12)) {
        (Some(user), Some(system)) => Ok(user + system),
        _ => bail!("{path}: no utime and stime in {stat:?}"),
    }
}

/// The whole machine's busy time so far (user, nice, system, irq, softirq), in clock ticks.
pub fn machine_busy_ticks() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    let fields: Vec<f64> = stat
        .lines()
        .find_map(|line| line.strip_prefix("cpu "))
        .context("/proc/stat has no cpu line")?
        .split_whitespace()
        .map(|f| f.parse().context("/proc/stat: a cpu field is not a number"))
        .collect::<Result<_>>()?;
    [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| {
            fields
                .get(i)
                .copied()
                .context("/proc/stat: the cpu line is short")
        })
        .sum()
}

/// A `kB` line of /proc/PID/status (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, key: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("{path}: no {key}"))
}
