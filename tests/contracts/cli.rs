//! The `route` and `check-config` commands, run as a user runs them: the real binary, the
//! repository's `autumn.toml`, no database anywhere (the repository's topology turns the
//! directory on, so these routes pass `--no-directory`, or turn it off, or check the error
//! when the control database cannot be reached).

use assert_cmd::Command;

fn bookmarks() -> Command {
    let mut cmd = Command::cargo_bin("bookmarks").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    // Tests must not pick up a developer's overrides.
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("AUTUMN_")) {
        cmd.env_remove(name);
    }
    cmd
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write_config(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

#[test]
fn route_prints_one_json_line_per_key_in_the_documented_shape() {
    let out = stdout_of(bookmarks().args(["route", "--no-directory", "tenant-1", "acme-corp"]));
    assert_eq!(
        out,
        "{\"key\":\"tenant-1\",\"slot\":12427,\"shard\":\"shard1\",\"via\":\"hash\"}\n\
         {\"key\":\"acme-corp\",\"slot\":11394,\"shard\":\"shard1\",\"via\":\"hash\"}\n"
    );
}

#[test]
fn route_with_int_prints_numeric_keys_including_negatives_after_double_dash() {
    // Directory rows are text keys, but the live slot map routes integer keys too, so
    // only `--no-directory` routes them without the control database.
    let out =
        stdout_of(bookmarks().args(["route", "--no-directory", "--int", "--", "-1", "42", "0"]));
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({"key": -1, "slot": 11296, "shard": "shard1", "via": "hash"})
    );
    assert_eq!(lines[1]["slot"], 11925);
    assert_eq!(
        lines[2],
        serde_json::json!({"key": 0, "slot": 3503, "shard": "shard0", "via": "hash"})
    );
}

#[test]
fn route_accepts_any_text_as_a_key() {
    let out = stdout_of(bookmarks().args([
        "route",
        "--no-directory",
        "--",
        "ünï cödé \"quoted\"",
        "-dash",
        "",
    ]));
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["key"], "ünï cödé \"quoted\"");
    assert_eq!(lines[1]["key"], "-dash");
    assert_eq!(lines[2]["key"], "");
}

#[test]
fn route_with_int_rejects_a_non_integer_key_by_name() {
    let out = bookmarks()
        .args(["route", "--int", "12", "twelve"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(r#"KEY "twelve" is not a 64-bit integer"#)
    );
    assert!(
        out.stdout.is_empty(),
        "nothing is printed for a half-valid request"
    );
}

#[test]
fn route_reports_pins_from_the_config() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/autumn.toml"))
        .unwrap()
        .replace("pins = {}", "pins = { \"acme-corp\" = \"shard0\" }");
    let config = write_config(&text);
    let out = stdout_of(bookmarks().arg("--config").arg(config.path()).args([
        "route",
        "--no-directory",
        "acme-corp",
    ]));
    assert_eq!(
        out,
        "{\"key\":\"acme-corp\",\"slot\":11394,\"shard\":\"shard0\",\"via\":\"pin\"}\n"
    );
}

#[test]
fn route_follows_env_overrides_and_the_autumn_config_variable() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/autumn.toml")).unwrap();
    let config = write_config(&text);
    let out = stdout_of(
        bookmarks()
            .env("AUTUMN_CONFIG", config.path())
            .env("AUTUMN_DATABASE__SHARDS__0__SLOTS", "0-16383")
            .env("AUTUMN_DATABASE__SHARDS__1__SLOTS", "")
            .env("AUTUMN_SHARDING__DIRECTORY_ROUTER", "false")
            .args(["route", "acme-corp"]),
    );
    assert!(out.contains("\"shard\":\"shard0\""), "{out}");
}

#[test]
fn the_repository_topology_passes_check_config_and_shows_the_budget() {
    let out = stdout_of(bookmarks().arg("check-config"));
    assert!(out.contains("config: autumn.toml (valid)"), "{out}");
    let shard0 = out
        .lines()
        .find(|l| l.starts_with("shard0"))
        .expect("a shard0 row");
    assert!(
        shard0.contains("8192") && shard0.contains("0-8191"),
        "{shard0}"
    );
    assert!(
        shard0.contains("postgres-shard-0-replica:5432/bookmarks_shard"),
        "{shard0}"
    );
    let shard1 = out
        .lines()
        .find(|l| l.starts_with("shard1"))
        .expect("a shard1 row");
    assert!(shard1.contains("8192-16383"), "{shard1}");
    // control 8 + directory listener 1 + control liveness 1
    // + shard0: primary 8 + leader session 1 + liveness 1, replica 4 + liveness 1, and the
    //   replay poller's session on each server 2
    // + shard1: primary 8 + leader session 1 + liveness 1.
    assert!(out.contains("total_max_connections: 37"), "{out}");
    assert!(out.contains("directory_router: true"), "{out}");
    assert!(!out.contains(":bookmarks@"), "passwords are masked: {out}");
}

#[test]
fn check_config_on_an_invalid_topology_exits_2_and_lists_every_problem() {
    let config = write_config(
        r#"
[database]
primary_url = "mysql://nope"
[[database.shards]]
name = "a"
primary_url = "postgres://h/db"
slots = ["0-100", "9-3"]
[[database.shards]]
name = "a"
primary_url = "postgres://h/db"
replica_fallback = "sometimes"
slots = ["16384"]
"#,
    );
    let out = bookmarks()
        .arg("check-config")
        .arg("--config")
        .arg(config.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "6 problems",
        "[database] primary_url \"mysql://nope\" is not a Postgres URL",
        "shard name \"a\" is used twice",
        "replica_fallback \"sometimes\"",
        "slots entry \"9-3\" is reversed",
        "slots entry \"16384\" is out of range",
        // Coverage is still checked around the bad entries ("9-3" meant 3-9).
        "slots 101-16383 are owned by no shard",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

#[test]
fn check_config_on_a_missing_or_broken_file_exits_2_without_a_panic() {
    let out = bookmarks()
        .args(["check-config", "--config", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.toml"));

    let config = write_config("[database\nprimary_url = ");
    let out = bookmarks()
        .arg("check-config")
        .arg("--config")
        .arg(config.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not valid TOML") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn route_with_the_directory_on_fails_clearly_when_the_control_database_is_unreachable() {
    // The repository's topology names compose host names, which do not resolve here.
    let out = bookmarks().args(["route", "acme-corp"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no route is guessed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read the tenant directory on the control database")
            && err.contains("postgres-control")
            && err.contains("--no-directory"),
        "{err}"
    );
    assert!(
        !err.contains(":bookmarks@"),
        "the password is masked: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn serve_refuses_to_start_directory_routing_on_a_control_pool_of_one() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/autumn.toml"))
        .unwrap()
        .replace("pool_size = 8\n", "pool_size = 1\n");
    let config = write_config(&text);
    let out = bookmarks()
        .arg("--config")
        .arg(config.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("directory_router = true needs [database] pool_size of at least 2 (it is 1)"),
        "{err}"
    );
}
