//! What a move tells its operator while it runs: a progress bar over the bulk copy when
//! stderr is a terminal, one log line per step otherwise (and always for steps).

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

pub struct MoveProgress {
    label: String,
    bar: Mutex<Option<ProgressBar>>,
}

impl MoveProgress {
    /// `label` prefixes every line, e.g. `move 7 (acme shard1→shard0)`.
    pub fn new(label: String) -> Self {
        Self {
            label,
            bar: Mutex::new(None),
        }
    }

    pub fn set_label(&mut self, label: String) {
        self.label = label;
    }

    /// One line saying what a step did.
    pub fn step(&self, message: &str) {
        let line = format!("move_slot: {}: {message}", self.label);
        match &*self.bar.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Starts counting copied rows (a bar only on a terminal).
    pub fn start_copy(&self, total_rows: u64) {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total_rows);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} rows {per_sec} eta {eta}",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix(format!("move_slot: {}: copying", self.label));
            *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
        }
    }

    pub fn advance(&self, rows: u64) {
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|p| p.into_inner()) {
            bar.inc(rows);
        }
    }

    pub fn finish_copy(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}
