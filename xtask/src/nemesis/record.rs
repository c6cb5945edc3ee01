//! What the nemesis leaves behind: the timeline (one JSON line per fault start and end, as
//! loadgen's `faults` module reads it) and its log (`nemesis: [12s] …`, what it did and what
//! did not work). Both are shared by the fault loop and the moves running beside it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;

/// One timeline line; the fields in this order, as the script wrote them.
#[derive(Serialize)]
struct Line<'a> {
    unix_ms: u64,
    seq: u64,
    fault: &'a str,
    target: &'a str,
    phase: &'a str,
    detail: &'a str,
}

/// The timeline file, appended to one whole line at a time (loadgen reads it meanwhile).
pub struct Timeline {
    path: PathBuf,
    file: Mutex<File>,
}

impl Timeline {
    /// Opens `path` for appending (created if missing).
    pub fn open(path: &Path) -> Result<Timeline> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("--timeline {}: cannot open it", path.display()))?;
        Ok(Timeline {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One line: fault `seq` of kind `fault` on `target` starts or ends (`phase`).
    pub fn event(
        &self,
        seq: u64,
        fault: &str,
        target: &str,
        phase: &str,
        detail: &str,
    ) -> Result<()> {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let line = Line {
            unix_ms,
            seq,
            fault,
            target,
            phase,
            detail,
        };
        let mut text = serde_json::to_string(&line).context("a timeline line serializes")?;
        text.push('\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("cannot write to the timeline {}", self.path.display()))
    }
}

/// The nemesis's log: each line to a sink (stderr, a file) and kept for the caller.
pub struct Log {
    started: Instant,
    sink: Mutex<Box<dyn Write + Send>>,
    lines: Mutex<Vec<String>>,
}

impl Log {
    pub fn new(sink: Box<dyn Write + Send>) -> Log {
        Log {
            started: Instant::now(),
            sink: Mutex::new(sink),
            lines: Mutex::new(Vec::new()),
        }
    }

    /// Seconds since the nemesis started.
    pub fn seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// `nemesis: [Ns] MESSAGE`.
    pub fn say(&self, message: &str) {
        let line = format!("nemesis: [{}s] {message}", self.seconds());
        {
            let mut sink = self
                .sink
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            // A log that cannot be written must not stop the healing.
            let _ = writeln!(sink, "{line}").and_then(|()| sink.flush());
        }
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(line);
    }

    /// Every line said so far, one per line.
    pub fn text(&self) -> String {
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        lines.iter().map(|l| format!("{l}\n")).collect()
    }
}
