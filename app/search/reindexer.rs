//! The per-shard reindexer: one leader per shard across every process, elected with a
//! session advisory lock on that shard's own database.
//!
//! Every process (both web replicas, any `bookmarks worker`) runs one task per shard. The
//! task keeps its own connection to the shard primary (outside the pool: a session lock
//! must stay on one session) and tries the lock; whoever holds it drains the shard's
//! backlog in batches. When the leader dies or loses its connection, Postgres ends its
//! session and releases the lock, and the next follower to try, within a second, takes
//! over. Shards are independent: a shard that is down only stalls its own task.
//!
//! A leader with nothing to do sleeps until a write wakes it. It arms the shard's wakeup
//! (`search_wakeup.armed`), looks once more, and waits on `LISTEN search_pending`; the first
//! write to mark a row after that disarms it and notifies (a NOTIFY serializes the commits
//! of the transactions that send one, so only that one write sends it). The leader waits a
//! few milliseconds more (a burst goes in one batch), then indexes. A poll every 5 seconds
//! is only the backstop (for a disarming write that rolled back): a fleet's idle shards
//! each cost a statement per poll, so it is not more often. While a backlog remains it
//! paces itself: batches take at most [`ReindexOptions::duty`] of its time, so that a
//! burst of writes does not take the shard from the requests that made it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::pg::DbUrl;
use crate::pg::db_url::ListeningSession;
use crate::sharding::ShardSet;
use crate::sharding::row_security;
use crate::telemetry::MetricSource;

/// The leadership lock (session level, per shard database).
pub const LEADER_LOCK: i64 = 0x6572_7573_6f6b_2200;
/// `application_name` prefix of the reindexer sessions (`…/<instance>`).
pub const APPLICATION_NAME: &str = "bookmarks-reindexer";

/// How the reindexers pace themselves.
#[derive(Debug, Clone, Copy)]
pub struct ReindexOptions {
    /// Rows per transaction.
    pub batch_size: i32,
    /// The longest an idle leader waits for a wakeup before it looks anyway.
    pub idle_poll: Duration,
    /// How long a woken leader waits for more writes before it indexes.
    pub debounce: Duration,
    /// The share of its time a leader with a backlog spends in batches (it pauses
    /// between them for the rest), in (0, 1].
    pub duty: f64,
    /// Pause of a follower between attempts at the lock: bounds the takeover time.
    pub follower_retry: Duration,
}

impl Default for ReindexOptions {
    fn default() -> Self {
        Self {
            batch_size: 500,
            idle_poll: Duration::from_secs(5),
            debounce: Duration::from_millis(5),
            duty: 0.5,
            follower_retry: Duration::from_secs(1),
        }
    }
}

/// The channel the marker trigger notifies on (`_search_mark_pending`).
pub const WAKEUP_CHANNEL: &str = "search_pending";

/// What this process knows about one shard's index, for metrics and the admin page.
#[derive(Default)]
pub struct ShardIndexState {
    /// This process holds the shard's leadership lock.
    pub leader: AtomicBool,
    /// The shard answered the last check.
    pub reachable: AtomicBool,
    /// Unindexed rows, and the age of the oldest unindexed write (ms), at the last check.
    pub pending: AtomicI64,
    pub lag_ms: AtomicU64,
    /// Rows indexed by this process.
    pub indexed: AtomicU64,
    /// The backlog when this process last had `search_pending` analyzed (see [`observe`]).
    analyzed_at: AtomicI64,
}

/// A copy of [`ShardIndexState`] to show.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct IndexSnapshot {
    pub pending: i64,
    /// Age of the oldest write not yet indexed.
    pub lag_ms: u64,
    /// This process leads the shard's reindexing (some process always should).
    pub leader_here: bool,
    pub reachable: bool,
    pub indexed_here: u64,
}

impl ShardIndexState {
    pub fn snapshot(&self) -> IndexSnapshot {
        IndexSnapshot {
            pending: self.pending.load(Ordering::Relaxed),
            lag_ms: self.lag_ms.load(Ordering::Relaxed),
            leader_here: self.leader.load(Ordering::Relaxed),
            reachable: self.reachable.load(Ordering::Relaxed),
            indexed_here: self.indexed.load(Ordering::Relaxed),
        }
    }
}

/// Per shard, in the topology's order.
pub struct IndexStates {
    pub shards: Vec<(String, ShardIndexState)>,
}

impl IndexStates {
    pub fn new(set: &ShardSet) -> Self {
        Self {
            shards: set
                .iter()
                .map(|s| (s.name().to_owned(), ShardIndexState::default()))
                .collect(),
        }
    }

    pub fn get(&self, shard: &str) -> Option<&ShardIndexState> {
        self.shards.iter().find(|(n, _)| n == shard).map(|(_, s)| s)
    }
}

/// Starts one reindexer task per shard; they run until aborted.
pub fn spawn_all(
    set: &ShardSet,
    states: Arc<IndexStates>,
    instance: &str,
    options: ReindexOptions,
) -> Vec<tokio::task::JoinHandle<()>> {
    let connect_timeout = set.topology().connect_timeout;
    set.iter()
        .enumerate()
        .map(|(i, shard)| {
            let url = shard.spec().primary_url.clone();
            let name = shard.name().to_owned();
            let states = Arc::clone(&states);
            let app_name = format!("{APPLICATION_NAME}/{instance}");
            tokio::spawn(async move {
                let state = &states.shards[i].1;
                run(&name, &url, &app_name, connect_timeout, options, state).await
            })
        })
        .collect()
}

async fn run(
    shard: &str,
    url: &DbUrl,
    app_name: &str,
    connect_timeout: Duration,
    options: ReindexOptions,
    state: &ShardIndexState,
) {
    let mut logged_down = false;
    loop {
        match url
            .connect_listening_session(app_name, connect_timeout)
            .await
        {
            Ok(mut session) => {
                logged_down = false;
                state.reachable.store(true, Ordering::Relaxed);
                let why = serve(shard, &mut session, options, state).await;
                state.leader.store(false, Ordering::Relaxed);
                state.reachable.store(false, Ordering::Relaxed);
                tracing::warn!(shard, reason = %why, "reindexer lost its shard connection");
            }
            Err(e) => {
                if !logged_down {
                    tracing::warn!(shard, error = %e, "reindexer cannot reach its shard; retrying");
                    logged_down = true;
                }
                state.reachable.store(false, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(options.follower_retry).await;
    }
}

/// Follows until it wins the lock, then leads until the connection fails. A failing
/// query on a live connection (say, the shard is not migrated yet) is retried in place.
async fn serve(
    shard: &str,
    session: &mut ListeningSession,
    options: ReindexOptions,
    state: &ShardIndexState,
) -> tokio_postgres::Error {
    let mut complained = false;
    loop {
        let next = match step(session, options, state).await {
            Ok(next) => {
                complained = false;
                next
            }
            Err(e) if session.client.is_closed() => return e,
            Err(e) => {
                if !complained {
                    tracing::warn!(shard, error = %e, "reindexer: query failed; retrying");
                    complained = true;
                }
                Next::Pause(options.follower_retry)
            }
        };
        match next {
            Next::Pause(pause) => tokio::time::sleep(pause).await,
            Next::Wakeup => wait_for_wakeup(session, options).await,
        }
    }
}

/// What a leader or follower does after a step.
enum Next {
    Pause(Duration),
    /// Nothing to index: sleep until a write notifies (or the backstop poll).
    Wakeup,
}

/// One round: try the lock unless leading; drain the backlog if leading; record it.
async fn step(
    session: &mut ListeningSession,
    options: ReindexOptions,
    state: &ShardIndexState,
) -> Result<Next, tokio_postgres::Error> {
    let client = &session.client;
    if !state.leader.load(Ordering::Relaxed) {
        // Again at every try: a shard migrated since the session opened has the role now.
        client
            .batch_execute(&row_security::worker_session())
            .await?;
        let won: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&LEADER_LOCK])
            .await?
            .get(0);
        if won {
            client
                .batch_execute(&format!("LISTEN {WAKEUP_CHANNEL}"))
                .await?;
            state.leader.store(true, Ordering::Relaxed);
            tracing::info!("reindexer: this process now leads its shard's indexing");
        }
    }
    let next = if !state.leader.load(Ordering::Relaxed) {
        Next::Pause(options.follower_retry)
    } else if drain(client, options, state).await? {
        Next::Pause(Duration::ZERO)
    } else {
        // Armed first, then one more look: a marker committed before the arming is seen
        // now, one committed after it notifies.
        let pending: bool = client
            .query_one(
                "WITH armed AS (UPDATE search_wakeup SET armed = true WHERE NOT armed) \
                 SELECT EXISTS (SELECT 1 FROM search_pending)",
                &[],
            )
            .await?
            .get(0);
        if pending {
            Next::Pause(Duration::ZERO)
        } else {
            // Nothing pending is all `observe` would find: no statement for it. An idle
            // leader then costs its shard one statement per backstop poll.
            state.pending.store(0, Ordering::Relaxed);
            state.lag_ms.store(0, Ordering::Relaxed);
            state.analyzed_at.store(0, Ordering::Relaxed);
            return Ok(Next::Wakeup);
        }
    };
    observe(client, state).await?;
    Ok(next)
}

/// Sleeps until a write notifies (then a little longer, so that a burst is one batch) or
/// the backstop poll comes round.
async fn wait_for_wakeup(session: &mut ListeningSession, options: ReindexOptions) {
    let woken = tokio::time::timeout(options.idle_poll, session.notifications.recv()).await;
    if let Ok(Some(_)) = woken {
        tokio::time::sleep(options.debounce).await;
    }
    // Whatever else arrived meanwhile is covered by the coming batch.
    while session.notifications.try_recv().is_ok() {}
}

/// Indexes batches until the backlog is empty (false) or a one-second slice is used up
/// with work left (true), so that the lag figures stay fresh under a sustained burst.
/// Between batches it pauses so that batches take `options.duty` of the time.
async fn drain(
    client: &Client,
    options: ReindexOptions,
    state: &ShardIndexState,
) -> Result<bool, tokio_postgres::Error> {
    let started = Instant::now();
    let rest = (1.0 - options.duty) / options.duty;
    loop {
        let batch = Instant::now();
        let n: i32 = client
            .query_one("SELECT search_index_batch($1)", &[&options.batch_size])
            .await?
            .get(0);
        state.indexed.fetch_add(n as u64, Ordering::Relaxed);
        if n < options.batch_size {
            return Ok(false);
        }
        tokio::time::sleep(batch.elapsed().mul_f64(rest)).await;
        if started.elapsed() > Duration::from_secs(1) {
            return Ok(true);
        }
    }
}

/// A backlog this large, four times what it was at the last `ANALYZE`, is analyzed anew.
const ANALYZE_FROM: i64 = 1000;

/// Records the backlog and its age. A leader that sees the backlog jump (a move's delete
/// or copy marks a whole tenant at once) has `search_pending` analyzed: every session keeps
/// the plans it made for the table while it was nearly empty, and a plan that scans it per
/// row (the list's "waits for the index" check) takes hundreds of milliseconds once it holds
/// 100 000 markers, until autovacuum's own analyze, up to a minute later. An `ANALYZE`
/// invalidates those plans everywhere at once.
async fn observe(client: &Client, state: &ShardIndexState) -> Result<(), tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(since)) * 1000, 0)::float8 \
             FROM search_pending",
            &[],
        )
        .await?;
    let pending: i64 = row.get(0);
    state.pending.store(pending, Ordering::Relaxed);
    state
        .lag_ms
        .store(row.get::<_, f64>(1).max(0.0) as u64, Ordering::Relaxed);
    let analyzed_at = state.analyzed_at.load(Ordering::Relaxed);
    if !state.leader.load(Ordering::Relaxed) {
        return Ok(());
    }
    if pending >= ANALYZE_FROM && pending >= 4 * analyzed_at {
        client
            .batch_execute("SELECT _search_analyze_pending()")
            .await?;
        state.analyzed_at.store(pending, Ordering::Relaxed);
        tracing::info!(
            pending,
            "reindexer: the backlog jumped; search_pending analyzed"
        );
    } else if pending < analyzed_at / 4 {
        // Drained: the next jump is measured from here.
        state.analyzed_at.store(pending, Ordering::Relaxed);
    }
    Ok(())
}

impl MetricSource for IndexStates {
    fn record(&self) {
        for (shard, s) in &self.shards {
            let s = s.snapshot();
            let label = || ("shard", shard.clone());
            metrics::gauge!("search_index_lag_seconds", &[label()]).set(s.lag_ms as f64 / 1000.0);
            metrics::gauge!("search_index_pending", &[label()]).set(s.pending as f64);
            metrics::gauge!("search_reindexer_leader", &[label()])
                .set(f64::from(u8::from(s.leader_here)));
            metrics::counter!("search_indexed_rows_total", &[label()]).absolute(s.indexed_here);
        }
    }

    /// Per shard: backlog, lag, and whether this process leads its reindexing.
    fn actuator(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        let shards = self
            .shards
            .iter()
            .map(|(shard, s)| (shard.clone(), serde_json::json!(s.snapshot())))
            .collect();
        out.insert("search_index".to_owned(), serde_json::Value::Object(shards));
    }
}
