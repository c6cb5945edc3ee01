//! `cargo xtask bench request-path`: what the app's request path costs over the database's
//! ceiling and over a bare handler on the same stack, in one run on one machine. Not a test
//! and not in CI: run it by hand, on an otherwise idle machine (it logs the load average
//! before each measurement).
//!
//! It starts a throwaway Postgres 15 (Debian's binaries, loopback only, fsync off as in the
//! tests), creates the control and shard databases, migrates them with `bookmarks migrate`,
//! seeds one tenant with `--rows` bookmarks, starts the real app (`bookmarks serve`, one
//! shard plus control, directory routing on, API keys, default logging; every request
//! carries the tenant's key, so each pays a cached key check) and the bare handler
//! (`examples/bare_list.rs`: axum + deadpool + diesel-async, the app's own `store` queries
//! and JSON shapes, no middleware, same pool size and recycling method), and measures on
//! loopback with `wrk -t THREADS -c CONNS -d DURATION --latency`, after a warm-up of each:
//!
//! a) pgbench running the SQL the app sends for `GET /api/bookmarks` (captured from the
//!    server's statement log, same parameters), `-M prepared`: the ceiling;
//! b) the bare handler: list, get by id, create;
//! c) the app: the same three;
//! d) the same app build in `trusted_header` mode (the tenant header alone, no key), the
//!    same three: c) against d) is what the cached key check costs;
//! e) a small tenant's list (`--small-rows`, 20 bookmarks: the common case) on all of them
//!    and pgbench;
//! f) latency the way users feel it: loadgen's open loop at 50 % and 80 % of each
//!    endpoint's saturation throughput found by c) (and a mix of them, 6 lists, 3 gets and
//!    a create in ten), against the app and against the bare handler at the same rates,
//!    with the app's reindexer and job worker running; p50, p99 and p99.9 side by side, and
//!    the targets (at 50 %: p99 ≤ 5 ms for list and get, ≤ 10 ms for create; app p99 ≤ 1.5×
//!    bare's).
//!
//! All servers run throughout, so background work caused by the writes (the app's
//! reindexer) loads every run alike; each measurement starts with the search backlog empty.
//! Prints requests/s, p99 and the server's CPU time per request of each, app/bare and
//! app/pgbench, and the app's peak RSS (VmHWM) after the load. Everything it started is
//! stopped and removed at the end (`--keep` keeps the temporary directory with the logs;
//! with `--perf` it also records the app with `perf record` during each of its runs).
//! `--hold` sets everything up, prints where it is, and waits for Ctrl-C (profiling by
//! hand). `bench ready-flood` and `bench instructions` use the same set-up ([`setup`]).
//!
//! Needs postgresql-15 (initdb, pg_ctl, pgbench), postgresql-client and wrk; as root,
//! missing ones are installed with apt-get.

pub mod load;
pub mod pgbench;
pub mod report;
pub mod served;
pub mod setup;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::builder::FalseyValueParser;

use load::{Endpoint, Knobs, List, OpenKnobs};
use setup::{Options, Setup, SetupArgs, TENANT};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Each wrk and pgbench measurement's length.
    #[arg(long, env = "DURATION", default_value = "10s", value_parser = seconds_or_duration)]
    pub duration: Duration,
    /// The warm-up before each measurement (loadgen's too).
    #[arg(long, env = "WARMUP", default_value = "3s", value_parser = seconds_or_duration)]
    pub warmup: Duration,
    /// wrk's and pgbench's connections.
    #[arg(long, env = "CONNS", default_value_t = 16)]
    pub conns: u32,
    /// wrk's and pgbench's threads.
    #[arg(long, env = "THREADS", default_value_t = 2)]
    pub threads: u32,
    /// The endpoints to measure (of list, get, create, list-small).
    #[arg(long, env = "ENDPOINTS", default_value = "list get create list-small")]
    pub endpoints: List<Endpoint>,
    /// Leave pgbench out (quicker comparisons).
    #[arg(long, env = "SKIP_PGBENCH", value_parser = FalseyValueParser::new())]
    pub skip_pgbench: bool,
    /// Each open-loop measurement's length.
    #[arg(long, env = "OPEN_DURATION", default_value = "20s", value_parser = seconds_or_duration)]
    pub open_duration: Duration,
    /// The open loop's shares of the app's saturation throughput.
    #[arg(long, env = "LOADS", default_value = "0.5 0.8")]
    pub loads: List<f64>,
    /// Leave the open loop out.
    #[arg(long, env = "SKIP_OPEN_LOOP", value_parser = FalseyValueParser::new())]
    pub skip_open_loop: bool,
    /// Keep the temporary directory (logs, wrk's and loadgen's outputs).
    #[arg(long, env = "KEEP", value_parser = FalseyValueParser::new())]
    pub keep: bool,
    /// Record the app with `perf record` during each of its wrk runs (with --keep).
    #[arg(long, env = "PERF", value_parser = FalseyValueParser::new())]
    pub perf: bool,
    /// Set everything up, print where it is, and wait for Ctrl-C (profiling by hand).
    #[arg(long, env = "HOLD", value_parser = FalseyValueParser::new())]
    pub hold: bool,
}

/// A duration as humantime writes it (`10s`, `1m`), or a bare number of seconds.
pub fn seconds_or_duration(text: &str) -> Result<Duration> {
    let duration = match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => humantime::parse_duration(text)
            .with_context(|| format!("{text:?} is not a duration"))?,
    };
    if duration.is_zero() {
        bail!("the duration must be above zero");
    }
    Ok(duration)
}

/// Runs `task` to its end, or until Ctrl-C or SIGTERM: then it is dropped (which stops what
/// it set up) and the exit status is 130.
pub async fn or_interrupted(
    task: impl std::future::Future<Output = crate::Outcome>,
) -> crate::Outcome {
    tokio::select! {
        outcome = task => outcome,
        () = interrupted() => {
            eprintln!("== interrupted");
            Ok(ExitCode::from(130))
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM (the caller then drops what it set up, which stops it).
pub async fn interrupted() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

pub async fn run(args: Args) -> crate::Outcome {
    let hold = args.hold;
    tokio::select! {
        outcome = measure(args) => outcome,
        () = interrupted() => {
            eprintln!("== {}", if hold { "stopping" } else { "interrupted" });
            Ok(if hold { ExitCode::SUCCESS } else { ExitCode::from(130) })
        }
    }
}

async fn measure(args: Args) -> crate::Outcome {
    if args
        .loads
        .0
        .iter()
        .any(|share| !(share.is_finite() && *share > 0.0))
    {
        bail!(
            "--loads: each share must be above 0 (such as 0.5), not {:?}",
            args.loads.0
        );
    }
    crate::process::require(&[("wrk", "wrk")]).await?;
    if args.perf {
        crate::process::require(&[("perf", "linux-perf")]).await?;
    }
    let mut setup = Setup::start(Options {
        args: args.setup.clone(),
        keep: args.keep,
        callgrind: None,
    })
    .await?;
    let list = pgbench::capture(&setup).await?;
    if args.hold {
        hold(&setup);
        std::future::pending::<()>().await;
    }

    let ceiling = if args.skip_pgbench {
        report::Ceiling::default()
    } else {
        ceiling(&setup, &list, &args).await?
    };
    let knobs = Knobs {
        conns: args.conns,
        threads: args.threads,
        duration: args.duration,
        warmup: args.warmup,
        perf: args.perf,
    };
    let endpoints = &args.endpoints.0;
    let closed = load::saturation(&setup, endpoints, &knobs).await?;
    let open = if args.skip_open_loop {
        Vec::new()
    } else {
        let knobs = OpenKnobs {
            warmup: args.warmup,
            duration: args.open_duration,
            shares: args.loads.0.clone(),
        };
        load::open_loop(&setup, &closed, &knobs).await?
    };
    let memory = report::Memory {
        app_hwm: setup.app.memory_mib("VmHWM")?,
        app_rss: setup.app.memory_mib("VmRSS")?,
        bare_hwm: setup.bare.memory_mib("VmHWM")?,
    };
    let header = report::Header {
        threads: args.threads,
        conns: args.conns,
        duration: args.duration,
        open_duration: args.open_duration,
        pool_size: setup.pool_size,
        rows: setup.rows,
        small_rows: setup.small_rows,
    };
    print!(
        "{}",
        report::render(&header, endpoints, &closed, &ceiling, &memory, &open)
    );
    setup.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// a) and e): pgbench on the list SQL, the big tenant's (timed per transaction for the p99)
/// and the small one's.
async fn ceiling(setup: &Setup, list: &pgbench::ListSql, args: &Args) -> Result<report::Ceiling> {
    let knobs = |duration, log, tenant| pgbench::Run {
        conns: args.conns,
        threads: args.threads,
        duration,
        log,
        tenant,
    };
    eprintln!(
        "== pgbench warm-up ({})",
        humantime::format_duration(args.warmup)
    );
    pgbench::run(setup, list, knobs(args.warmup, false, None)).await?;
    eprintln!(
        "== pgbench ({}, {})",
        humantime::format_duration(args.duration),
        load::load_average()
    );
    let big = pgbench::run(setup, list, knobs(args.duration, true, None)).await?;
    eprintln!(
        "== pgbench, the small tenant ({}, {})",
        humantime::format_duration(args.duration),
        load::load_average()
    );
    let small = pgbench::run(
        setup,
        list,
        knobs(args.duration, false, Some(setup::SMALL_TENANT)),
    )
    .await?;
    Ok(report::Ceiling {
        rps: big.tps,
        p99_ms: big.p99_ms,
        small_rps: small.tps,
    })
}

/// Where everything is, for profiling by hand.
fn hold(setup: &Setup) {
    let (app, bare, trusted) = (&setup.app, &setup.bare, &setup.trusted);
    eprintln!(
        "== HOLD: app {} (pid {}), bare {} (pid {}),",
        app.url, app.pid, bare.url, bare.pid
    );
    eprintln!(
        "==       trusted {} (pid {}, trusted_header),",
        trusted.url, trusted.pid
    );
    eprintln!(
        "==       postgres 127.0.0.1:{} (user bookmarks), tenant {TENANT}, id {}, dir {}; Ctrl-C ends",
        setup.postgres.port,
        setup.get_id,
        setup.work.display()
    );
    eprintln!("==       Authorization: Bearer {}", setup.key);
}
