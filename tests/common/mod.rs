//! Helpers every test binary that starts servers shares: unique names, free ports, and
//! waiting for a condition with a bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A unique suffix for names in this process.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A free loopback port, so a stopped-and-restarted server keeps its address.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `check` every 200 ms until it returns true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually_every(Duration::from_millis(200), within, check).await
}

/// Polls `check` every `pace` until it returns true or `within` passes: for a test that
/// times what it waits for, at a finer grain than [`eventually`].
pub async fn eventually_every<F, Fut>(pace: Duration, within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(pace).await;
    }
}
