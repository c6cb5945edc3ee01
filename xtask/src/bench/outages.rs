//! Times what a shard1 tenant sees through nginx when shard1's primary is stopped and when
//! it is paused (a partition), on a compose stack of its own, and prints the figures the
//! outage table in docs/outages.md reports: the first request's status and time, the slowest
//! of the next 20 for a shard1 tenant and for a shard0 one, and how long until shard1's
//! tenant is served again once the primary is back. tests/stack/ asserts the targets.
//! Offline machines: build the stand-ins first (scripts/build-offline-images.sh and
//! scripts/build-offline-app-image.sh); they are used when present.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::bench::load;
use crate::compose::Stack;

/// On shard1 (the primary that goes away).
const AFFECTED: &str = "acme-corp";
/// On shard0 (its neighbour, which should not notice).
const NEIGHBOUR: &str = "hooli";
/// A primary back should serve within seconds; this long means it never will.
const SERVED_WITHIN: Duration = Duration::from_secs(300);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The port the stack's nginx is published on.
    #[arg(long, env = "BOOKMARKS_HTTP_PORT", default_value_t = 18080)]
    pub http_port: u16,
}

pub async fn run(args: Args) -> crate::Outcome {
    let stack = Stack::new("bookmarks-bench-outages", args.http_port).await?;
    load::interruptible(measure(&stack)).await?;
    Ok(ExitCode::SUCCESS)
}

/// How the primary goes away, and the compose command that brings it back.
const OUTAGES: [(&str, &str); 2] = [("stop", "start"), ("pause", "unpause")];

async fn measure(stack: &Stack) -> Result<()> {
    stack.up().await?;
    let affected = Tenant::new(stack, AFFECTED).await?;
    let neighbour = Tenant::new(stack, NEIGHBOUR).await?;
    // Warm each replica's pools and caches for both tenants.
    for tenant in [&affected, &neighbour] {
        let client = client()?;
        for _ in 0..4 {
            tenant.probe(&client).await;
        }
    }

    for (how, back) in OUTAGES {
        println!("== shard1 primary: docker compose {how}");
        // Whether it went as asked shows in the figures; the script ignored its exit too.
        let _ = stack.compose.try_run(&[how, "postgres-shard-1"]).await;
        let (status, seconds) = affected.probe(&client()?).await;
        println!("first shard1 request: {status} {seconds:.6}");
        // Each web replica notices by itself within about 5 s.
        tokio::time::sleep(Duration::from_secs(6)).await;
        println!(
            "later shard1 requests, slowest of 20: {}",
            affected.slowest(20).await?
        );
        println!(
            "shard0 requests, slowest of 20: {}",
            neighbour.slowest(20).await?
        );
        let _ = stack.compose.try_run(&[back, "postgres-shard-1"]).await;
        println!(
            "served again after {back}: {:.2} s",
            affected.until_served().await?.as_secs_f64()
        );
        stack.wait_served(Duration::from_secs(300)).await?;
    }
    Ok(())
}

/// The HTTP client of one sequence of probes: none starts with connections to nginx that
/// an earlier sequence opened before the outage.
fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .context("building an HTTP client")
}

/// A tenant with an API key of its own, listing its bookmarks through nginx.
struct Tenant {
    url: String,
    key: String,
}

impl Tenant {
    async fn new(stack: &Stack, name: &str) -> Result<Tenant> {
        Ok(Tenant {
            url: format!("{}/api/bookmarks", stack.base),
            key: stack
                .key_for(name)
                .await
                .with_context(|| format!("an API key for {name}"))?,
        })
    }

    /// One request: its status ("000" when none came back, as curl says) and seconds to
    /// the end of its body.
    async fn probe(&self, client: &reqwest::Client) -> (String, f64) {
        let started = Instant::now();
        let status = match client.get(&self.url).bearer_auth(&self.key).send().await {
            Ok(response) => {
                let status = response.status();
                match response.bytes().await {
                    Ok(_) => status.as_str().to_owned(),
                    Err(_) => "000".to_owned(),
                }
            }
            Err(_) => "000".to_owned(),
        };
        (status, started.elapsed().as_secs_f64())
    }

    /// The slowest of `n` requests, in ms, and their statuses with their counts.
    async fn slowest(&self, n: usize) -> Result<String> {
        let client = client()?;
        let mut worst_ms: f64 = 0.0;
        let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..n {
            let (status, seconds) = self.probe(&client).await;
            *statuses.entry(status).or_default() += 1;
            worst_ms = worst_ms.max(seconds * 1000.0);
        }
        let counted: String = statuses
            .iter()
            .map(|(status, count)| format!(" {status}×{count}"))
            .collect();
        Ok(format!("{worst_ms:.1} ms (statuses:{counted})"))
    }

    /// How long until a request is answered 200 again (an error after `SERVED_WITHIN`).
    async fn until_served(&self) -> Result<Duration> {
        let client = client()?;
        let started = Instant::now();
        while self.probe(&client).await.0 != "200" {
            if started.elapsed() > SERVED_WITHIN {
                bail!("{} was not answered 200 within {SERVED_WITHIN:?}", self.url);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(started.elapsed())
    }
}
