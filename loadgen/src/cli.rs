//! The `loadgen` command line: flags → [`Config`], run, print the table, write `--json` and
//! `--plot`. `src/main.rs` parses [`Args`] and calls [`main`].
//!
//! Exit codes: 0 the run finished (whatever the server answered), 1 an output file could
//! not be written, 2 bad flags (the message names the flag), 3 `--verify` found a lost,
//! phantom or misplaced write, or could not read everything back.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Parser};

use super::config::{Config, Load, VerifyConfig};
use super::mix::{DEFAULT_MIX, Mix};
use super::plot;
use super::population::Whale;

/// `--max-in-flight` when not given.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    version,
    about = "Send a tenant-skewed mix of bookmarks API requests and report latency and errors per tenant class and shard",
    group(ArgGroup::new("pacing").required(true).args(["rate", "concurrency"]))
)]
pub struct Args {
    /// Where to send every request (the compose stack's nginx by default).
    #[arg(long, default_value = "http://localhost:8080")]
    pub base_url: String,
    /// The service's admin token: before the run, an API key is created for every tenant
    /// through the admin API, and each request carries its tenant's. Without it requests
    /// carry no key (a service in trusted_header mode only).
    #[arg(long, env = "ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Tenant population: tenant-0001 … tenant-N.
    #[arg(long, default_value_t = 100)]
    pub tenants: usize,
    /// Zipf exponent over the population (tenant-0001 the most active); 0 is uniform.
    #[arg(long, default_value_t = 0.0)]
    pub zipf: f64,
    /// A tenant with a fixed share of ALL requests, e.g. acme-corp=0.5 (repeatable; shares
    /// must sum to less than 1).
    #[arg(long = "whale", value_name = "NAME=SHARE")]
    pub whales: Vec<Whale>,
    /// Seed of the tenant and operation choices (and of the created URLs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Bookmarks to create per tenant (whales too) before measuring; a 409 counts as there.
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub prefill: usize,
    /// Before the run, each --whale imports this many bookmarks through POST /api/imports
    /// (one Netscape bookmark file, waited for until its import is done): a whale seeded
    /// the way a customer's browser export arrives.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub whale_import: usize,
    /// Prefill requests in flight at once.
    #[arg(long, default_value_t = 32)]
    pub prefill_concurrency: usize,
    /// Operation weights (need not sum to 100).
    #[arg(long, default_value = DEFAULT_MIX)]
    pub mix: Mix,
    /// Open loop: requests per second, each timed from its intended send time.
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Closed loop: this many workers, each sending when its last request ended.
    #[arg(long, value_name = "C")]
    pub concurrency: Option<usize>,
    /// Open loop: most requests outstanding; a request due beyond that is not sent and
    /// counts as an `in-flight-cap` error. [default: 256]
    #[arg(long, value_name = "N", conflicts_with = "concurrency")]
    pub max_in_flight: Option<usize>,
    /// How long to send requests (e.g. 30s, 2m).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Stop after this many requests, even before --duration.
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    /// Per-request timeout.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write an SVG of p50/p99 latency per second and tenant class to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// No progress line (it is only drawn when stderr is a terminal anyway).
    #[arg(long)]
    pub quiet: bool,
    /// Send no consistency token with reads: they are served wherever the service sends
    /// reads without one (`[database] reads_without_token`), the baseline for replica reads.
    #[arg(long, conflicts_with_all = ["verify", "verify_shards"])]
    pub no_tokens: bool,
    /// Record every write and its outcome; after the run read every tenant written to
    /// back and report lost, phantom and misplaced writes (exit status 3 if any).
    #[arg(long)]
    pub verify: bool,
    /// Also read this shard primary directly to find misplaced rows, e.g.
    /// shard0=postgres://app:app@localhost:5433/bookmarks (repeatable; implies --verify).
    #[arg(long = "verify-shard", value_name = "NAME=URL", value_parser = shard_url)]
    pub verify_shards: Vec<(String, String)>,
    /// With --verify: wait this long after the last request before reading back.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub settle: Duration,
    /// With --verify: retry a tenant's failing read-back for this long before giving up.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub verify_patience: Duration,
    /// Write one JSON line per request to this file: unix_ms (when it was due), tenant, op,
    /// status or error, ms, shard.
    #[arg(long, value_name = "FILE.jsonl")]
    pub events: Option<PathBuf>,
    /// A fault timeline (`cargo xtask nemesis` writes one, beside the run): the report adds
    /// each fault window's requests, errors and latency, the plot marks them, and with
    /// --verify the read-back waits (up to --verify-patience) until it says healed.
    #[arg(long, value_name = "FILE.jsonl")]
    pub timeline: Option<PathBuf>,
}

/// `NAME=URL` of `--verify-shard`.
fn shard_url(s: &str) -> Result<(String, String), String> {
    let (name, url) = s
        .split_once('=')
        .filter(|(n, u)| !n.is_empty() && !u.is_empty())
        .ok_or_else(|| format!("{s:?} is not NAME=URL (e.g. shard0=postgres://…)"))?;
    Ok((name.to_owned(), url.to_owned()))
}

impl Args {
    pub fn config(&self) -> Config {
        let load = match (self.rate, self.concurrency) {
            (Some(rate), _) => Load::Open {
                rate,
                max_in_flight: self.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
            },
            (None, Some(concurrency)) => Load::Closed { concurrency },
            // clap's group requires one of them; a closed loop of 0 workers is refused
            // by validation with a message naming --concurrency.
            (None, None) => Load::Closed { concurrency: 0 },
        };
        Config {
            base_url: self.base_url.clone(),
            admin_token: self.admin_token.clone().filter(|t| !t.is_empty()),
            tenants: self.tenants,
            zipf: self.zipf,
            whales: self.whales.clone(),
            seed: self.seed,
            prefill: self.prefill,
            prefill_concurrency: self.prefill_concurrency,
            whale_import: self.whale_import,
            mix: self.mix.clone(),
            load,
            duration: self.duration,
            requests: self.requests,
            timeout: self.timeout,
            progress: !self.quiet && std::io::stderr().is_terminal(),
            send_tokens: !self.no_tokens,
            verify: (self.verify || !self.verify_shards.is_empty()).then(|| VerifyConfig {
                settle: self.settle,
                patience: self.verify_patience,
                shards: self.verify_shards.clone(),
            }),
            timeline: self.timeline.clone(),
            stop: None,
        }
    }
}

/// Opens an output file before the run, so a bad path fails at once.
fn create(flag: &str, path: &Option<PathBuf>) -> Result<Option<File>, String> {
    path.as_ref()
        .map(|p| File::create(p).map_err(|e| format!("{flag} {}: {e}", p.display())))
        .transpose()
}

fn write(flag: &str, file: Option<File>, text: &str) -> Result<(), String> {
    if let Some(mut f) = file {
        f.write_all(text.as_bytes())
            .and_then(|()| f.flush())
            .map_err(|e| format!("{flag}: {e}"))?;
    }
    Ok(())
}

pub fn main(args: Args) -> ExitCode {
    let config = args.config();
    if let Err(e) = config.validate() {
        eprintln!("loadgen: {e}");
        return ExitCode::from(2);
    }
    let files = (
        create("--json", &args.json),
        create("--plot", &args.plot),
        create("--events", &args.events),
    );
    let (json, svg, events) = match files {
        (Ok(j), Ok(p), Ok(e)) => (j, p, e),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            eprintln!("loadgen: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loadgen: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = match runtime.block_on(super::run_with_events(&config, events)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", report.table());
    if report.total.requests > 0 && report.total.ok == 0 {
        eprintln!(
            "loadgen: no request succeeded; is the service at {} up?",
            config.base_url
        );
    }
    let written = write("--json", json, &report.to_json())
        .and_then(|()| write("--plot", svg, &plot::svg(&report)));
    match written {
        Ok(()) if report.verdict.as_ref().is_some_and(|v| !v.passed()) => ExitCode::from(3),
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        Args::try_parse_from(std::iter::once("loadgen").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn flags_become_a_config() {
        let args = parse(&[
            "--rate",
            "200",
            "--whale",
            "acme-corp=0.5",
            "--whale",
            "globex=0.1",
            "--mix",
            "list=1,create=1",
            "--duration",
            "2s",
            "--zipf",
            "1.1",
        ])
        .unwrap();
        let c = args.config();
        assert_eq!(
            c.load,
            Load::Open {
                rate: 200.0,
                max_in_flight: 256
            }
        );
        assert_eq!(c.whales.len(), 2);
        assert_eq!(c.duration, Duration::from_secs(2));
        assert_eq!(c.base_url, "http://localhost:8080");
        assert!(c.validate().is_ok());
    }

    #[test]
    fn exactly_one_of_rate_and_concurrency() {
        assert!(parse(&[]).unwrap_err().contains("--rate"));
        let both = parse(&["--rate", "1", "--concurrency", "2"]).unwrap_err();
        assert!(both.contains("--concurrency"), "{both}");
        let c = parse(&["--concurrency", "4"]).unwrap().config();
        assert_eq!(c.load, Load::Closed { concurrency: 4 });
        let cap = parse(&["--concurrency", "4", "--max-in-flight", "9"]).unwrap_err();
        assert!(cap.contains("--max-in-flight"), "{cap}");
    }

    #[test]
    fn bad_values_are_reported_with_their_flag() {
        for (args, flag) in [
            (&["--rate", "1", "--mix", "list=1,gett=2"][..], "--mix"),
            (&["--rate", "1", "--whale", "acme"][..], "--whale"),
            (&["--rate", "1", "--whale", "acme=2"][..], "--whale"),
            (&["--rate", "fast"][..], "--rate"),
            (&["--rate", "1", "--duration", "soon"][..], "--duration"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
        let sum = parse(&["--rate", "1", "--whale", "a=0.5", "--whale", "b=0.5"])
            .unwrap()
            .config()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(sum.starts_with("--whale"), "{sum}");
        let rate = parse(&["--rate=-3"]).unwrap().config().validate();
        assert!(rate.unwrap_err().to_string().starts_with("--rate"));
    }
}
