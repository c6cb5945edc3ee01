//! How a server is run, as opposed to what it talks to
//! ([`Settings`](crate::configuration::Settings)): its address and name, its bounds and
//! timings, its secrets, and which background work it does.

use std::net::SocketAddr;
use std::time::Duration;

use crate::admin::AdminToken;
use crate::configuration::secret::Secret;
use crate::jobs::worker::WorkerOptions;
use crate::search::reindexer::ReindexOptions;

/// Far more than the pools can serve at once (each request beyond them waits in a pool's
/// queue), and a bound on what a flood can pile up.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// See [`ServeOptions::ready_max_age`]: a probe a second at most per replica, however
/// often `/ready` is asked, and a state change shows within a second.
pub const DEFAULT_READY_MAX_AGE: Duration = Duration::from_secs(1);

/// See [`ServeOptions::drain`]: nginx's upstream `keepalive_timeout` is 2 s.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(3);

/// How the server is run (as opposed to what it talks to, which is
/// [`Settings`](crate::configuration::Settings)).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind; port 0 picks a free port (tests).
    pub bind: SocketAddr,
    /// Returned as `X-Served-By`.
    pub instance_name: String,
    /// Apply pending migrations before serving.
    pub migrate: bool,
    /// Bound on one shard's part of a fan-out or a readiness probe.
    pub shard_timeout: Duration,
    /// How long a readiness probe's report answers `/ready` (0: every call probes).
    pub ready_max_age: Duration,
    /// Bound on a whole request, and on how long a stopping replica waits for the requests
    /// it has.
    pub request_timeout: Duration,
    /// How long a stopping replica keeps serving, not ready and closing each connection
    /// after its response, before it refuses new connections ([`crate::web::drain`]).
    /// Longer than the proxy's upstream `keepalive_timeout` (nginx/default.conf).
    pub drain: Duration,
    /// Requests this process works on at once, at most; more are answered 503 at once.
    pub max_in_flight: usize,
    /// How often replica readiness is re-checked in the background.
    pub replica_check_interval: Duration,
    /// How often every database server's liveness is checked, so that a server that goes
    /// silent opens its breaker even before a request is sent to it.
    pub liveness_interval: Duration,
    /// Mounts the admin page, for whoever presents this token (unset: no admin page).
    pub admin_token: Secret<AdminToken>,
    /// Signs the UI's session cookies; every replica behind one site needs the same. Unset:
    /// a random secret of this process's own (sessions then work on this process only).
    pub session_secret: Secret<Vec<u8>>,
    /// Run the background work (a reindexer per shard, a job worker, the change feed's
    /// purge) in this process.
    pub background: bool,
    pub reindex: ReindexOptions,
    pub jobs: WorkerOptions,
    /// Pause between the change feed's tombstone purges of one shard.
    pub feed_purge_every: Duration,
    /// Serve even when shard connections act as a superuser or a role that bypasses
    /// row-level security (the tenant policies then hold nothing back).
    pub allow_superuser: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([0, 0, 0, 0], 3000)),
            instance_name: "bookmarks".to_owned(),
            migrate: false,
            shard_timeout: Duration::from_millis(1500),
            ready_max_age: DEFAULT_READY_MAX_AGE,
            request_timeout: Duration::from_secs(10),
            drain: DEFAULT_DRAIN,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            replica_check_interval: Duration::from_secs(2),
            liveness_interval: Duration::from_secs(1),
            admin_token: Secret::Unset,
            session_secret: Secret::Unset,
            background: true,
            reindex: ReindexOptions::default(),
            jobs: WorkerOptions::default(),
            feed_purge_every: Duration::from_secs(600),
            allow_superuser: false,
        }
    }
}
