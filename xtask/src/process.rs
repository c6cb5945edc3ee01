//! Running the tools a harness drives (docker, cargo, wrk, Postgres's binaries): where the
//! workspace is, a command's output or an error that says which command failed and what it
//! printed, and the Debian packages a harness needs, installed when it runs as root.

use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

/// The workspace's root (the harnesses run every tool from there).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf()
}

/// Where cargo puts what it builds: `CARGO_TARGET_DIR`, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_relative() {
                root().join(dir)
            } else {
                dir
            }
        })
        .unwrap_or_else(|| root().join("target"))
}

/// A release binary of this workspace (`bookmarks`, `move_slot`, `examples/bare_list`).
pub fn release_binary(name: &str) -> PathBuf {
    target_dir().join("release").join(name)
}

/// `cargo build --release --locked` of the given targets (`--bin bookmarks`, …).
pub async fn build_release(targets: &[&str]) -> Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .args(["build", "--release", "--locked"])
        .args(targets)
        .status()
        .await
        .context("cargo runs")?;
    if !status.success() {
        bail!("cargo build --release {} failed", targets.join(" "));
    }
    Ok(())
}

/// A command run from the workspace's root.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command.current_dir(root()).kill_on_drop(true);
    command
}

/// The app's binary (or a wrapper that runs it) without the caller's settings that would
/// change what it does: its log level and format, `AUTUMN_*` overrides, an admin token.
pub fn app_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = self::command(program);
    for name in ["RUST_LOG", "LOG_FORMAT", "AUTUMN_ENV", "ADMIN_TOKEN"] {
        command.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AUTUMN_") {
            command.env_remove(name);
        }
    }
    command
}

/// A log file a child's stdout or stderr appends to (both may share it).
pub fn append_log(path: &std::path::Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// Runs `command` to its end, its output appended to `log`; when it fails, prints the log
/// and says that `what` failed.
pub async fn run_logged(command: &mut Command, log: &std::path::Path, what: &str) -> Result<()> {
    let status = command
        .stdin(Stdio::null())
        .stdout(append_log(log)?)
        .stderr(append_log(log)?)
        .status()
        .await
        .with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        eprint!("{}", std::fs::read_to_string(log).unwrap_or_default());
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Runs `command` to its end; its stdout, or an error naming it with what it printed.
pub async fn output(command: &mut Command) -> Result<String> {
    let shown = describe(command);
    let out = command
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {shown}"))?;
    if !out.status.success() {
        bail!(
            "{shown} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `command` to its end, ignoring what it printed; whether it succeeded.
pub async fn succeeds(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// The program and its arguments, for error messages.
pub fn describe(command: &Command) -> String {
    let std = command.as_std();
    std::iter::once(std.get_program())
        .chain(std.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether this process runs as root (Postgres's binaries then run as `postgres`).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Whether `program` is on the PATH (or is an executable path).
pub fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Makes sure each `(program, Debian package)` is there: missing ones are installed with
/// apt-get when running as root, otherwise the error names the packages to install.
pub async fn require(tools: &[(&str, &str)]) -> Result<()> {
    let mut missing: Vec<&str> = tools
        .iter()
        .filter(|(program, _)| !on_path(program))
        .map(|(_, package)| *package)
        .collect();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "missing: {} (apt-get install -y {})",
            missing.join(", "),
            missing.join(" ")
        );
    }
    eprintln!("== installing {}", missing.join(" "));
    output(Command::new("apt-get").args(["update", "-qq"])).await?;
    output(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-qq"])
            .args(&missing),
    )
    .await?;
    Ok(())
}

/// A random hex token (admin tokens for the stacks a harness starts).
pub fn random_token() -> String {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
