//! Circuit breakers, one per database server (each shard's primary and replica, and the
//! control database): once a server has shown that it does not answer, requests for it fail
//! at once instead of each paying a connect or query timeout of its own.
//!
//! A breaker opens on evidence that the *server* is unreachable: a connect that failed or
//! timed out, a pooled connection whose liveness check went unanswered, a statement that hit
//! its deadline, or the background liveness probe timing out. While it is open, one recovery
//! task at a time tries a fresh connection every [`RECOVERY_EVERY`]; the first that answers
//! `SELECT 1` closes it. Each transition is logged once.
//!
//! A false alarm (a statement that was merely slow on a live server) costs one connect: the
//! recovery probe runs at once and closes the breaker within milliseconds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use quanta::Instant;

use super::DbUrl;
use super::shard_set::{CheckoutError, PgConn, PgPool};

/// Pause between recovery attempts while a breaker is open.
pub const RECOVERY_EVERY: Duration = Duration::from_millis(500);

/// Which server of a shard (or the control database) a breaker guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
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
#[derive(Clone, Debug, serde::Serialize)]
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
        })
    }

    pub fn role(&self) -> Role {
        self.role
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
            trips: self.trips.load(Ordering::Relaxed),
        }
    }

    /// Checks a connection out of `pool`, this breaker's server's pool, opening the breaker
    /// when the failure says the server is unreachable.
    pub async fn checkout(self: &Arc<Self>, pool: &PgPool) -> Result<PgConn, CheckoutError> {
        let outcome = pool.get().await;
        if let Err(e) = &outcome
            && let Some(reason) = unreachable(e)
        {
            self.trip(reason);
        }
        outcome
    }

    /// A fresh connection (never a pooled one) that has answered `SELECT 1`, within the
    /// probe timeout.
    async fn connect(&self) -> Result<AsyncPgConnection, &'static str> {
        let attempt = async {
            let mut conn = AsyncPgConnection::establish(self.url.expose())
                .await
                .map_err(|_| "connect failed")?;
            ping(&mut conn).await?;
            Ok(conn)
        };
        tokio::time::timeout(self.probe_timeout, attempt)
            .await
            .unwrap_or(Err("connect timed out"))
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

    /// One liveness check on the monitor's own connection (opened on demand): a server that
    /// stops answering trips the breaker even when no request is waiting on it.
    async fn check(self: &Arc<Self>, session: &mut Option<AsyncPgConnection>) {
        if self.is_open() {
            // The recovery task owns the server until it answers; a session from before the
            // outage is not trusted.
            *session = None;
            return;
        }
        let outcome = match session.as_mut() {
            Some(conn) => tokio::time::timeout(self.probe_timeout, ping(conn))
                .await
                .unwrap_or(Err("liveness check timed out")),
            None => self.connect().await.map(|conn| {
                *session = Some(conn);
            }),
        };
        if let Err(reason) = outcome {
            *session = None;
            self.trip(reason);
        }
    }
}

/// Whether a failed checkout says the server itself is unreachable (as opposed to the pool
/// being busy): a connect that failed or timed out, or a pooled connection whose check went
/// unanswered. Returns the reason to trip with.
fn unreachable(e: &CheckoutError) -> Option<&'static str> {
    use deadpool::managed::{PoolError, TimeoutType};
    match e {
        PoolError::Timeout(TimeoutType::Create) => Some("connect timed out"),
        PoolError::Timeout(TimeoutType::Recycle) => Some("pooled connection check timed out"),
        PoolError::Backend(_) => Some("connect failed"),
        _ => None,
    }
}

async fn ping(conn: &mut AsyncPgConnection) -> Result<(), &'static str> {
    // Scoped: its `load` would shadow the atomics' above.
    use diesel_async::RunQueryDsl;
    diesel::sql_query("SELECT 1")
        .execute(conn)
        .await
        .map(drop)
        .map_err(|_| "liveness check failed")
}

/// Checks each breaker's server every `every` on a connection of its own, so that every web
/// replica notices a silent server within about `every` plus the probe timeout, whether or
/// not a request has been sent there.
pub fn spawn_liveness_monitor(
    breakers: Vec<Arc<Breaker>>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut sessions: Vec<Option<AsyncPgConnection>> = breakers.iter().map(|_| None).collect();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let checks = breakers
                .iter()
                .zip(sessions.iter_mut())
                .map(|(breaker, session)| breaker.check(session));
            futures::future::join_all(checks).await;
        }
    })
}
