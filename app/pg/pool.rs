//! Connection pools: one per database server, built lazily, every wait bounded.
//!
//! The types every other part of the sharding layer names a pooled connection by live here,
//! below the breakers and the shard set that use them.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use deadpool::Runtime;
use deadpool::managed::{Manager, Metrics, Pool, PoolError, RecycleResult, Timeouts};
use diesel::ConnectionError;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError as ConnectError, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

use super::db_url::DbUrl;

/// A pool of connections to one Postgres server.
pub type PgPool = Pool<PgManager>;
/// A connection checked out of a [`PgPool`]; derefs to [`Pooled`], which derefs to
/// `AsyncPgConnection`.
pub type PgConn = deadpool::managed::Object<PgManager>;

/// A pooled connection, and the session statement it last ran (see [`Pooled::settle`]).
pub struct Pooled {
    conn: AsyncPgConnection,
    /// The last statement [`Pooled::settle`] ran on this connection, while it is known to
    /// hold: session-level settings stay until something changes them.
    settled: Option<String>,
}

impl Pooled {
    /// Runs `sql`, a statement of session-level settings, unless it is the one this
    /// connection ran last: a checkout that needs the settings its connection already has
    /// costs no round trip. Every statement that changes session settings on a pooled
    /// connection must go through here (or call [`Pooled::unsettle`]), or a later checkout
    /// would trust settings that no longer hold.
    ///
    /// Run outside any transaction: a rolled-back transaction takes its settings with it.
    pub async fn settle(&mut self, sql: &str) -> diesel::QueryResult<()> {
        if self.settled.as_deref() == Some(sql) {
            return Ok(());
        }
        // Unknown until the server says it is done (an error, or a cut-off, leaves it so).
        self.settled = None;
        self.conn.batch_execute(sql).await?;
        self.settled = Some(sql.to_owned());
        Ok(())
    }

    /// Forgets what [`Pooled::settle`] ran: session settings were changed some other way.
    pub fn unsettle(&mut self) {
        self.settled = None;
    }
}

impl Deref for Pooled {
    type Target = AsyncPgConnection;
    fn deref(&self) -> &AsyncPgConnection {
        &self.conn
    }
}

impl DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        &mut self.conn
    }
}

/// What a check does with its connection once it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCheck {
    /// Back to the pool: a check that runs often, on a pool that stays in use.
    Return,
    /// Closed instead of handed back: a check that runs rarely (at start-up, readiness's
    /// full check of a shard) must not keep an idle shard's pool open until the idle
    /// reaper comes by.
    Close,
}

impl AfterCheck {
    /// Done with `conn`: back to its pool, or closed.
    pub fn done_with(self, conn: PgConn) {
        if self == AfterCheck::Close {
            drop(deadpool::managed::Object::take(conn));
        }
    }
}

/// diesel-async's manager, with each connection's settled statement beside it.
pub struct PgManager(AsyncDieselConnectionManager<AsyncPgConnection>);

impl Manager for PgManager {
    type Type = Pooled;
    type Error = ConnectError;

    async fn create(&self) -> Result<Pooled, ConnectError> {
        Ok(Pooled {
            conn: self.0.create().await?,
            settled: None,
        })
    }

    async fn recycle(&self, obj: &mut Pooled, metrics: &Metrics) -> RecycleResult<ConnectError> {
        self.0.recycle(&mut obj.conn, metrics).await
    }
}
/// Why a checkout failed (timeout, connection refused, …).
pub type CheckoutError = PoolError<ConnectError>;

/// How long a pool's connections may take: the waits every checkout is bounded by, and the
/// `statement_timeout` each connection sets on its server.
#[derive(Debug, Clone, Copy)]
pub struct PoolBounds {
    pub statement_timeout: Duration,
    pub acquire_timeout: Duration,
    pub connect_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot build the connection pool for {target}: {message}")]
pub struct PoolBuildError {
    pub target: String,
    pub message: String,
}

/// Closes, every so often, the connections of `pools` that have sat unused for `idle`: a
/// pool grows to what its busiest moment needed, and without this it would keep that many
/// connections open on its server for good, for every shard, whether this process still
/// serves the shard or not. A connection in use is not in the pool and is never closed here.
pub fn spawn_idle_reaper(pools: Vec<PgPool>, idle: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval((idle / 2).max(Duration::from_millis(50)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for pool in &pools {
                // Dropping what it removed closes those connections.
                drop(pool.retain(|_, used| used.last_used() < idle));
            }
        }
    })
}

/// A lazily connecting pool whose every wait is bounded, so a dead server costs a request
/// `connect_timeout` rather than the operating system's TCP timeout.
///
/// Checkouts do not ping (`RecyclingMethod::Fast`). A connection whose server closed it is
/// still never handed out (the driver sees the socket close), and the ping would not help
/// with a *silent* server: it would wait out the recycle timeout on every idle connection
/// in turn before giving up, several seconds per request. Silence is caught instead by the
/// query deadline and the circuit breakers ([`super::breaker`]). It also saves a round
/// trip on every checkout.
///
/// Every connection it opens sets `statement_timeout` (`[database] statement_timeout_ms`):
/// the server's own bound, which also ends a statement whose client went away while the
/// server was unreachable (a cancel request cannot reach a server that is partitioned);
/// then `on_connect`, if given, in the same round trip.
pub fn build_pool(
    url: &DbUrl,
    size: u32,
    bounds: PoolBounds,
    target: &str,
    on_connect: Option<&str>,
) -> Result<PgPool, PoolBuildError> {
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    let mut set_timeout = format!(
        "SET statement_timeout = {}",
        bounds.statement_timeout.as_millis()
    );
    if let Some(sql) = on_connect {
        set_timeout.push_str("; ");
        set_timeout.push_str(sql);
    }
    config.custom_setup = Box::new(move |url| {
        let set_timeout = set_timeout.clone();
        Box::pin(async move {
            let mut conn = AsyncPgConnection::establish(url).await?;
            conn.batch_execute(&set_timeout)
                .await
                .map_err(|e| ConnectionError::BadConnection(e.to_string()))?;
            Ok(conn)
        })
    });
    let manager = PgManager(AsyncDieselConnectionManager::new_with_config(
        url.expose(),
        config,
    ));
    Pool::builder(manager)
        .max_size(size as usize)
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: Some(bounds.acquire_timeout),
            create: Some(bounds.connect_timeout),
            recycle: Some(bounds.connect_timeout.min(Duration::from_secs(2))),
        })
        .build()
        .map_err(|e| PoolBuildError {
            target: target.to_owned(),
            message: e.to_string(),
        })
}
