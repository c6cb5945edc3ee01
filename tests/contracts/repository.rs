//! Checks on the repository itself. The shell scripts and config files that run inside Linux
//! containers must have LF line endings in every checkout: a CRLF script fails with "bad
//! interpreter", and a CRLF init script leaves a database uninitialised.

use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Tracked files matching `patterns` (git pathspecs), relative to the repository root.
fn tracked(patterns: &[&str]) -> Vec<String> {
    let out = Command::new("git")
        .current_dir(ROOT)
        .args(["ls-files", "-z", "--"])
        .args(patterns)
        .output()
        .expect("git is installed and this is a git checkout");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What runs or is read inside a container: scripts anywhere, the nginx config, and
/// everything under docker/.
fn container_files() -> Vec<String> {
    tracked(&["*.sh", "nginx/", "docker/"])
}

#[test]
fn no_tracked_shell_script_or_container_file_contains_a_carriage_return() {
    let files = container_files();
    assert!(
        files.iter().filter(|f| f.ends_with(".sh")).count() >= 5,
        "the scripts were found: {files:?}"
    );
    let with_cr: Vec<&String> = files
        .iter()
        .filter(|f| {
            let bytes = std::fs::read(format!("{ROOT}/{f}")).unwrap();
            bytes.contains(&b'\r')
        })
        .collect();
    assert!(with_cr.is_empty(), "CR line endings in {with_cr:?}");
}

#[test]
fn git_checks_out_every_script_and_container_file_with_lf_endings_on_any_platform() {
    let files = container_files();
    let out = Command::new("git")
        .current_dir(ROOT)
        .args(["check-attr", "eol", "--"])
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success());
    let report = String::from_utf8(out.stdout).unwrap();
    let not_lf: Vec<&str> = report
        .lines()
        .filter(|line| !line.ends_with(": eol: lf"))
        .collect();
    assert!(
        not_lf.is_empty(),
        ".gitattributes must pin eol=lf for: {not_lf:?}"
    );
    assert_eq!(report.lines().count(), files.len());
}
