//! `cargo xtask bench rls-whale`: what row-level security costs a whale's filtered reads.
//! The same app, the same rows, the same requests, with the tenant tables' policies on and
//! then off (ALTER TABLE … DISABLE ROW LEVEL SECURITY, which leaves the app's own tenant
//! filters as the only ones), alternating, in one run. Also prints how the narrow search's
//! index step is planned either way (the EXPLAIN lines, on stderr), then a Markdown table
//! of requests/s and p99 per request kind and mode, and their ratio (medians over rounds).
//!
//! It starts a throwaway Postgres 15 ([`crate::postgres`]), seeds a whale of `--rows`
//! bookmarks and a minnow beside it on one shard, lets the app's reindexer index them, and
//! runs wrk against a release build of the app. docs/load-testing.md ("Row-level security
//! on a whale's searches") keeps its figures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio_postgres::SimpleQueryMessage;

use super::load;
use crate::postgres::{Server, free_port};
use crate::process::{self, release_binary};

/// The benchmark's knobs; each also reads the script's old environment variable.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The whale's bookmarks (the minnow has 1000).
    #[arg(long, env = "ROWS", default_value_t = 100_000)]
    rows: u64,
    /// How long each wrk run lasts (whole seconds).
    #[arg(long, env = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Rounds of every request kind with the policies on and off (the order alternates).
    #[arg(long, env = "ROUNDS", default_value_t = 2)]
    rounds: u32,
    /// wrk's connections.
    #[arg(long, env = "CONNECTIONS", default_value_t = 8)]
    connections: u32,
    /// The app to measure (not built then); the workspace's release build by default.
    #[arg(long, env = "APP_BIN")]
    app_bin: Option<PathBuf>,
    /// Keep the temporary folder with the logs and the answers.
    #[arg(long, env = "KEEP", value_parser = clap::builder::FalseyValueParser::new())]
    keep: bool,
    /// Use the release build as it is instead of building it first.
    #[arg(long, env = "SKIP_BUILD", value_parser = clap::builder::FalseyValueParser::new())]
    skip_build: bool,
}

/// The request kinds and their query strings, in the table's order.
const KINDS: [(&str, &str); 4] = [
    ("list", "?limit=20"),
    ("tag", "?limit=20&tag=t7"),
    ("search-narrow", "?limit=20&q=w17"),
    ("search-broad", "?limit=20&q=shared"),
];

fn log(message: impl std::fmt::Display) {
    eprintln!("bench-rls-whale: {message}");
}

pub async fn run(args: Args) -> crate::Outcome {
    crate::postgres::require_binaries().await?;
    process::require(&[("wrk", "wrk")]).await?;
    if args.rounds == 0 || args.connections == 0 {
        bail!("--rounds and --connections must be at least 1");
    }
    let app_bin = match &args.app_bin {
        Some(path) => path.clone(),
        None => {
            if !args.skip_build {
                process::build_release(&["--bin", "bookmarks"]).await?;
            }
            release_binary("bookmarks")
        }
    };
    if !app_bin.is_file() {
        bail!(
            "no {} (cargo build --release --bin bookmarks)",
            app_bin.display()
        );
    }
    let work = tempfile::Builder::new()
        .prefix("bench-rls-whale.")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let measured = load::interruptible(measure(&args, &app_bin, work.path())).await;
    if args.keep {
        log(format!("kept {}", work.keep().display()));
    }
    print!("{}", measured?);
    Ok(ExitCode::SUCCESS)
}

/// Starts Postgres and the app, measures, and returns the table.
async fn measure(args: &Args, app_bin: &Path, work: &Path) -> Result<String> {
    // The postgres user reads its data folder in it.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot chmod {}", work.display()))?;
    }
    let pg_port = free_port(26432)?;
    let app_port = free_port(24000)?;
    log(format!("starting Postgres 15 on 127.0.0.1:{pg_port}"));
    let server = Server::start(&work.join("pg"), pg_port, 100).await?;
    // One statement each: CREATE DATABASE cannot run in the transaction of a batch.
    for database in ["bookmarks_control", "bookmarks_shard"] {
        let sql = format!("CREATE DATABASE {database} OWNER bookmarks");
        server.execute("postgres", "postgres", &sql).await?;
    }
    let db = format!("postgres://bookmarks:bookmarks@127.0.0.1:{pg_port}");
    let config = work.join("autumn.toml");
    let toml = format!(
        "[database]\nprimary_url = \"{db}/bookmarks_control?connect_timeout=2\"\n\n\
         [[database.shards]]\nname = \"shard0\"\nprimary_url = \"{db}/bookmarks_shard?connect_timeout=2\"\n\
         slots = [\"0-16383\"]\n\n\
         [tenancy]\nenabled = true\nsource = \"header\"\nheader = \"X-Tenant-Id\"\n\
         auth = \"trusted_header\"\nmax_in_flight_per_tenant = 4096\n"
    );
    std::fs::write(&config, toml).with_context(|| format!("cannot write {}", config.display()))?;

    let mut migrate = process::app_command(app_bin);
    migrate.arg("--config").arg(&config).arg("migrate");
    process::run_logged(&mut migrate, &work.join("migrate.log"), "bookmarks migrate").await?;

    log(format!(
        "seeding {} bookmarks for the whale and 1000 for a minnow",
        args.rows
    ));
    server
        .execute("bookmarks", "bookmarks_shard", &seed_sql(args.rows))
        .await?;

    log(format!(
        "starting the app on 127.0.0.1:{app_port}; its reindexer indexes the seeded rows"
    ));
    let app_log = work.join("app.log");
    let mut app = app_command(app_bin, &config, &app_log)?
        .args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{app_port}"),
            "--instance-name",
            "bench",
        ])
        .spawn()
        .context("cannot start bookmarks serve")?;
    let shard = |sql: &'static str| server.value("bookmarks", "bookmarks_shard", sql);
    loop {
        let pending: u64 = shard("SELECT count(*) FROM search_pending")
            .await?
            .parse()?;
        let indexed: u64 = shard("SELECT count(*) FROM bookmark_search")
            .await?
            .parse()?;
        if pending == 0 && indexed >= args.rows + 1000 {
            break;
        }
        if let Some(status) = app.try_wait()? {
            let text = std::fs::read_to_string(&app_log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            bail!("the app exited ({status})");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    server
        .execute("bookmarks", "bookmarks_shard", "VACUUM ANALYZE")
        .await?;

    let tables =
        shard("SELECT string_agg(c.relname, ' ') FROM pg_class c WHERE c.relrowsecurity").await?;
    let tables: Vec<String> = tables.split_whitespace().map(str::to_owned).collect();
    if tables.is_empty() {
        bail!("no table has row-level security: is the shard migrated?");
    }
    log("the narrow search's index step, policies on:");
    explain(&server).await?;
    policies(&server, &tables, false).await?;
    log("and off:");
    explain(&server).await?;
    policies(&server, &tables, true).await?;

    let base = format!("http://127.0.0.1:{app_port}/api/bookmarks");
    let http = reqwest::Client::new();
    for (kind, query) in KINDS {
        let answer = http
            .get(format!("{base}{query}"))
            .header("X-Tenant-Id", "whale")
            .send()
            .await
            .with_context(|| format!("GET {base}{query}"))?;
        let status = answer.status();
        let body = answer.bytes().await?;
        std::fs::write(work.join(format!("{kind}.json")), &body)?;
        if status != reqwest::StatusCode::OK {
            eprintln!("{}", String::from_utf8_lossy(&body));
            bail!("{kind} answered {}", status.as_u16());
        }
    }

    // Per mode and kind: requests/s and p99 of each round.
    let mut figures: HashMap<(&str, &str), Rounds> = HashMap::new();
    let connections = format!("-c{}", args.connections);
    let duration = format!("-d{}s", args.duration.as_secs_f64().ceil().max(1.0));
    // Each round swaps the order, so that neither mode always runs on a colder server.
    for round in 1..=args.rounds {
        let order = if round % 2 == 0 {
            ["off", "on"]
        } else {
            ["on", "off"]
        };
        for mode in order {
            policies(&server, &tables, mode == "on").await?;
            log(format!("round {round}, policies {mode}"));
            for (kind, query) in KINDS {
                let url = format!("{base}{query}");
                let wrk = crate::wrk::run(&[
                    "-t2",
                    &connections,
                    &duration,
                    "--latency",
                    "-H",
                    "X-Tenant-Id: whale",
                    &url,
                ])
                .await?;
                if wrk.non_2xx > 0 {
                    eprintln!("{}", wrk.output);
                    bail!("{kind} ({mode}): non-2xx answers");
                }
                let p99 = wrk
                    .p99_ms
                    .with_context(|| format!("{kind} ({mode}): wrk printed no 99% latency"))?;
                let rounds = figures.entry((mode, kind)).or_default();
                rounds.rates.push(wrk.requests_per_sec);
                rounds.p99s.push((p99 * 100.0).round() / 100.0);
            }
        }
    }
    policies(&server, &tables, true).await?;
    app.kill().await.context("cannot stop bookmarks serve")?;

    let mut table = format!(
        "\nwhale of {} rows, {} × {} per kind and mode, {} connections (medians)\n\
         | request | req/s, policies on | req/s, off | on/off | p99 on (ms) | p99 off (ms) |\n\
         |---|---|---|---|---|---|\n",
        args.rows,
        args.rounds,
        humantime::format_duration(args.duration),
        args.connections
    );
    for (kind, query) in KINDS {
        let (policies_on, policies_off) = (&figures[&("on", kind)], &figures[&("off", kind)]);
        let (on, off) = (median(&policies_on.rates), median(&policies_off.rates));
        table.push_str(&format!(
            "| {kind} `{query}` | {} | {} | {:.3} | {} | {} |\n",
            number(on),
            number(off),
            on / off,
            number(median(&policies_on.p99s)),
            number(median(&policies_off.p99s))
        ));
    }
    Ok(table)
}

/// The app with `config`, its output appended to `log`, and none of the caller's settings
/// that would change what it does (its log level and format, AUTUMN_* overrides, a token).
fn app_command(app_bin: &Path, config: &Path, log: &Path) -> Result<tokio::process::Command> {
    let mut command = process::app_command(app_bin);
    command
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(process::append_log(log)?)
        .stderr(process::append_log(log)?);
    Ok(command)
}

/// The whale's `rows` bookmarks and the minnow's 1000. 50 tags (each on 2 % of the whale's
/// rows), titles of three words from a list of 200 (each word in about 1.5 % of the
/// titles), one word ("shared") in every title: a narrow and a broad search. UUIDv7-shaped
/// ids, as the app mints them.
fn seed_sql(rows: u64) -> String {
    format!(
        "INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, created_at, updated_at)
SELECT w.tenant,
       (lpad(to_hex(x.ms), 12, '0') || '7' || substr(x.h, 1, 3) || '8' || substr(x.h, 4, 15))::uuid,
       'https://example.com/' || w.tenant || '/' || i,
       'shared w' || (i % 200) || ' w' || ((i * 7) % 200) || ' w' || ((i * 13) % 200),
       '', ARRAY['t' || (i % 50), 'all'], t.ts, t.ts
FROM (VALUES ('whale', {rows}), ('minnow', 1000)) AS w(tenant, n),
     generate_series(1, w.n) AS i,
     LATERAL (SELECT now() - make_interval(secs => w.n - i) AS ts) AS t,
     LATERAL (SELECT (extract(epoch FROM t.ts) * 1000)::bigint AS ms, md5(w.tenant || i) AS h) AS x;"
    )
}

/// Turns the row-level security of `tables` on or off.
async fn policies(server: &Server, tables: &[String], on: bool) -> Result<()> {
    let verb = if on { "ENABLE" } else { "DISABLE" };
    let sql: String = tables
        .iter()
        .map(|t| {
            format!(
                "ALTER TABLE \"{}\" {verb} ROW LEVEL SECURITY;",
                t.replace('"', "\"\"")
            )
        })
        .collect();
    server.execute("bookmarks", "bookmarks_shard", &sql).await
}

/// Prints how the narrow search's index step is planned for the app's role: the plan's
/// conditions, filters and execution time.
async fn explain(server: &Server) -> Result<()> {
    let client = crate::postgres::connect(&server.url("bookmarks", "bookmarks_shard")).await?;
    client
        .batch_execute(
            "SET ROLE bookmarks_app; SELECT set_config('app.tenant_id', 'whale', false);",
        )
        .await
        .context("becoming bookmarks_app of tenant whale")?;
    let sql = "EXPLAIN (ANALYZE, COSTS OFF) SELECT s.bookmark_id FROM bookmark_search s \
               WHERE s.tenant_id = 'whale' AND s.document @@ websearch_to_tsquery('english', 'w17')";
    for message in client
        .simple_query(sql)
        .await
        .context("EXPLAIN of the narrow search")?
    {
        if let SimpleQueryMessage::Row(row) = message {
            let line = row.get(0).unwrap_or_default();
            if ["Index Cond", "Filter", "Recheck", "Execution Time"]
                .iter()
                .any(|k| line.contains(k))
            {
                eprintln!("    {line}");
            }
        }
    }
    Ok(())
}

/// One mode and kind's requests/s and p99 (ms), a figure per round.
#[derive(Default)]
struct Rounds {
    rates: Vec<f64>,
    p99s: Vec<f64>,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

/// A figure as the script printed it: at most three decimals, no trailing zeros.
fn number(value: f64) -> String {
    ((value * 1000.0).round() / 1000.0).to_string()
}
