//! The directory router against real Postgres: placement written to the control database
//! (by the CLI or by raw SQL) reaches every server process at once through LISTEN/NOTIFY,
//! survives a lost listener and a stopped control database without misrouting anyone, and
//! never strands a tenant's rows unless forced.

use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{Value, json};

/// Directory routing on, with the default TTL (30 s) unless `ttl_ms` says otherwise.
fn directory_on(ttl_ms: Option<u64>) -> String {
    let ttl = ttl_ms
        .map(|ms| format!("directory_cache_ttl_ms = {ms}\n"))
        .unwrap_or_default();
    format!("[sharding]\ndirectory_router = true\n{ttl}")
}

/// Polls every app until each serves `tenant` from `shard`; returns how long that took.
async fn until_all_route(
    apps: &[&TestApp],
    tenant: &str,
    shard: &str,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let mut all = true;
        for app in apps {
            all &= served_shard(app, tenant).await.as_deref() == Ok(shard);
        }
        if all {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{tenant} did not route to {shard} in every process within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn actuator(app: &TestApp) -> (Value, Value) {
    let metrics: Value = app.json("/actuator/metrics").await;
    let health: Value = app.json("/actuator/health").await;
    (
        metrics["directory"].clone(),
        health["components"]["directory"].clone(),
    )
}

/// Requests `tenant` until one request is answered from the directory cache.
async fn until_cached(app: &TestApp, tenant: &str) -> bool {
    eventually(Duration::from_secs(5), || async {
        let hits = actuator(app).await.0["hits"].as_u64().unwrap();
        served_shard(app, tenant).await.is_ok()
            && actuator(app).await.0["hits"].as_u64().unwrap() > hits
    })
    .await
}

async fn until_listener(app: &TestApp, connected: bool) -> bool {
    eventually(Duration::from_secs(30), || async {
        actuator(app).await.0["listener_connected"] == connected
    })
    .await
}

#[tokio::test]
async fn a_pin_written_by_raw_sql_reroutes_both_server_processes_within_a_second() {
    let layout = layout(&directory_on(None)).await;
    let web1 = TestApp::spawn(layout.settings(), "web1").await;
    let web2 = TestApp::spawn(layout.settings(), "web2").await;
    assert!(until_listener(&web1, true).await && until_listener(&web2, true).await);
    let tenant = unique("raw-sql-pin");
    let hashed = hash_shard(&web1.settings, &tenant);
    let pinned = other_shard(&hashed);

    // Both processes route by the hash and have cached that (a miss is cached too).
    for app in [&web1, &web2] {
        assert_eq!(
            served_shard(app, &tenant).await.as_deref(),
            Ok(hashed.as_str())
        );
        assert_eq!(
            served_shard(app, &tenant).await.as_deref(),
            Ok(hashed.as_str())
        );
    }

    pin_by_sql(&layout, &tenant, pinned).await;
    let took = until_all_route(&[&web1, &web2], &tenant, pinned, Duration::from_secs(1)).await;
    eprintln!("raw SQL pin reached both processes in {took:?} (TTL 30 s)");

    unpin_by_sql(&layout, &tenant).await;
    let took = until_all_route(&[&web1, &web2], &tenant, &hashed, Duration::from_secs(1)).await;
    eprintln!("unpin reached both processes in {took:?}");

    // The cache and the listener are visible to operators.
    let (stats, health) = actuator(&web1).await;
    assert!(stats["hits"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats["misses"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats["evictions"].as_u64().unwrap() >= 2, "{stats}");
    assert_eq!(stats["listener_connected"], true);
    assert_eq!(health["status"], "UP");
    assert_eq!(health["details"]["listener"], "connected");
    let text = web1.metrics_text().await;
    for name in [
        "directory_cache_hits_total",
        "directory_cache_misses_total",
        "directory_cache_evictions_total",
        "directory_listener_connected 1",
    ] {
        assert!(text.contains(name), "/metrics lacks {name}");
    }
    web1.stop().await;
    web2.stop().await;
}

#[tokio::test]
async fn after_losing_its_listener_a_process_forgets_what_changed_while_it_was_away() {
    let layout = layout(&directory_on(None)).await;
    let app = TestApp::spawn(layout.settings(), "listener").await;
    assert!(until_listener(&app, true).await);
    let tenant = unique("while-away");
    let hashed = hash_shard(&app.settings, &tenant);
    let pinned = other_shard(&hashed);
    assert_eq!(
        served_shard(&app, &tenant).await.as_deref(),
        Ok(hashed.as_str())
    );
    let flushes_before = actuator(&app).await.0["flushes"].as_u64().unwrap();

    // Cut the listener's session, and change the pin in the same round trip, before it can
    // reconnect (its first retry waits 250 ms).
    cut_control_listener_then(&layout, &pin_sql(&tenant, pinned)).await;
    let changed_at = directory_row_changed_at(&layout, &tenant).await;

    // Well before the 30 s TTL, the reconnected listener has flushed the stale entry.
    until_all_route(&[&app], &tenant, pinned, Duration::from_secs(5)).await;
    let reconnected_after_change =
        control_listener_started_after(&layout, changed_at[0][0].as_deref().unwrap()).await;
    assert!(
        reconnected_after_change,
        "the pin changed while the listener was away, so only the flush can have evicted it"
    );
    let (stats, _) = actuator(&app).await;
    assert!(
        stats["flushes"].as_u64().unwrap() > flushes_before,
        "{stats}"
    );
    assert_eq!(stats["listener_connected"], true);
    app.stop().await;
}

#[tokio::test]
async fn with_the_control_database_stopped_cached_tenants_are_served_and_uncached_ones_get_a_503_naming_it()
 {
    let network = unique("bookmarks-control-outage-net");
    let control = start_server(&network).await;
    create_database(control.port, "control").await;
    let shared = layout("").await;
    let layout = Layout {
        control: (control.port, "control".to_owned()),
        shards: shared.shards.clone(),
        extra: directory_on(Some(300)),
        slots: Vec::new(),
        connect_timeout_ms: shared.connect_timeout_ms,
    };
    let app = TestApp::spawn(layout.settings(), "control-outage").await;
    assert!(until_listener(&app, true).await);
    let pinned_tenant = unique("pinned");
    let hashed = hash_shard(&app.settings, &pinned_tenant);
    let pinned = other_shard(&hashed);
    pin_by_sql(&layout, &pinned_tenant, pinned).await;
    let plain_tenant = unique("plain");
    let plain_shard = hash_shard(&app.settings, &plain_tenant);
    app.create(&pinned_tenant, json!({"url": "https://pinned.example/1"}))
        .await;
    app.create(&plain_tenant, json!({"url": "https://plain.example/1"}))
        .await;

    // Both routes must be cached before the outage. A lookup that raced with the pin's
    // notification is (rightly) not cached, so ask until a request is a cache hit.
    for tenant in [&pinned_tenant, &plain_tenant] {
        assert!(until_cached(&app, tenant).await, "{tenant} is cached");
    }
    // A tenant whose key this process knows but whose placement it never looked up, and
    // one whose key it has never seen.
    let stranger = unique("stranger");
    app.check_key(&stranger).await;
    let unseen = unique("unseen");
    app.key(&unseen).await;

    control.container.stop_with_timeout(Some(5)).await.unwrap();
    assert!(until_listener(&app, false).await);
    tokio::time::sleep(Duration::from_millis(600)).await; // twice the TTL

    // Cached tenants keep their routes past the TTL: the pinned one is not hashed.
    assert_eq!(
        served_shard(&app, &pinned_tenant).await.as_deref(),
        Ok(pinned)
    );
    assert_eq!(
        served_shard(&app, &plain_tenant).await.as_deref(),
        Ok(plain_shard.as_str())
    );
    let created = app
        .create(&pinned_tenant, json!({"url": "https://pinned.example/2"}))
        .await;
    assert_eq!(created["shard"], pinned);

    // A tenant with nothing cached is refused, quickly, naming the control database.
    let started = Instant::now();
    let res = app.get_as("/api/bookmarks", &stranger).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "2");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "directory_unavailable", "{body}");
    assert_eq!(body["error"]["database"], "control");
    assert!(
        !body.to_string().contains("refused"),
        "no driver text: {body}"
    );
    // A key nobody here has checked cannot be checked now: 503, never a pass.
    let res = app.get_as("/api/bookmarks", &unseen).await;
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "auth_unavailable", "{body}");
    let (stats, health) = actuator(&app).await;
    assert!(stats["stale_hits"].as_u64().unwrap() >= 2, "{stats}");
    assert!(
        health["details"]["listener"]
            .as_str()
            .unwrap()
            .starts_with("disconnected"),
        "{health}"
    );

    control.container.start().await.unwrap();
    let recovered = eventually(Duration::from_secs(30), || async {
        served_shard(&app, &stranger).await.is_ok()
    })
    .await;
    assert!(
        recovered,
        "uncached tenants are served again without restarting the app"
    );
    assert!(until_listener(&app, true).await, "the listener reconnects");
    assert_eq!(
        served_shard(&app, &pinned_tenant).await.as_deref(),
        Ok(pinned)
    );
    let list = app.get_json("/api/bookmarks", &pinned_tenant).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2, "{list}");
    app.stop().await;
}

#[tokio::test]
async fn a_row_naming_an_unknown_shard_fails_only_that_tenant_with_a_503_naming_the_shard() {
    let layout = layout(&directory_on(None)).await;
    let app = TestApp::spawn(layout.settings(), "ghost").await;
    let lost = unique("lost");
    pin_by_sql(&layout, &lost, "shard9").await;
    let res = app.get_as("/api/bookmarks", &lost).await;
    assert_eq!(res.status(), 503);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "directory_unknown_shard", "{body}");
    assert_eq!(body["error"]["shard"], "shard9");
    let bystander = unique("bystander");
    app.create(&bystander, json!({"url": "https://fine.example"}))
        .await;

    let out = bookmarks_cli(&layout, &["route", &lost, &bystander]);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["shard"], "shard9");
    assert!(
        lines[0]["error"]
            .as_str()
            .unwrap()
            .contains("not configured")
    );
    assert_eq!(lines[1]["via"], "hash");

    // Fixing the row fixes the tenant at once.
    pin_by_sql(&layout, &lost, "shard0").await;
    until_all_route(&[&app], &lost, "shard0", Duration::from_secs(1)).await;
    app.stop().await;
}

#[tokio::test]
async fn the_directory_beats_config_pins_which_beat_the_hash() {
    let pinned = "pinned-by-config";
    let draft = layout("").await;
    let hashed = hash_shard(&draft.settings(), pinned);
    let config_shard = other_shard(&hashed);
    let layout = Layout {
        extra: format!(
            "{}pins = {{ \"{pinned}\" = \"{config_shard}\" }}\n",
            directory_on(None)
        ),
        ..draft
    };
    let app = TestApp::spawn(layout.settings(), "precedence").await;
    let route = |key: &str| {
        let out = bookmarks_cli(&layout, &["route", key]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };

    assert_eq!(
        served_shard(&app, pinned).await.as_deref(),
        Ok(config_shard)
    );
    assert_eq!(route(pinned)["via"], "pin");
    pin_by_sql(&layout, pinned, &hashed).await;
    until_all_route(&[&app], pinned, &hashed, Duration::from_secs(1)).await;
    assert_eq!(
        route(pinned),
        json!({"key": pinned, "slot": route(pinned)["slot"], "shard": hashed, "via": "directory"})
    );
    let plain = unique("plain");
    assert_eq!(route(&plain)["via"], "hash");
    assert_eq!(
        bookmarks_cli(&layout, &["route", "--no-directory", pinned]).stdout,
        format!(
            "{{\"key\":\"{pinned}\",\"slot\":{},\"shard\":\"{config_shard}\",\"via\":\"pin\"}}\n",
            route(pinned)["slot"]
        )
        .into_bytes()
    );

    // `pins` shows both sources and which one is in effect.
    let out = bookmarks_cli(&layout, &["pins"]);
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |source: &str| {
        lines
            .iter()
            .find(|l| l["tenant"] == pinned && l["source"] == source)
            .unwrap()
            .clone()
    };
    assert_eq!(of("directory")["shard"], hashed.as_str());
    assert_eq!(of("directory")["effective"], true);
    assert_eq!(of("config")["shard"], config_shard);
    assert_eq!(of("config")["effective"], false);
    app.stop().await;
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn pin_refuses_to_strand_a_tenants_rows_unless_forced_and_unpin_follows_the_same_rule() {
    let layout = layout(&directory_on(None)).await;
    let app = TestApp::spawn(layout.settings(), "placement").await;
    let settled = unique("settled");
    let home = hash_shard(&app.settings, &settled);
    let away = other_shard(&home);
    app.create(&settled, json!({"url": "https://settled.example"}))
        .await;

    let out = bookmarks_cli(&layout, &["pin", &settled, away]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let why = stderr(&out);
    assert!(
        why.contains("refusing to pin")
            // The bookmark and its change feed entry.
            && why.contains(&format!("2 row(s) on {home}"))
            && why.contains("move_slot run"),
        "{why}"
    );
    assert!(
        directory_row_with_note(&layout, &settled).await.is_empty(),
        "nothing was written"
    );

    for (args, needle) in [
        (
            vec!["pin", settled.as_str(), "shard7"],
            "no shard is named \"shard7\" (shards: shard0, shard1)",
        ),
        (
            vec!["pin", "not a tenant!", away],
            "TENANT \"not a tenant!\"",
        ),
    ] {
        let out = bookmarks_cli(&layout, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }

    let out = bookmarks_cli(
        &layout,
        &[
            "pin",
            &settled,
            away,
            "--force",
            "--note",
            "left behind on purpose",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let change: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(change["before"], json!({"shard": home, "via": "hash"}));
    assert_eq!(change["after"], json!({"shard": away, "via": "directory"}));
    assert_eq!(
        directory_row_with_note(&layout, &settled).await,
        vec![vec![
            Some(away.to_owned()),
            Some("left behind on purpose".to_owned())
        ]]
    );
    // Unpinning routes it back to its rows: allowed.
    let out = bookmarks_cli(&layout, &["unpin", &settled]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(directory_row_with_note(&layout, &settled).await.is_empty());
    let out = bookmarks_cli(&layout, &["unpin", &settled]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("has no directory row"),
        "{}",
        stderr(&out)
    );

    // A new tenant is pinned before its first write, writes there, and cannot be unpinned
    // away from those rows without --force.
    let newcomer = unique("newcomer");
    let target = other_shard(&hash_shard(&app.settings, &newcomer));
    let out = bookmarks_cli(&layout, &["pin", &newcomer, target]);
    assert!(out.status.success(), "{}", stderr(&out));
    until_all_route(&[&app], &newcomer, target, Duration::from_secs(1)).await;
    let created = app
        .create(&newcomer, json!({"url": "https://new.example"}))
        .await;
    assert_eq!(created["shard"], target);
    let out = bookmarks_cli(&layout, &["unpin", &newcomer]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("refusing to unpin"),
        "{}",
        stderr(&out)
    );
    assert_eq!(served_shard(&app, &newcomer).await.as_deref(), Ok(target));
    app.stop().await;
}

#[tokio::test]
async fn placement_commands_refuse_when_directory_routing_is_off() {
    let layout = layout("").await;
    TestApp::spawn(layout.settings(), "off").await.stop().await;
    let out = bookmarks_cli(&layout, &["pin", "someone", "shard0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("directory routing is off"),
        "{}",
        stderr(&out)
    );
}
