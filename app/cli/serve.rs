//! `bookmarks serve`: runs the HTTP server until SIGTERM or Ctrl-C, then drains.

use std::net::SocketAddr;
use std::process::ExitCode;

use crate::admin::AdminToken;
use crate::configuration::Settings;
use crate::startup::{Application, ServeOptions};

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
    /// Turns on /admin for whoever presents this token (at least 16 characters); unset or
    /// empty leaves the admin page off.
    #[arg(long, env = "ADMIN_TOKEN", hide_env_values = true, default_value = "")]
    pub admin_token: String,
}

pub async fn run(settings: Settings, args: ServeArgs) -> ExitCode {
    let development = std::env::var("AUTUMN_ENV").as_deref() == Ok("development");
    let admin_token = match AdminToken::from_env_value(&args.admin_token) {
        Ok(token) => token,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::EXIT_CONFIG);
        }
    };
    let options = ServeOptions {
        admin_token,
        bind: args.bind,
        instance_name: args.instance_name,
        migrate: args.migrate || development,
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
    tracing::info!("shutdown requested: draining in-flight requests");
}
