//! `cargo xtask bench instructions`: instructions per request, counted by callgrind: a
//! figure that, unlike requests/s on a shared 2-core machine, does not move from run to run
//! (the same build gives the same count to within a fraction of a percent). Not a test and
//! not in CI: run it by hand to compare builds (`--app-bin` measures another one).
//!
//! It sets everything up as `bench request-path` does (a throwaway Postgres, one tenant of
//! `--rows` bookmarks, the app, the same app in trusted_header mode, and the bare handler),
//! with all three servers running under `valgrind --tool=callgrind`. For each server it
//! sends `--requests` warm-up `GET /api/bookmarks/{id}` (`--endpoint list`:
//! `GET /api/bookmarks`) over four keep-alive connections, zeroes the counters, sends as
//! many again (each with the tenant's API key: the app checks it, from its cache after the
//! first; with `--token`, each also carries that X-Consistency-Token), and prints the
//! user-space instructions per request (background work that runs meanwhile, such as the
//! liveness checks, is counted too, as it is in every run). `--keep DIR` keeps each
//! server's profile there, for callgrind_annotate.
//!
//! Needs what `bench request-path` needs, plus valgrind (installed with apt-get as root).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

use super::request_path::or_interrupted;
use super::request_path::setup::{Options, Served, Setup, SetupArgs, TENANT};
use crate::process::output;

/// Which request is counted.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /api/bookmarks/{id}`.
    Get,
    /// `GET /api/bookmarks` (the newest 20).
    List,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Requests counted per server (as many again warm it up).
    #[arg(long, env = "REQUESTS", default_value_t = 2000)]
    pub requests: u64,
    /// The request to count.
    #[arg(long, env = "ENDPOINT", value_enum, default_value = "get")]
    pub endpoint: Endpoint,
    /// Keep each server's profile in this directory, for callgrind_annotate.
    #[arg(long, env = "KEEP", value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Send this X-Consistency-Token with every request (what the token check costs).
    #[arg(long, env = "TOKEN")]
    pub token: Option<String>,
}

pub async fn run(args: Args) -> crate::Outcome {
    or_interrupted(measure(args)).await
}

async fn measure(args: Args) -> crate::Outcome {
    if args.requests < 4 {
        bail!("--requests must be at least 4 (they go over four connections)");
    }
    crate::process::require(&[("valgrind", "valgrind"), ("callgrind_control", "valgrind")]).await?;
    let profiles = tempfile::Builder::new()
        .prefix("count-instructions.")
        .tempdir_in("/tmp")
        .context("cannot create a temporary directory in /tmp")?;
    let options = Options {
        args: args.setup.clone(),
        keep: false,
        callgrind: Some(profiles.path().to_path_buf()),
    };
    let mut setup = Setup::start(options).await?;
    let servers: [(&str, &Served); 3] = [
        ("bare", &setup.bare),
        ("app, no key (trusted_header)", &setup.trusted),
        ("app, API key", &setup.app),
    ];
    for (name, served) in servers {
        let total = count(&setup, served, &args, profiles.path())
            .await
            .with_context(|| format!("counting {name}"))?;
        let endpoint = match args.endpoint {
            Endpoint::Get => "get",
            Endpoint::List => "list",
        };
        println!(
            "{name}: {} instructions per {endpoint} ({} over {})",
            total.profile_total / args.requests,
            total.profile_total,
            args.requests
        );
        if let Some(dir) = &args.keep {
            let file = dir.join(format!("{}.out", file_name(name)));
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::copy(&total.profile, &file)
                .with_context(|| format!("cannot copy the profile to {}", file.display()))?;
        }
    }
    setup.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// One server's count and the profile it was read from.
struct Count {
    profile_total: u64,
    profile: PathBuf,
}

/// Warms the server up, zeroes its counters, sends the counted requests and dumps.
async fn count(setup: &Setup, served: &Served, args: &Args, profiles: &Path) -> Result<Count> {
    let pid = served.pid.to_string();
    requests(setup, served, args).await?;
    output(Command::new("callgrind_control").args(["-z", &pid])).await?;
    requests(setup, served, args).await?;
    output(Command::new("callgrind_control").args(["-d", &pid])).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let profile = newest_profile(profiles, &pid)?;
    let text = std::fs::read_to_string(&profile)
        .with_context(|| format!("cannot read {}", profile.display()))?;
    let profile_total = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("summary: ")
                .or_else(|| line.strip_prefix("totals: "))
        })
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no summary in {}", profile.display()))?;
    Ok(Count {
        profile_total,
        profile,
    })
}

/// The latest dump of process `pid` (`NAME.PID.out`, `NAME.PID.out.N`).
fn newest_profile(profiles: &Path, pid: &str) -> Result<PathBuf> {
    let marker = format!(".{pid}.out");
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(profiles)
        .with_context(|| format!("cannot list {}", profiles.display()))?
    {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().contains(&marker) {
            continue;
        }
        let modified = entry.metadata()?.modified()?;
        if newest.as_ref().is_none_or(|(time, _)| modified >= *time) {
            newest = Some((modified, entry.path()));
        }
    }
    newest
        .map(|(_, path)| path)
        .with_context(|| format!("no profile of process {pid} in {}", profiles.display()))
}

/// `--requests` requests over four connections, each sending its share one after another.
async fn requests(setup: &Setup, served: &Served, args: &Args) -> Result<()> {
    let url = match args.endpoint {
        Endpoint::Get => format!("{}/api/bookmarks/{}", served.url, setup.get_id),
        Endpoint::List => format!("{}/api/bookmarks", served.url),
    };
    let per_connection = args.requests / 4;
    let mut connections = tokio::task::JoinSet::new();
    for _ in 0..4 {
        // One pooled connection per client: the requests reuse it, as curl's did.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()?;
        let mut request = client
            .get(&url)
            .header("X-Tenant-Id", TENANT)
            .header("Authorization", format!("Bearer {}", setup.key));
        if let Some(token) = args.token.as_deref().filter(|t| !t.is_empty()) {
            request = request.header("X-Consistency-Token", token);
        }
        let request = request.build()?;
        connections.spawn(async move {
            for _ in 0..per_connection {
                let sent = request
                    .try_clone()
                    .context("the request cannot be repeated")?;
                let response = client.execute(sent).await?.error_for_status()?;
                response.bytes().await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = connections.join_next().await {
        done.context("a connection's task")?
            .with_context(|| format!("GET {url}"))?;
    }
    Ok(())
}

/// `app, no key (trusted_header)` → `app-no-key-trusted-header`: letters kept, every run of
/// anything else one dash, none at the end.
fn file_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphabetic() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn profile_names_are_the_server_names_with_dashes() {
        assert_eq!(
            super::file_name("app, no key (trusted_header)"),
            "app-no-key-trusted-header"
        );
        assert_eq!(super::file_name("app, API key"), "app-API-key");
        assert_eq!(super::file_name("bare"), "bare");
    }
}
