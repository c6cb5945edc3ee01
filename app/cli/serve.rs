//! `bookmarks serve`: runs the HTTP server until SIGTERM or Ctrl-C, then drains.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::admin::AdminToken;
use crate::configuration::Settings;
use crate::configuration::secret::Secret;
use crate::startup::{Application, ServeOptions};
use crate::tenancy::session::MIN_SECRET_BYTES;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "BIND", default_value = "0.0.0.0:3000")]
    pub bind: SocketAddr,
    /// Name returned in the `X-Served-By` header.
    #[arg(long, env = "INSTANCE_NAME", default_value = "bookmarks")]
    pub instance_name: String,
    /// Apply pending migrations first (implied by AUTUMN_ENV=development).
    #[arg(long)]
    pub migrate: bool,
    /// Turns on /admin for whoever presents this token (at least 128 bits of randomness);
    /// `generated` uses the one the control migrations generated (`bookmarks admin-token`
    /// prints it); unset or empty leaves the admin page off.
    #[arg(long, env = "ADMIN_TOKEN", hide_env_values = true, default_value = "")]
    pub admin_token: String,
    /// On SIGTERM, keep serving this long (not ready, closing each connection after its
    /// response) before refusing new connections; longer than the proxy's upstream
    /// keep-alive timeout (2 s in nginx/default.conf).
    #[arg(long, env = "DRAIN_MS", default_value_t = crate::startup::DEFAULT_DRAIN.as_millis() as u64)]
    pub drain_ms: u64,
    /// Requests this replica works on at once, at most; more are answered 503 at once.
    #[arg(long, env = "MAX_IN_FLIGHT", default_value_t = crate::startup::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// How long one readiness probe's report answers `/ready` (0 to 60 000; 0: every call
    /// probes the databases).
    #[arg(
        long,
        env = "READY_MAX_AGE_MS",
        default_value_t = crate::startup::DEFAULT_READY_MAX_AGE.as_millis() as u64,
        value_parser = clap::value_parser!(u64).range(0..=60_000)
    )]
    pub ready_max_age_ms: u64,
    /// Signs the UI's session cookies (at least 32 bytes; the same on every replica);
    /// `generated` uses the one the control migrations generated. Unset: a random secret of
    /// this process's own.
    #[arg(
        long,
        env = "SESSION_SECRET",
        hide_env_values = true,
        default_value = ""
    )]
    pub session_secret: String,
    /// Serve even if shard connections act as a superuser or a role that bypasses
    /// row-level security, which leaves tenant isolation to every query's own filter.
    #[arg(long, env = "ALLOW_SUPERUSER")]
    pub allow_superuser: bool,
}

/// Session secrets that have been published (the repository's old development `.env`):
/// anyone can read them.
const PUBLISHED_SESSION_SECRETS: [&str; 1] = ["dev-session-secret-change-me-0123456789abcdef"];

/// `SESSION_SECRET` as set: empty for one of the process's own, `generated` for the
/// control database's, anything else at least [`MIN_SECRET_BYTES`] long and unpublished.
fn session_secret(raw: &str) -> Result<Secret<Vec<u8>>, String> {
    Secret::from_env_value(raw, |given| {
        if PUBLISHED_SESSION_SECRETS.contains(&given) {
            return Err(
                "SESSION_SECRET is a published value that anyone can read: use a random one, \
                 e.g. SESSION_SECRET=$(openssl rand -hex 32), or SESSION_SECRET=generated"
                    .to_owned(),
            );
        }
        if given.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "SESSION_SECRET is {} bytes long; use at least {MIN_SECRET_BYTES}",
                given.len()
            ));
        }
        Ok(given.as_bytes().to_vec())
    })
}

pub async fn run(settings: Settings, args: ServeArgs) -> ExitCode {
    let development = std::env::var("AUTUMN_ENV").as_deref() == Ok("development");
    let admin_token = match AdminToken::from_env_value(&args.admin_token) {
        Ok(token) => token,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::exit::EXIT_CONFIG);
        }
    };
    let session_secret = match session_secret(&args.session_secret) {
        Ok(secret) => secret,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::exit::EXIT_CONFIG);
        }
    };
    let options = ServeOptions {
        admin_token,
        session_secret,
        max_in_flight: args.max_in_flight.max(1),
        drain: std::time::Duration::from_millis(args.drain_ms),
        ready_max_age: std::time::Duration::from_millis(args.ready_max_age_ms),
        bind: args.bind,
        instance_name: args.instance_name,
        migrate: args.migrate || development,
        allow_superuser: args.allow_superuser,
        ..ServeOptions::default()
    };
    let app = match Application::build(settings, options).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "startup failed");
            return ExitCode::FAILURE;
        }
    };
    match app.run_until(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server failed");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGTERM (what `docker stop` sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested");
}
