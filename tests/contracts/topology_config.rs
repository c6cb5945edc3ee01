//! `autumn.toml` topologies: what is accepted, what is rejected and how it is reported.

use bookmarks_sharded::configuration::{ConfigError, Settings};
use bookmarks_sharded::sharding::ReplicaFallback;

const CONTROL: &str = r#"
[database]
primary_url = "postgres://app:secret@control:5432/control"
"#;

fn shard(name: &str, slots: Option<&str>) -> String {
    let slots = slots.map(|s| format!("slots = {s}\n")).unwrap_or_default();
    format!(
        "[[database.shards]]\nname = \"{name}\"\nprimary_url = \"postgres://app:secret@{name}:5432/app\"\n{slots}"
    )
}

fn load(text: &str) -> Result<Settings, ConfigError> {
    load_env(text, &[])
}

fn load_env(text: &str, env: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    Settings::from_toml_str(
        text,
        "test.toml",
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
    )
}

fn problems(text: &str) -> Vec<String> {
    load(text).expect_err("config should be rejected").problems
}

fn ranges(settings: &Settings) -> Vec<(String, String)> {
    settings
        .topology
        .shards
        .iter()
        .map(|s| {
            let r: Vec<String> = s.slots.iter().map(ToString::to_string).collect();
            (s.name.to_string(), r.join(","))
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn shards_without_slots_get_contiguous_even_ranges_in_declaration_order() {
    let two = load(&format!(
        "{CONTROL}{}{}",
        shard("a", None),
        shard("b", None)
    ))
    .unwrap();
    assert_eq!(ranges(&two), pairs(&[("a", "0-8191"), ("b", "8192-16383")]));
    assert!(two.topology.auto_assigned);

    let three = load(&format!(
        "{CONTROL}{}{}{}",
        shard("a", None),
        shard("b", None),
        shard("c", None)
    ))
    .unwrap();
    assert_eq!(
        ranges(&three),
        pairs(&[("a", "0-5460"), ("b", "5461-10921"), ("c", "10922-16383")])
    );
}

#[test]
fn an_explicit_map_may_mix_indices_and_ranges_and_is_compacted() {
    let s = load(&format!(
        "{CONTROL}{}{}",
        shard("a", Some(r#"["0-99", 100, "101-8191", "16383"]"#)),
        shard("b", Some(r#"["8192-16382"]"#))
    ))
    .unwrap();
    assert_eq!(
        ranges(&s),
        pairs(&[("a", "0-8191,16383"), ("b", "8192-16382")])
    );
    assert_eq!(s.topology.shards[0].slot_count(), 8193);
    assert!(!s.topology.auto_assigned);
}

#[test]
fn an_explicit_empty_list_is_a_valid_drained_shard() {
    let s = load(&format!(
        "{CONTROL}{}{}{}",
        shard("a", Some(r#"["0-8191"]"#)),
        shard("b", Some(r#"["8192-16383"]"#)),
        shard("new", Some("[]"))
    ))
    .unwrap();
    assert_eq!(s.topology.shards[2].slot_count(), 0);
    assert_eq!(s.topology.owner_of(0), 0);
    assert_eq!(s.topology.owner_of(16383), 1);
}

#[test]
fn slots_are_all_or_none_and_the_message_names_both_sides() {
    let p = problems(&format!(
        "{CONTROL}{}{}{}",
        shard("a", Some(r#"["0-16383"]"#)),
        shard("b", None),
        shard("c", None)
    ));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("all-or-none"), "{p:?}");
    assert!(
        p[0].contains(r#"shard "a""#) && p[0].contains(r#"shard "b", shard "c""#),
        "{p:?}"
    );
}

#[test]
fn gaps_in_the_map_are_printed_as_compact_ranges() {
    let p = problems(&format!(
        "{CONTROL}{}{}",
        shard("a", Some(r#"["0-8000", "8100"]"#)),
        shard("b", Some(r#"["8192-16000"]"#))
    ));
    assert_eq!(
        p,
        vec![
            "slots 8001-8099, 8101-8191, 16001-16383 are owned by no shard (every slot 0-16383 must be owned exactly once)"
        ]
    );
}

#[test]
fn overlaps_name_every_claimant_and_the_shared_slots() {
    let p = problems(&format!(
        "{CONTROL}{}{}",
        shard("a", Some(r#"["0-8191", "5-6"]"#)),
        shard("b", Some(r#"["8000-16383"]"#))
    ));
    assert_eq!(
        p,
        vec![
            r#"slots 5-6 are claimed more than once, by shard "a" and shard "a""#,
            r#"slots 8000-8191 are claimed more than once, by shard "a" and shard "b""#,
        ]
    );
}

#[test]
fn malformed_and_out_of_range_entries_are_all_reported_with_their_shard() {
    let p = problems(&format!(
        "{CONTROL}{}{}",
        shard("a", Some(r#"["9-3", "16384", "x", -1, "1-"]"#)),
        shard("b", Some(r#"["0-16383", "20000-20001"]"#))
    ));
    assert_eq!(
        p,
        vec![
            r#"shard "a": slots entry "9-3" is reversed (the start is after the end)"#,
            r#"shard "a": slots entry "16384" is out of range (slots are 0-16383)"#,
            r#"shard "a": slots entry "x" is not a slot index or an "A-B" range"#,
            r#"shard "a": slots entry "-1" is not a slot index or an "A-B" range"#,
            r#"shard "a": slots entry "1-" is not a slot index or an "A-B" range"#,
            r#"shard "b": slots entry "20000-20001" is out of range (slots are 0-16383)"#,
        ]
    );
}

#[test]
fn duplicate_empty_missing_and_unsafe_shard_names_are_rejected() {
    let text = format!(
        "{CONTROL}{}{}{}[[database.shards]]\nprimary_url = \"postgres://u@h/db\"\n{}",
        shard("a", None),
        shard("a", None),
        shard("", None),
        shard("bad name", None)
    );
    let p = problems(&text);
    assert!(
        p.iter().any(|m| m
            == r#"shard name "a" is used twice (shards[0] and shards[1]); names must be unique"#),
        "{p:?}"
    );
    assert!(
        p.iter().any(|m| m == "shards[2]: shard name is empty"),
        "{p:?}"
    );
    assert!(p.iter().any(|m| m == "shards[3]: name is missing"), "{p:?}");
    assert!(
        p.iter()
            .any(|m| m.starts_with(r#"shard "bad name": shard name "bad name" may only contain"#)),
        "{p:?}"
    );
}

#[test]
fn unknown_replica_fallback_values_are_rejected_at_both_levels() {
    let text = format!(
        "[database]\nprimary_url = \"postgres://u@h/c\"\nreplica_fallback = \"maybe\"\n{}replica_fallback = \"never\"\n",
        shard("a", None)
    );
    assert_eq!(
        problems(&text),
        vec![
            r#"[database] replica_fallback "maybe" is not one of "primary", "fail_readiness""#,
            r#"shard "a": replica_fallback "never" is not one of "primary", "fail_readiness""#,
        ]
    );
}

#[test]
fn replica_fallback_defaults_to_the_database_level_value() {
    let text = format!(
        "[database]\nprimary_url = \"postgres://u@h/c\"\nreplica_fallback = \"fail_readiness\"\n{}{}replica_fallback = \"primary\"\n",
        shard("a", None),
        shard("b", None)
    );
    let s = load(&text).unwrap();
    assert_eq!(
        s.topology.shards[0].replica_fallback,
        ReplicaFallback::FailReadiness
    );
    assert_eq!(
        s.topology.shards[1].replica_fallback,
        ReplicaFallback::Primary
    );
}

#[test]
fn a_pin_naming_an_unknown_shard_is_rejected() {
    let text = format!(
        "{CONTROL}{}{}[sharding]\npins = {{ \"acme-corp\" = \"shard9\", \"ok\" = \"a\" }}\n",
        shard("a", None),
        shard("b", None)
    );
    assert_eq!(
        problems(&text),
        vec![
            r#"[sharding.pins] tenant "acme-corp" is pinned to unknown shard "shard9" (shards: a, b)"#
        ]
    );
}

#[test]
fn a_topology_without_shards_is_rejected() {
    assert_eq!(
        problems(CONTROL),
        vec!["[database] declares no shards: add at least one [[database.shards]] entry"]
    );
}

#[test]
fn missing_and_unparsable_urls_are_rejected_with_their_field() {
    let text = "[database]\n[[database.shards]]\nname = \"a\"\n[[database.shards]]\nname = \"b\"\nprimary_url = \"not a url\"\n[[database.shards]]\nname = \"c\"\nprimary_url = \"http://h/db\"\nreplica_url = \"postgres://\"\n";
    let p = problems(text);
    assert_eq!(p.len(), 5, "{p:?}");
    assert_eq!(p[0], "[database] primary_url is missing");
    assert!(
        p.contains(&r#"shard "a": primary_url is missing"#.to_owned()),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|m| m.starts_with(r#"shard "b": primary_url "not a url" is not a Postgres URL"#)),
        "{p:?}"
    );
    assert!(p.contains(&r#"shard "c": primary_url "http://h/db" is not a Postgres URL: scheme is "http", expected "postgres" or "postgresql""#.to_owned()), "{p:?}");
    assert!(p.iter().any(|m| m.starts_with(r#"shard "c": replica_url "postgres://" is not a Postgres URL"#)), "{p:?}");
}

#[test]
fn a_zero_pool_size_is_rejected() {
    let text = format!(
        "[database]\nprimary_url = \"postgres://u@h/c\"\npool_size = 0\n{}primary_pool_size = 0\n",
        shard("a", None)
    );
    assert_eq!(
        problems(&text),
        vec![
            "[database] pool_size is 0; a pool needs at least 1 connection",
            r#"shard "a": primary_pool_size is 0; a pool needs at least 1 connection"#,
        ]
    );
}

#[test]
fn independent_problems_are_reported_together() {
    let text = "[database]\nreplica_fallback = \"x\"\n[[database.shards]]\nname = \"a\"\nslots = [\"x\"]\n[sharding]\npins = { t = \"zz\" }\n";
    let p = problems(text);
    // Including the coverage gap left by the unreadable slots entry.
    assert_eq!(p.len(), 6, "{p:?}");
    assert!(
        p.iter()
            .any(|m| m.starts_with("slots 0-16383 are owned by no shard"))
    );
}

#[test]
fn unknown_fields_and_wrong_types_name_their_path() {
    let p = problems(&format!("{CONTROL}{}colour = \"red\"\n", shard("a", None)));
    assert_eq!(p.len(), 1);
    assert!(
        p[0].starts_with("database.shards[0].colour: unknown field `colour`, expected one of"),
        "{p:?}"
    );

    let p = problems(&format!(
        "{CONTROL}{}primary_pool_size = \"four\"\n",
        shard("a", None)
    ));
    assert!(
        p[0].starts_with("database.shards[0].primary_pool_size: invalid type"),
        "{p:?}"
    );

    let p = problems("[database\n");
    assert!(p[0].starts_with("not valid TOML"), "{p:?}");
}

#[test]
fn total_max_connections_counts_control_primaries_and_only_configured_replicas() {
    let text = format!(
        "[database]\nprimary_url = \"postgres://u@h/c\"\npool_size = 5\nprimary_pool_size = 7\nreplica_pool_size = 3\n{}replica_url = \"postgres://u@r/db\"\n{}",
        shard("a", None),
        shard("b", None)
    );
    let s = load(&text).unwrap();
    assert_eq!(
        bookmarks_sharded::sharding::budget::total_max_connections(&s.topology),
        // Each of the four servers adds one liveness session; each primary its leader
        // session; a shard with a replica the replay poller's session on both of its
        // servers.
        4 + 5 + (7 + 1 + 3 + 2) + (7 + 1)
    );
}

const TWO_EXPLICIT: &str = r#"
[database]
primary_url = "postgres://app:secret@control:5432/control"
[[database.shards]]
name = "shard0"
primary_url = "postgres://app:secret@file0:5432/app"
slots = ["0-8191"]
[[database.shards]]
name = "shard1"
primary_url = "postgres://app:secret@file1:5432/app"
slots = ["8192-16383"]
"#;

#[test]
fn environment_overrides_replace_fields_of_existing_shards_by_position() {
    let s = load_env(
        TWO_EXPLICIT,
        &[
            (
                "AUTUMN_DATABASE__PRIMARY_URL",
                "postgres://u:p@envcontrol/c",
            ),
            (
                "AUTUMN_DATABASE__SHARDS__1__PRIMARY_URL",
                "postgres://u:p@env1:6000/app",
            ),
            (
                "AUTUMN_DATABASE__SHARDS__1__REPLICA_URL",
                "postgres://u:p@env1ro/app",
            ),
            ("AUTUMN_DATABASE__SHARDS__1__PRIMARY_POOL_SIZE", "3"),
            ("AUTUMN_DATABASE__SHARDS__0__SLOTS", "0-100, 200-8191"),
            ("AUTUMN_DATABASE__SHARDS__1__SLOTS", "101-199,8192-16383"),
            ("AUTUMN_CONFIG", "ignored.toml"),
            ("AUTUMN_ENV", "development"),
            ("UNRELATED", "x"),
        ],
    )
    .unwrap();
    let t = &s.topology;
    assert_eq!(t.control_url.host(), "envcontrol");
    assert_eq!(t.shards[0].primary_url.host(), "file0");
    assert_eq!(t.shards[1].primary_url.short(), "env1:6000/app");
    assert_eq!(t.shards[1].replica_url.as_ref().unwrap().host(), "env1ro");
    assert_eq!(t.shards[1].primary_pool_size, 3);
    assert_eq!(
        ranges(&s),
        pairs(&[
            ("shard0", "0-100,200-8191"),
            ("shard1", "101-199,8192-16383")
        ])
    );
}

#[test]
fn an_environment_override_past_the_last_shard_adds_a_shard() {
    let s = load_env(
        TWO_EXPLICIT,
        &[
            ("AUTUMN_DATABASE__SHARDS__2__NAME", "shard2"),
            (
                "AUTUMN_DATABASE__SHARDS__2__PRIMARY_URL",
                "postgres://u:p@env2/app",
            ),
            ("AUTUMN_DATABASE__SHARDS__2__SLOTS", ""),
        ],
    )
    .unwrap();
    assert_eq!(s.topology.shards.len(), 3);
    assert_eq!(s.topology.shards[2].name.as_str(), "shard2");
    assert_eq!(s.topology.shards[2].slot_count(), 0);
}

#[test]
fn environment_overrides_can_build_a_topology_the_file_does_not_have() {
    let s = load_env(
        "",
        &[
            ("AUTUMN_DATABASE__PRIMARY_URL", "postgres://u:p@c/c"),
            ("AUTUMN_DATABASE__SHARDS__0__NAME", "only"),
            (
                "AUTUMN_DATABASE__SHARDS__0__PRIMARY_URL",
                "postgres://u:p@s/app",
            ),
            ("AUTUMN_TENANCY__HEADER", "X-Org"),
        ],
    )
    .unwrap();
    assert_eq!(ranges(&s), pairs(&[("only", "0-16383")]));
    assert_eq!(s.tenancy.header, "X-Org");
}

#[test]
fn one_configured_login_and_password_file_replace_those_of_every_url() {
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "from-the-file\n").unwrap();
    let text = format!(
        "{CONTROL}{}replica_url = \"postgres://h0ro/app\"\n{}",
        shard("shard0", Some(r#"["0-8191"]"#)),
        shard("shard1", Some(r#"["8192-16383"]"#))
    );
    let s = load_env(
        &text,
        &[
            ("AUTUMN_DATABASE__USER", "bookmarks_web"),
            ("AUTUMN_DATABASE__PASSWORD_FILE", password.to_str().unwrap()),
        ],
    )
    .unwrap();
    let t = &s.topology;
    let mut urls = vec![&t.control_url];
    for spec in &t.shards {
        urls.push(&spec.primary_url);
        urls.extend(spec.replica_url.as_ref());
    }
    assert_eq!(urls.len(), 4);
    for url in urls {
        assert!(
            url.expose()
                .starts_with("postgres://bookmarks_web:from-the-file@"),
            "{url}"
        );
    }
}

#[test]
fn bad_environment_values_name_the_variable() {
    let err = load_env(
        TWO_EXPLICIT,
        &[
            ("AUTUMN_DATABASE__SHARDS__0__PRIMARY_POOL_SIZE", "many"),
            ("AUTUMN_SHARDING__DIRECTORY_ROUTER", "perhaps"),
            ("AUTUMN_SHARDING__PINS__ACME", "shard1"),
        ],
    )
    .unwrap_err();
    assert_eq!(err.problems.len(), 3, "{err}");
    assert!(err.problems[0].starts_with(
        r#"AUTUMN_DATABASE__SHARDS__0__PRIMARY_POOL_SIZE: "many" is not a whole number"#
    ));
    assert!(
        err.problems[1]
            .starts_with("AUTUMN_SHARDING__DIRECTORY_ROUTER: \"perhaps\" is not true or false")
    );
    assert!(
        err.problems[2]
            .starts_with("AUTUMN_SHARDING__PINS__ACME: pins cannot be set from the environment")
    );
}

#[test]
fn an_environment_slot_override_is_validated_like_the_file() {
    let err = load_env(
        TWO_EXPLICIT,
        &[("AUTUMN_DATABASE__SHARDS__0__SLOTS", "0-8000")],
    )
    .unwrap_err();
    assert_eq!(
        err.problems,
        vec![
            "slots 8001-8191 are owned by no shard (every slot 0-16383 must be owned exactly once)"
        ]
    );
}

#[test]
fn the_tenant_header_defaults_to_x_tenant_id_and_must_be_a_header_name() {
    let s = load(&format!("{CONTROL}{}", shard("a", None))).unwrap();
    assert_eq!(s.tenancy.header, "X-Tenant-Id");
    let p = problems(&format!(
        "{CONTROL}{}[tenancy]\nheader = \"X Tenant\"\nsource = \"cookie\"\n",
        shard("a", None)
    ));
    assert_eq!(p.len(), 2, "{p:?}");
}

#[test]
fn a_missing_file_is_a_config_error_naming_the_path() {
    let err = Settings::load_with_env(std::path::Path::new("/nonexistent/autumn.toml"), Vec::new())
        .unwrap_err();
    assert!(
        err.problems[0].starts_with("cannot read /nonexistent/autumn.toml"),
        "{err}"
    );
}

#[test]
fn a_bad_slot_entry_does_not_hide_the_gaps_around_it() {
    let p = problems(&format!(
        "{CONTROL}{}{}",
        shard("s0", Some(r#"["0-100"]"#)),
        shard("s1", Some(r#"["200-16383", "20000"]"#))
    ));
    assert_eq!(
        p,
        vec![
            r#"shard "s1": slots entry "20000" is out of range (slots are 0-16383)"#,
            "slots 101-199 are owned by no shard (every slot 0-16383 must be owned exactly once)",
        ]
    );
}

#[test]
fn what_a_bad_entry_evidently_meant_is_not_reported_again_as_a_gap() {
    let p = problems(&format!(
        "{CONTROL}{}{}",
        shard("s0", Some(r#"["8191-0"]"#)),
        shard("s1", Some(r#"["8192-99999"]"#))
    ));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].contains("\"8191-0\" is reversed"), "{p:?}");
    assert!(p[1].contains("\"8192-99999\" is out of range"), "{p:?}");
}

#[test]
fn directory_routing_needs_a_control_pool_of_at_least_two_connections() {
    let text = format!(
        "[database]\nprimary_url = \"postgres://u@h/c\"\npool_size = 1\n[sharding]\ndirectory_router = true\n{}",
        shard("a", None)
    );
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with(
            "[sharding] directory_router = true needs [database] pool_size of at least 2 (it is 1)"
        ),
        "{p:?}"
    );
    // The same pool is fine without the directory.
    assert!(load(&text.replace("directory_router = true", "directory_router = false")).is_ok());
}

#[test]
fn directory_settings_have_defaults_and_environment_overrides() {
    let s = load(&format!("{CONTROL}{}", shard("a", None))).unwrap();
    assert!(!s.topology.directory_router);
    assert_eq!(
        s.topology.directory_cache_ttl,
        std::time::Duration::from_secs(30)
    );
    let s = load_env(
        &format!("{CONTROL}{}", shard("a", None)),
        &[
            ("AUTUMN_SHARDING__DIRECTORY_ROUTER", "true"),
            ("AUTUMN_SHARDING__DIRECTORY_CACHE_TTL_MS", "1500"),
        ],
    )
    .unwrap();
    assert!(s.topology.directory_router);
    assert_eq!(
        s.topology.directory_cache_ttl,
        std::time::Duration::from_millis(1500)
    );
    // The listener's connection counts toward the budget, beside each server's liveness
    // session: control's server (liveness, pool, listener), the shard's (liveness, pool,
    // the reindexer leader's lock).
    assert_eq!(
        bookmarks_sharded::sharding::budget::total_max_connections(&s.topology),
        (1 + 8 + 1) + (1 + 8 + 1)
    );
    let p = load_env(
        &format!("{CONTROL}{}", shard("a", None)),
        &[("AUTUMN_SHARDING__DIRECTORY_ROUTER", "yes")],
    )
    .unwrap_err()
    .problems;
    assert_eq!(
        p,
        vec![r#"AUTUMN_SHARDING__DIRECTORY_ROUTER: "yes" is not true or false"#]
    );
}

#[test]
fn the_per_tenant_bulkhead_defaults_high_and_refuses_zero() {
    let base = format!("{CONTROL}{}", shard("shard0", None));
    let defaults = load(&base).unwrap();
    assert_eq!(
        defaults.tenancy.max_in_flight_per_tenant,
        bookmarks_sharded::configuration::DEFAULT_MAX_IN_FLIGHT_PER_TENANT
    );
    let from_env = load_env(&base, &[("AUTUMN_TENANCY__MAX_IN_FLIGHT_PER_TENANT", "4")]).unwrap();
    assert_eq!(from_env.tenancy.max_in_flight_per_tenant, 4);
    let zero = problems(&format!(
        "{base}\n[tenancy]\nmax_in_flight_per_tenant = 0\n"
    ));
    assert!(
        zero.iter()
            .any(|p| p.contains("max_in_flight_per_tenant must be at least 1")),
        "{zero:?}"
    );
}

#[test]
fn every_setting_that_is_not_text_can_be_overridden_from_the_environment() {
    let base = format!("{CONTROL}{}", shard("shard0", None));
    let s = load_env(
        &base,
        &[
            ("AUTUMN_TENANCY__SECURE_COOKIES", "true"),
            ("AUTUMN_TENANCY__SESSION_TTL_MINUTES", "30"),
            ("AUTUMN_CHANGES__TOMBSTONE_RETENTION_DAYS", "2"),
            ("AUTUMN_IMPORTS__REST", "0.25"),
            ("AUTUMN_SHARDING__MOVE_WAIT_MAX", "7"),
        ],
    )
    .unwrap();
    assert!(s.tenancy.secure_cookies);
    assert_eq!(
        s.tenancy.session_ttl,
        std::time::Duration::from_secs(30 * 60)
    );
    assert_eq!(
        s.changes.tombstone_retention,
        std::time::Duration::from_secs(2 * 86_400)
    );
    assert_eq!(s.imports.rest, 0.25);
    assert_eq!(s.topology.move_wait.max, 7);
    let refused = load_env(&base, &[("AUTUMN_IMPORTS__REST", "soon")]).unwrap_err();
    assert_eq!(
        refused.problems,
        vec![r#"AUTUMN_IMPORTS__REST: "soon" is not a number"#]
    );
}
