//! The job worker: claims due jobs from the control database one at a time, renews the
//! lease while a job runs, and records the outcome (done, a retry with exponential
//! backoff, or dead). Every process runs one; they compete through `SKIP LOCKED`. With
//! nothing due it waits for an enqueue's notification (delivered by the control listener),
//! polling only as a backstop, for jobs that become due later (retries) and notifications
//! missed while the listener was away.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::Instrument;

use super::{Job, JobContext, JobError, queue};
use crate::pg::listener::Invalidated;
use crate::pg::pool::{CheckoutError, PgPool};
use crate::sharding::access::Shards;
use crate::telemetry::MetricSource;

#[derive(Debug, Clone, Copy)]
pub struct WorkerOptions {
    /// The longest wait for an enqueue's notification when the queue has nothing due.
    pub poll: Duration,
    /// How long a claimed job stays ours without a heartbeat (renewed every third of it).
    pub lease: Duration,
    /// The first retry waits this long; each further one twice as long, up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// An import's pause after each chunk, as a multiple of the chunk's time (1.0: the
    /// import holds its shard at most half the time). Set from `[imports] rest`.
    pub import_rest: f64,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(1),
            lease: Duration::from_secs(30),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            import_rest: 1.0,
        }
    }
}

impl WorkerOptions {
    /// The wait before attempt `attempts + 1`.
    pub fn backoff_after(&self, attempts: i32) -> Duration {
        let doublings = attempts.saturating_sub(1).clamp(0, 20) as u32;
        self.backoff
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.max_backoff)
    }
}

/// Job counts by state, as last read by this process's worker (for `/metrics`).
#[derive(Default)]
pub struct JobCounts(Mutex<Vec<(String, i64)>>);

impl JobCounts {
    pub fn snapshot(&self) -> Vec<(String, i64)> {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn set(&self, counts: Vec<(String, i64)>) {
        if let Ok(mut c) = self.0.lock() {
            *c = counts;
        }
    }
}

const COUNTS_EVERY: Duration = Duration::from_secs(2);

/// The channel the jobs table's trigger notifies on at every enqueue.
pub const CHANNEL: &str = "autumn_jobs";

/// Wakes this process's worker when a job is enqueued. The control listener delivers the
/// notifications, and wakes it too when it reconnects (what was missed is unknown).
#[derive(Default)]
pub struct JobWakeups(tokio::sync::Notify);

impl JobWakeups {
    /// A wakeup that arrives while the worker is busy is kept for its next wait.
    fn wake(&self) {
        self.0.notify_one();
    }
}

impl Invalidated for JobWakeups {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn evict(&self, _: &str) {
        self.wake();
    }

    fn flush(&self) {
        self.wake();
    }

    fn set_listener_connected(&self, _: bool) {}
}

pub fn spawn(
    control: PgPool,
    shards: Shards,
    worker_id: String,
    options: WorkerOptions,
    counts: Arc<JobCounts>,
    wakeups: Arc<JobWakeups>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut counted_at: Option<Instant> = None;
        let mut complained = false;
        loop {
            if counted_at.is_none_or(|t| t.elapsed() >= COUNTS_EVERY) {
                if let Ok(mut conn) = control.get().await
                    && let Ok(c) = queue::counts(&mut conn).await
                {
                    counts.set(c);
                }
                counted_at = Some(Instant::now());
            }
            match run_one(&control, &shards, &worker_id, &options).await {
                Ok(true) => complained = false,
                Ok(false) => {
                    let _ = tokio::time::timeout(options.poll, wakeups.0.notified()).await;
                }
                Err(e) => {
                    if !complained {
                        tracing::warn!(error = %e, "job worker: cannot reach the queue; retrying");
                        complained = true;
                    }
                    tokio::time::sleep(options.poll).await;
                }
            }
        }
    })
}

/// Why the worker could not reach the queue (the job itself failing is no such error: it is
/// recorded on the job's row).
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("{0}")]
    Checkout(#[from] CheckoutError),
    #[error("{0}")]
    Query(#[from] diesel::result::Error),
}

/// Claims and runs one job; false when nothing was due.
pub async fn run_one(
    control: &PgPool,
    shards: &Shards,
    worker_id: &str,
    options: &WorkerOptions,
) -> Result<bool, QueueError> {
    let claimed = {
        let mut conn = control.get().await?;
        queue::claim(&mut conn, worker_id, options.lease).await?
    };
    let Some(row) = claimed else {
        return Ok(false);
    };
    let span = tracing::info_span!("job", id = row.id, kind = %row.kind, attempt = row.attempts);
    finish(control, shards, worker_id, options, row)
        .instrument(span)
        .await?;
    Ok(true)
}

async fn finish(
    control: &PgPool,
    shards: &Shards,
    worker_id: &str,
    options: &WorkerOptions,
    row: queue::JobRow,
) -> Result<(), QueueError> {
    let job = Job::parse(&row.kind, &row.payload);
    let outcome = match &job {
        Ok(job) => {
            let cx = JobContext {
                shards,
                control,
                import_rest: options.import_rest,
            };
            with_heartbeat(control, row.id, worker_id, options, job.run(cx)).await
        }
        Err(e) => Err(e.clone().into()),
    };
    let mut conn = control.get().await?;
    match outcome {
        Ok(result) => {
            queue::complete(&mut conn, row.id, worker_id, &result).await?;
            tracing::info!(%result, "job done");
        }
        Err(error) => {
            let backoff = options.backoff_after(row.attempts);
            let state =
                queue::fail(&mut conn, row.id, worker_id, &error.to_string(), backoff).await?;
            tracing::warn!(%error, state = state.as_deref().unwrap_or("lost"), retry_in = ?backoff, "job failed");
            if state.as_deref() == Some("dead")
                && let Ok(job) = &job
            {
                job.buried(control, &error.to_string()).await;
            }
        }
    }
    Ok(())
}

/// Runs `work` while renewing the job's lease, so a long job is not taken over. A job whose
/// lease was taken over anyway (this worker stalled past it) stops at once: another worker
/// runs it now.
async fn with_heartbeat(
    control: &PgPool,
    id: i64,
    worker_id: &str,
    options: &WorkerOptions,
    work: impl Future<Output = Result<Value, JobError>>,
) -> Result<Value, JobError> {
    let beat = async {
        let mut tick = tokio::time::interval(options.lease / 3);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Ok(mut conn) = control.get().await {
                match queue::heartbeat(&mut conn, id, worker_id, options.lease).await {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => tracing::warn!(error = %e, "job heartbeat failed"),
                }
            }
        }
    };
    tokio::select! {
        outcome = work => outcome,
        () = beat => {
            tracing::warn!("job lease lost: another worker runs it now; this one stops");
            Err(JobError::LeaseLost)
        }
    }
}

impl MetricSource for JobCounts {
    fn record(&self) {
        for (job_state, n) in self.snapshot() {
            metrics::gauge!("jobs", "state" => job_state).set(n as f64);
        }
    }

    fn actuator(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        let counts = self
            .snapshot()
            .into_iter()
            .map(|(job_state, n)| (job_state, serde_json::json!(n)))
            .collect();
        out.insert("jobs".to_owned(), serde_json::Value::Object(counts));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_first_retry_and_is_capped() {
        let o = WorkerOptions {
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            ..WorkerOptions::default()
        };
        let waits: Vec<u64> = (1..=6).map(|a| o.backoff_after(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
    }
}
