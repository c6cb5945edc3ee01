//! `cargo xtask bench ready-flood`: what a flood of `/ready` costs a replica's databases
//! and its tenants. Not a test and not in CI: run it by hand to check that readiness stays
//! cheap to ask.
//!
//! It sets up the app as `bench request-path` does (a throwaway Postgres, one tenant,
//! `bookmarks serve` with the default READY_MAX_AGE_MS of 1 000), then, for each flood size,
//! measures a tenant's `GET /api/bookmarks/{id}` (wrk, 8 connections, `--duration`, with
//! its API key) three ways in one run: quiet; beside a flood of `/health` (the floor: the
//! same number of requests competing for the same cores, no database work); and beside a
//! flood of `/ready` on `--flood-conns` connections. It prints each flood's rate, the
//! tenant's p99 beside the quiet one, and how many probes the `/ready` flood caused
//! (`ready_probes_total`), which the cache holds to about one a second whatever the rate.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

use super::request_path::load::List;
use super::request_path::setup::{Options, Setup, SetupArgs};
use super::request_path::{or_interrupted, seconds_or_duration};
use crate::wrk;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub setup: SetupArgs,
    /// The floods' sizes: each is measured with this many connections.
    #[arg(long, env = "FLOOD_CONNS", default_value = "3 64")]
    pub flood_conns: List<u32>,
    /// Each measurement of the tenant's p99 (a bare number is seconds).
    #[arg(long, env = "DURATION", default_value = "10s", value_parser = seconds_or_duration)]
    pub duration: Duration,
}

pub async fn run(args: Args) -> crate::Outcome {
    or_interrupted(measure(args)).await
}

async fn measure(args: Args) -> crate::Outcome {
    crate::process::require(&[("wrk", "wrk")]).await?;
    let mut setup = Setup::start(Options {
        args: args.setup.clone(),
        keep: false,
        callgrind: None,
    })
    .await?;
    let tenant_url = format!("{}/api/bookmarks/{}", setup.app.url, setup.get_id);
    let auth = format!("Authorization: Bearer {}", setup.key);
    // The tenant's p99 over `duration`, as wrk measures it.
    let tenant_p99 = |duration: Duration| {
        let seconds = format!("-d{}s", duration.as_secs().max(1));
        let (auth, url) = (auth.clone(), tenant_url.clone());
        async move {
            let run = wrk::run(&["-t1", "-c8", &seconds, "--latency", "-H", &auth, &url]).await?;
            anyhow::Ok(
                run.p99_ms
                    .map_or_else(|| "-".to_owned(), |p| format!("{p:.2}ms")),
            )
        }
    };
    // A warm-up: connections, caches, the key check's.
    wrk::run(&["-t1", "-c8", "-d3s", "-H", &auth, &tenant_url]).await?;

    println!(
        "{:<7} {:<8} {:>12} {:>12} {:>12} {:>8}",
        "conns", "flood", "flood_rps", "tenant_p99", "quiet_p99", "probes"
    );
    for &conns in &args.flood_conns.0 {
        let quiet = tenant_p99(args.duration).await?;
        for path in ["health", "ready"] {
            let before = probes(&setup).await?;
            let flood_url = format!("{}/{path}", setup.app.url);
            let flood_args = [
                "-t1".to_owned(),
                format!("-c{}", conns.max(1)),
                format!("-d{}s", args.duration.as_secs().max(1) + 1),
                flood_url,
            ];
            // The flood outlasts the tenant's measurement, which starts once it is going.
            let flood = tokio::spawn(async move {
                let args: Vec<&str> = flood_args.iter().map(String::as_str).collect();
                wrk::run(&args).await
            });
            tokio::time::sleep(Duration::from_millis(500)).await;
            let p99 = tenant_p99(args.duration).await?;
            let flood = flood.await.context("the flood's wrk")??;
            let caused = probes(&setup).await? - before;
            println!(
                "{:<7} {:<8} {:>12.2} {:>12} {:>12} {:>8}",
                conns,
                format!("/{path}"),
                flood.requests_per_sec,
                p99,
                quiet,
                caused
            );
        }
    }
    setup.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// `ready_probes_total` of the app's /metrics (0 before the first probe).
async fn probes(setup: &Setup) -> Result<i64> {
    let url = format!("{}/metrics", setup.app.url);
    let text = reqwest::get(&url)
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("GET {url}"))?
        .text()
        .await
        .with_context(|| format!("GET {url}"))?;
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix("ready_probes_total "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    Ok(value as i64)
}
