//! Checks on the repository itself. The shell scripts and config files that run inside Linux
//! containers must have LF line endings in every checkout: a CRLF script fails with "bad
//! interpreter", and a CRLF init script leaves a database uninitialised. And every test
//! file is compiled into a test binary: none can sit in `tests/` and silently never run.

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

/// The `mod name;` declarations of a Rust file.
fn declared_modules(file: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or(line.strip_prefix("mod "))?;
            rest.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

#[test]
fn every_rust_file_under_tests_belongs_to_a_test_binary() {
    // Cargo finds `tests/*.rs` and `tests/*/main.rs` by itself; every other file must be a
    // module of one of those, or it is never compiled.
    let tests = std::path::Path::new(ROOT).join("tests");
    let mut unreached = Vec::new();
    let mut binaries = 0;
    // Files a `#[path = "…"]` attribute names, resolved from the declaring file's folder.
    let path_declared: Vec<std::path::PathBuf> = tracked(&["tests/**/*.rs"])
        .iter()
        .flat_map(|file| {
            let declaring = std::path::Path::new(ROOT).join(file);
            let text = std::fs::read_to_string(&declaring).unwrap();
            let dir = declaring.parent().unwrap().to_owned();
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("#[path = \"")?.strip_suffix("\"]"))
                .map(|target| {
                    dir.join(target)
                        .components()
                        .fold(std::path::PathBuf::new(), |mut p, c| {
                            match c {
                                std::path::Component::ParentDir => {
                                    p.pop();
                                }
                                other => p.push(other),
                            }
                            p
                        })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for file in tracked(&["tests/**/*.rs"]) {
        let path = std::path::Path::new(ROOT).join(&file);
        let dir = path.parent().unwrap();
        let name = path.file_stem().unwrap().to_str().unwrap();
        if dir == tests || name == "main" {
            binaries += 1;
            continue;
        }
        // A module file: `dir/name.rs` is declared by `dir/main.rs` or `dir/mod.rs`, and
        // `dir/mod.rs` by its parent's main.rs (possibly through a `#[path]`).
        let (owner_dir, module) = if name == "mod" {
            (
                dir.parent().unwrap(),
                dir.file_name().unwrap().to_str().unwrap(),
            )
        } else {
            (dir, name)
        };
        let mut owners: Vec<_> = ["main.rs", "mod.rs"]
            .iter()
            .map(|f| owner_dir.join(f))
            .collect();
        // `tests/common` is shared through `#[path]` by the binaries beside it.
        if owner_dir == tests {
            owners.extend(
                tracked(&["tests/*/main.rs"])
                    .iter()
                    .map(|f| std::path::Path::new(ROOT).join(f)),
            );
        }
        let declared = owners
            .iter()
            .filter(|o| o.exists())
            .any(|o| declared_modules(o).iter().any(|m| m == module));
        if !declared && !path_declared.contains(&path) {
            unreached.push(file);
        }
    }
    assert!(binaries >= 3, "the test binaries were found");
    assert!(unreached.is_empty(), "never compiled: {unreached:?}");
}
