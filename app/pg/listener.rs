//! The control listener: one LISTEN connection per process, outside the pool, that keeps
//! the caches of control-database answers honest (the directory's, the API keys').
//!
//! Each cache listens on its table's channel; every notification evicts the changed key
//! (an empty payload, sent on TRUNCATE, flushes all). Postgres does not queue notifications
//! for a listener that is gone, so after any (re)connect every cache is flushed once LISTEN
//! is in place: whatever changed in between is then looked up afresh. A connection that
//! silently stops answering (a frozen server, a network split) is caught by a periodic ping.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::db_url::{DbUrl, SessionError};

/// `application_name` of the listener's session, to find it in `pg_stat_activity`.
pub const APPLICATION_NAME: &str = "bookmarks-directory-listener";

/// A cache a control table's notifications invalidate.
pub trait Invalidated: Send + Sync {
    /// The channel its table's trigger notifies on.
    fn channel(&self) -> &'static str;
    /// The answer for `key` (a notification's payload) changed.
    fn evict(&self, key: &str);
    /// Changes may have been missed: forget everything.
    fn flush(&self);
    /// Whether notifications are arriving, for health and metrics.
    fn set_listener_connected(&self, connected: bool);
}
const PING_EVERY: Duration = Duration::from_secs(5);
const PING_TIMEOUT: Duration = Duration::from_secs(2);
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Keeps `caches` invalidated from the control database at `url` until aborted.
pub fn spawn(
    caches: Vec<Arc<dyn Invalidated>>,
    url: DbUrl,
    connect_timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move { run(&caches, &url, connect_timeout).await })
}

async fn run(caches: &[Arc<dyn Invalidated>], url: &DbUrl, connect_timeout: Duration) {
    let channels: Vec<&str> = caches.iter().map(|c| c.channel()).collect();
    let mut retry = FIRST_RETRY;
    let mut ever_connected = false;
    let mut failure_logged = false;
    loop {
        match Session::open(url, &channels, connect_timeout).await {
            Ok(mut session) => {
                // LISTEN is in place, so nothing from here on is missed; what happened
                // before is unknown.
                for cache in caches {
                    cache.flush();
                    cache.set_listener_connected(true);
                }
                if ever_connected {
                    tracing::info!("control listener reconnected; caches flushed");
                } else {
                    tracing::info!(channels = ?channels, "control listener connected");
                }
                ever_connected = true;
                failure_logged = false;
                retry = FIRST_RETRY;
                let why = session.serve(caches).await;
                for cache in caches {
                    cache.set_listener_connected(false);
                }
                tracing::warn!(
                    reason = %why,
                    "control listener disconnected: cached answers serve until their TTL; reconnecting"
                );
            }
            Err(e) => {
                if !failure_logged && !ever_connected {
                    tracing::warn!(error = %e, "control listener cannot connect yet; retrying");
                } else {
                    tracing::debug!(error = %e, "control listener: reconnect failed");
                }
                failure_logged = true;
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// Why a LISTEN session could not be opened (it is tried again).
#[derive(Debug, thiserror::Error)]
enum ListenError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("LISTEN failed: {0}")]
    Listen(tokio_postgres::Error),
    #[error("LISTEN not answered within {0:?}")]
    ListenTimeout(Duration),
}

/// One LISTEN session: a client for pings and a task that drives the connection and
/// forwards notifications as (channel, payload).
struct Session {
    client: tokio_postgres::Client,
    payloads: mpsc::UnboundedReceiver<(String, String)>,
    driver: tokio::task::JoinHandle<Option<tokio_postgres::Error>>,
}

impl Session {
    async fn open(
        url: &DbUrl,
        channels: &[&str],
        connect_timeout: Duration,
    ) -> Result<Self, ListenError> {
        let opened = url
            .connect_listening_session(APPLICATION_NAME, connect_timeout)
            .await?;
        let session = Self {
            client: opened.client,
            payloads: opened.notifications,
            driver: opened.driver,
        };
        let listen: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
        match tokio::time::timeout(PING_TIMEOUT, session.client.batch_execute(&listen)).await {
            Ok(Ok(())) => Ok(session),
            Ok(Err(e)) => Err(ListenError::Listen(e)),
            Err(_) => Err(ListenError::ListenTimeout(PING_TIMEOUT)),
        }
    }

    /// Applies notifications until the connection is lost; returns why it ended.
    async fn serve(&mut self, caches: &[Arc<dyn Invalidated>]) -> String {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                payload = self.payloads.recv() => match payload {
                    Some((channel, key)) => {
                        for cache in caches.iter().filter(|c| c.channel() == channel) {
                            if key.is_empty() {
                                cache.flush();
                            } else {
                                cache.evict(&key);
                            }
                        }
                    }
                    None => {
                        return match (&mut self.driver).await {
                            Ok(Some(e)) => e.to_string(),
                            _ => "connection closed".to_owned(),
                        };
                    }
                },
                _ = ping.tick() => {
                    match tokio::time::timeout(PING_TIMEOUT, self.client.simple_query("")).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return format!("ping failed: {e}"),
                        Err(_) => return format!("no answer to a ping within {PING_TIMEOUT:?}"),
                    }
                }
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
