//! The app's answers the fleet benchmark times or reads: the readiness probes its metrics
//! count, and the fan-out pages (the admin page, /api/stats) that ask every shard.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// `ready_probes_total` of the app's metrics.
pub async fn ready_probes(http: &reqwest::Client, app: &str) -> Result<f64> {
    let metrics = http
        .get(format!("{app}/metrics"))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .context("GET /metrics")?
        .text()
        .await
        .context("GET /metrics")?;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("ready_probes_total "))
        .and_then(|value| value.trim().parse().ok())
        .context("no ready_probes_total in /metrics")
}

/// `admin_page=… stats=…`: the admin page and /api/stats, the slowest of 5 asks each.
pub async fn fanout(http: &reqwest::Client, admin_token: &str, app: &str) -> String {
    format!(
        "admin_page={} stats={}",
        slowest_of_5(http, admin_token, &format!("{app}/admin")).await,
        slowest_of_5(http, admin_token, &format!("{app}/api/stats")).await
    )
}

/// `N ms (STATUS)`: the slowest of 5 answers (body included), and the last one's status
/// (000 when there was no answer).
async fn slowest_of_5(http: &reqwest::Client, admin_token: &str, url: &str) -> String {
    let mut slowest = Duration::ZERO;
    let mut status = String::new();
    for _ in 0..5 {
        let started = Instant::now();
        status = match http.get(url).bearer_auth(admin_token).send().await {
            Ok(answer) => {
                let code = answer.status().as_u16().to_string();
                let _ = answer.bytes().await;
                code
            }
            Err(_) => "000".to_owned(),
        };
        slowest = slowest.max(started.elapsed());
    }
    format!("{:.0} ms ({status})", slowest.as_secs_f64() * 1000.0)
}
