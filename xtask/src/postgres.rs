//! Throwaway Postgres 15 servers for the benchmarks that run the app outside Docker
//! (request-path, fleet, rls-whale): Debian's binaries, a data directory in a temporary
//! folder, loopback only, trust authentication, fsync off, and a `bookmarks` superuser
//! (password `bookmarks`). A server stops when its handle is dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tokio::process::Command;
use tokio_postgres::{NoTls, SimpleQueryMessage};

use crate::process::{self, is_root, output};

/// Where Debian's Postgres 15 binaries are: `PGBIN`, else Debian's place for them.
pub fn pgbin() -> PathBuf {
    std::env::var_os("PGBIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"))
}

/// Installs Postgres 15 (server binaries, psql, pgbench) when it is missing.
pub async fn require_binaries() -> Result<()> {
    if pgbin().join("initdb").is_file() && process::on_path("psql") {
        return Ok(());
    }
    process::require(&[
        ("/usr/lib/postgresql/15/bin/initdb", "postgresql-15"),
        ("psql", "postgresql-client-15"),
    ])
    .await
}

/// The first port from `from` on that nothing on loopback listens on.
pub fn free_port(from: u16) -> Result<u16> {
    (from..from.saturating_add(500))
        .find(|port| TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .with_context(|| format!("no free port from {from}"))
}

/// One running server.
pub struct Server {
    pub port: u16,
    data: PathBuf,
}

/// A Postgres binary, run as `postgres` when this process is root (Postgres refuses root).
fn as_postgres_std(binary: &str) -> std::process::Command {
    let path = pgbin().join(binary);
    if is_root() {
        let mut command = std::process::Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(path);
        command
    } else {
        std::process::Command::new(path)
    }
}

fn as_postgres(binary: &str) -> Command {
    Command::from(as_postgres_std(binary))
}

impl Server {
    /// A fresh server on 127.0.0.1:`port`, its files under `dir` (created).
    /// `max_connections` is Postgres's default of 100 unless given.
    pub async fn start(dir: &Path, port: u16, max_connections: u32) -> Result<Server> {
        let data = dir.join("data");
        let sockets = dir.join("sock");
        std::fs::create_dir_all(&data)?;
        std::fs::create_dir_all(&sockets)?;
        if is_root() {
            // The parents must be readable by `postgres` too.
            output(
                Command::new("chmod")
                    .arg("755")
                    .arg(dir.parent().unwrap_or(dir)),
            )
            .await?;
            output(Command::new("chown").args(["-R", "postgres:"]).arg(dir)).await?;
        }
        output(as_postgres("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        ]))
        .await?;
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={} \
             -c max_connections={max_connections} -c fsync=off -c synchronous_commit=off",
            sockets.display()
        );
        output(
            as_postgres("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.join("postgres.log"))
                .args(["-w", "-o", &options, "start"]),
        )
        .await?;
        let server = Server { port, data };
        server
            .execute(
                "postgres",
                "postgres",
                "CREATE ROLE bookmarks LOGIN SUPERUSER PASSWORD 'bookmarks'",
            )
            .await?;
        Ok(server)
    }

    /// A connection URL for `user` (`postgres` or `bookmarks`) to `database`.
    pub fn url(&self, user: &str, database: &str) -> String {
        let password = if user == "bookmarks" {
            ":bookmarks"
        } else {
            ""
        };
        format!(
            "postgres://{user}{password}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// Runs `sql` (any number of statements) as `user` on `database`.
    pub async fn execute(&self, user: &str, database: &str, sql: &str) -> Result<()> {
        let client = connect(&self.url(user, database)).await?;
        client
            .batch_execute(sql)
            .await
            .with_context(|| format!("on port {}: {sql}", self.port))
    }

    /// The first column of the first row `sql` returns, as text ("" when it returns none).
    pub async fn value(&self, user: &str, database: &str, sql: &str) -> Result<String> {
        value(&self.url(user, database), sql).await
    }

    /// Stops the server at once (what the benchmarks do to a server that "goes down").
    pub async fn stop(&self) -> Result<()> {
        output(
            as_postgres("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "stop"]),
        )
        .await?;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = as_postgres_std("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A connection to `url`, its driver running in the background.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .with_context(|| format!("cannot connect to {url}"))?;
    tokio::spawn(connection);
    Ok(client)
}

/// The first column of the first row `sql` returns on `url`, as text ("" when none).
pub async fn value(url: &str, sql: &str) -> Result<String> {
    let client = connect(url).await?;
    for message in client
        .simple_query(sql)
        .await
        .with_context(|| sql.to_owned())?
    {
        if let SimpleQueryMessage::Row(row) = message {
            return Ok(row.get(0).unwrap_or_default().to_owned());
        }
    }
    Ok(String::new())
}

/// Fails unless Postgres's binaries are where [`pgbin`] says.
pub fn check_binaries() -> Result<()> {
    if !pgbin().join("initdb").is_file() {
        bail!(
            "no initdb in {} (apt-get install postgresql-15, or set PGBIN)",
            pgbin().display()
        );
    }
    Ok(())
}
