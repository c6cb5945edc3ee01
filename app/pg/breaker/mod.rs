//! Circuit breakers, one per database server (each shard's primary and replica, and the
//! control database): once a server has shown that it does not answer, requests for it fail
//! at once instead of each paying a connect or query timeout of its own.
//!
//! A breaker opens on evidence that the *server* is silent, not merely slow: a connect that
//! failed, a connect or pooled connection check that timed out while the server answered
//! nothing else either, a statement that passed its deadline in the same silence, or
//! the background liveness check failing (a refused connection at once, a timeout twice in
//! a row with no other answer meanwhile). While it is open, one recovery task at a time
//! tries a fresh connection every [`RECOVERY_EVERY`]; the first that answers `SELECT 1`
//! closes it. Each transition is logged once.
//!
//! Every answer from a server (a statement that completed, a liveness or recovery check)
//! is noted, so that a wait can tell "the server is busy" (it answers others: a lock
//! wait, a heavy load) from "the server is gone" (it answers nobody).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use quanta::Instant;

use super::db_url::DbUrl;
use super::pool::{CheckoutError, PgConn, PgPool};

/// Pause between recovery attempts while a breaker is open.
pub const RECOVERY_EVERY: Duration = Duration::from_millis(500);

/// Timed-out liveness checks in a row (with no other answer from the server meanwhile)
/// that open the breaker: one slow check on a loaded machine is not silence.
const LIVENESS_MISSES: u32 = 2;

/// Which server of a shard (or the control database) a breaker guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Primary,
    Replica,
    Control,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
            Role::Control => "control",
        }
    }
}

/// A breaker's state for health, metrics and the admin page.
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct BreakerSnapshot {
    pub role: Role,
    pub open: bool,
    /// How long it has been open.
    pub open_for_ms: Option<u64>,
    /// Why it opened (a kind of failure, never driver text).
    pub reason: Option<&'static str>,
    /// How many times it has opened since the process started.
    pub trips: u64,
}

struct Opened {
    at: Instant,
    reason: &'static str,
}

/// One server's breaker. Share it in an `Arc`: opening it may spawn its recovery task.
pub struct Breaker {
    /// For logs: "shard shard1 primary", "control database".
    target: String,
    role: Role,
    url: DbUrl,
    /// Bound on one recovery or liveness attempt (connect plus `SELECT 1`).
    probe_timeout: Duration,
    open: AtomicBool,
    opened: Mutex<Option<Opened>>,
    recovering: AtomicBool,
    trips: AtomicU64,
    /// `last_answer_ns` counts from here.
    born: Instant,
    /// When the server last answered anything, in nanoseconds since `born`.
    last_answer_ns: AtomicU64,
}

/// Why one check of a server failed.
enum Miss {
    /// The server refused or broke the connection: it is down.
    Failed(&'static str),
    /// No answer in time: silent, or only slow.
    TimedOut(&'static str),
}

impl Miss {
    fn reason(&self) -> &'static str {
        match self {
            Miss::Failed(r) | Miss::TimedOut(r) => r,
        }
    }
}

/// The liveness monitor's state for one server.
#[derive(Default)]
struct Liveness {
    session: Option<AsyncPgConnection>,
    misses: u32,
}

impl Breaker {
    pub fn new(target: String, role: Role, url: DbUrl, probe_timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            target,
            role,
            url,
            probe_timeout,
            open: AtomicBool::new(false),
            opened: Mutex::new(None),
            recovering: AtomicBool::new(false),
            trips: AtomicU64::new(0),
            born: Instant::now(),
            last_answer_ns: AtomicU64::new(0),
        })
    }

    /// Notes that the server answered (a statement completed, a check succeeded).
    pub fn answered(&self) {
        let at = Instant::now()
            .saturating_duration_since(self.born)
            .as_nanos() as u64;
        self.last_answer_ns.fetch_max(at, Ordering::Relaxed);
    }

    /// Whether the server has answered anything since `since`.
    pub fn answered_since(&self, since: Instant) -> bool {
        let since = since.saturating_duration_since(self.born).as_nanos() as u64;
        self.last_answer_ns.load(Ordering::Relaxed) >= since
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// Bound on one check of the server (connect plus a statement).
    pub fn probe_timeout(&self) -> Duration {
        self.probe_timeout
    }

    /// How many times it has opened since the process started.
    pub fn trips(&self) -> u64 {
        self.trips.load(Ordering::Relaxed)
    }

    /// Lock-free: the request path asks this on every checkout.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Opens the breaker (if it was closed) and makes sure a recovery task is running.
    /// `reason` is a short kind of failure; it is shown to operators, never driver text.
    pub fn trip(self: &Arc<Self>, reason: &'static str) {
        if !self.open.swap(true, Ordering::AcqRel) {
            self.trips.fetch_add(1, Ordering::Relaxed);
            *self.opened.lock().unwrap_or_else(|p| p.into_inner()) = Some(Opened {
                at: Instant::now(),
                reason,
            });
            tracing::warn!(
                target_db = %self.target,
                reason,
                "circuit opened: requests for this server fail at once until a probe connects"
            );
        }
        self.spawn_recovery();
    }

    fn close(&self) {
        if self.open.swap(false, Ordering::AcqRel) {
            let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner()).take();
            let open_ms = opened.map(|o| o.at.elapsed().as_millis()).unwrap_or(0);
            tracing::info!(
                target_db = %self.target,
                open_ms,
                "circuit closed: the server answers again"
            );
        }
    }

    pub fn snapshot(&self) -> BreakerSnapshot {
        let opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        let open = self.is_open();
        BreakerSnapshot {
            role: self.role,
            open,
            open_for_ms: opened
                .as_ref()
                .filter(|_| open)
                .map(|o| o.at.elapsed().as_millis() as u64),
            reason: opened.as_ref().filter(|_| open).map(|o| o.reason),
            trips: self.trips(),
        }
    }

    /// Whether `miss`, begun at `began`, says the server is silent: a failure always does, a
    /// timeout only when the server answered nothing else meanwhile (slow, not silent).
    fn silent(&self, miss: &Miss, began: Instant) -> bool {
        match miss {
            Miss::Failed(_) => true,
            Miss::TimedOut(_) => !self.answered_since(began),
        }
    }

    /// Checks a connection out of `pool`, this breaker's server's pool, opening the breaker
    /// when the failure says the server is unreachable. A refused connection is enough; a
    /// timed-out one only when the server answered nothing else meanwhile, because a server
    /// under heavy load can take longer than the connect timeout to start a session while
    /// it still serves everyone already connected.
    pub async fn checkout(self: &Arc<Self>, pool: &PgPool) -> Result<PgConn, CheckoutError> {
        let began = Instant::now();
        let outcome = pool.get().await;
        if let Err(e) = &outcome
            && let Some(miss) = unreachable(e)
            && self.silent(&miss, began)
        {
            self.trip(miss.reason());
        }
        outcome
    }

    /// A fresh connection (never a pooled one) that has answered `SELECT 1`, within the
    /// probe timeout.
    async fn connect(&self) -> Result<AsyncPgConnection, Miss> {
        let attempt = async {
            let mut conn = AsyncPgConnection::establish(self.url.expose())
                .await
                .map_err(|_| Miss::Failed("connect failed"))?;
            ping(&mut conn).await?;
            Ok(conn)
        };
        let outcome = tokio::time::timeout(self.probe_timeout, attempt)
            .await
            .unwrap_or(Err(Miss::TimedOut("connect timed out")));
        if outcome.is_ok() {
            self.answered();
        }
        outcome
    }

    /// One recovery task per open breaker: retries a fresh connection until one answers.
    fn spawn_recovery(self: &Arc<Self>) {
        if self.recovering.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.recovering.store(false, Ordering::Release);
            return;
        };
        let this = Arc::clone(self);
        runtime.spawn(async move {
            loop {
                let started = tokio::time::Instant::now();
                if this.connect().await.is_ok() {
                    this.close();
                    break;
                }
                tokio::time::sleep_until(started + RECOVERY_EVERY).await;
            }
            this.recovering.store(false, Ordering::Release);
            // A trip that raced with the close must not be left without a recovery task.
            if this.is_open() {
                this.spawn_recovery();
            }
        });
    }
}

/// One liveness check of a server, for every closed breaker that guards it, on the
/// monitor's own connection (opened on demand through the first of them): a server that
/// stops answering trips them even when no request is waiting on it. Open breakers are
/// their recovery tasks' until the server answers again.
async fn check_server(breakers: &[Arc<Breaker>], live: &mut Liveness) {
    let closed: Vec<&Arc<Breaker>> = breakers.iter().filter(|b| !b.is_open()).collect();
    let Some(first) = closed.first() else {
        // A session from before the outage is not trusted.
        *live = Liveness::default();
        return;
    };
    let began = Instant::now();
    let outcome = match live.session.as_mut() {
        Some(conn) => tokio::time::timeout(first.probe_timeout, ping(conn))
            .await
            .unwrap_or(Err(Miss::TimedOut("liveness check timed out"))),
        None => first.connect().await.map(|conn| {
            live.session = Some(conn);
        }),
    };
    let Err(miss) = outcome else {
        live.misses = 0;
        closed.iter().for_each(|b| b.answered());
        return;
    };
    live.session = None;
    // Silent only if the server answered none of the shards it holds meanwhile.
    if !closed.iter().all(|b| b.silent(&miss, began)) {
        live.misses = 0;
        return;
    }
    // A refused connection is proof at once; a silent timeout only when it repeats.
    let proven = match miss {
        Miss::Failed(_) => true,
        Miss::TimedOut(_) => {
            live.misses += 1;
            live.misses >= LIVENESS_MISSES
        }
    };
    if proven {
        live.misses = 0;
        closed.iter().for_each(|b| b.trip(miss.reason()));
    }
}

/// Whether a failed checkout says the server itself is unreachable (as opposed to the pool
/// being busy): a connect that failed or timed out, or a pooled connection whose check went
/// unanswered.
fn unreachable(e: &CheckoutError) -> Option<Miss> {
    use deadpool::managed::{PoolError, TimeoutType};
    match e {
        PoolError::Timeout(TimeoutType::Create) => Some(Miss::TimedOut("connect timed out")),
        PoolError::Timeout(TimeoutType::Recycle) => {
            Some(Miss::TimedOut("pooled connection check timed out"))
        }
        PoolError::Backend(_) => Some(Miss::Failed("connect failed")),
        _ => None,
    }
}

async fn ping(conn: &mut AsyncPgConnection) -> Result<(), Miss> {
    // Scoped: its `load` would shadow the atomics' above.
    use diesel_async::RunQueryDsl;
    diesel::sql_query("SELECT 1")
        .execute(conn)
        .await
        .map(drop)
        .map_err(|_| Miss::Failed("liveness check failed"))
}

/// Checks each server every `every` on a connection of its own, so that every web replica
/// notices a silent server by itself, whether or not a request has been sent there: within
/// two checks (each `every` plus the probe timeout) when nothing else answers. One check
/// and one session per server (`host:port`), however many of its databases have breakers:
/// silence is the server's, and a fleet of logical shards on a few servers must not cost a
/// session and a query a second for each shard.
pub fn spawn_liveness_monitor(
    breakers: Vec<Arc<Breaker>>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    let servers = by_server(breakers);
    tokio::spawn(async move {
        let mut live: Vec<Liveness> = servers.iter().map(|_| Liveness::default()).collect();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let checks = servers
                .iter()
                .zip(live.iter_mut())
                .map(|(group, live)| check_server(group, live));
            futures::future::join_all(checks).await;
        }
    })
}

/// The breakers of each server (`host:port`), in the order the servers first appear.
fn by_server(breakers: Vec<Arc<Breaker>>) -> Vec<Vec<Arc<Breaker>>> {
    let mut servers: Vec<(String, Vec<Arc<Breaker>>)> = Vec::new();
    for breaker in breakers {
        let server = breaker.url.server();
        match servers.iter_mut().find(|(s, _)| *s == server) {
            Some((_, group)) => group.push(breaker),
            None => servers.push((server, vec![breaker])),
        }
    }
    servers.into_iter().map(|(_, group)| group).collect()
}

#[cfg(test)]
mod tests;
