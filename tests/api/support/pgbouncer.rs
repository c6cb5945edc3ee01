//! An experiment, off unless asked for: `BOOKMARKS_TEST_PGBOUNCER=transaction` (or
//! `session`) puts a PgBouncer of that pool mode (the host's `pgbouncer`) in front of every
//! server the app is given, so that the suite shows what of the app works through one
//! (docs/pgbouncer.md has the results). The tests' own looks into the databases still go
//! straight to the servers.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use super::{PASSWORD, USER, free_port};

/// Backend port → the PgBouncer in front of it.
static BOUNCERS: LazyLock<Mutex<HashMap<u16, u16>>> = LazyLock::new(Default::default);
static CHILDREN: LazyLock<Mutex<Vec<Child>>> = LazyLock::new(Default::default);

#[ctor::dtor]
fn stop_bouncers() {
    if let Ok(mut children) = CHILDREN.lock() {
        for child in children.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The port the app should use for the server on `port`: a PgBouncer's when the
/// experiment is on, else `port` itself.
pub fn front(port: u16) -> u16 {
    let Ok(mode) = std::env::var("BOOKMARKS_TEST_PGBOUNCER") else {
        return port;
    };
    assert!(
        matches!(mode.as_str(), "transaction" | "session"),
        "BOOKMARKS_TEST_PGBOUNCER={mode:?}: expected transaction or session"
    );
    let mut bouncers = BOUNCERS.lock().unwrap();
    if let Some(listen) = bouncers.get(&port) {
        return *listen;
    }
    let listen = free_port();
    let dir = std::env::temp_dir().join(format!("bookmarks-pgbouncer-{listen}"));
    std::fs::create_dir_all(&dir).unwrap();
    let ini = dir.join("pgbouncer.ini");
    // `auth_type = any`: clients are not checked, each database logs in as one user. The
    // pools stay well under the test server's max_connections (300), and give back what
    // they do not use at once, since the tests' own sessions go to the same server.
    std::fs::write(
        &ini,
        format!(
            "[databases]\n* = host=127.0.0.1 port={port} user={USER} password={PASSWORD}\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
             auth_type = any\npool_mode = {mode}\nmax_client_conn = 5000\n\
             default_pool_size = 20\nmax_user_connections = 150\nserver_idle_timeout = 2\n\
             ignore_startup_parameters = extra_float_digits,options\n"
        ),
    )
    .unwrap();
    // PgBouncer refuses to run as root; -u switches to the Debian package's user.
    let mut command = Command::new("pgbouncer");
    if running_as_root() {
        command.args(["-u", "postgres"]);
    }
    let child = command
        .arg(&ini)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("pgbouncer runs (apt-get install pgbouncer)");
    CHILDREN.lock().unwrap().push(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(
            Instant::now() < deadline,
            "pgbouncer on {listen} never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    bouncers.insert(port, listen);
    listen
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}
