//! Range moves (`move_slot … --slots A-B`) against real Postgres and real server processes:
//! the live slot map flips every replica at once, the source enforces ownership whatever a
//! replica believes (new tenants included), placed tenants stay, killed range moves resume
//! or abort, and `bookmarks slots` shows and compacts the map.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bookmarks_sharded::sharding::ShardKey;
use serde_json::{Value, json};

use crate::moves::{
    Acknowledged, DEEP_TENANT, Tool, all_rows, check_tree, count, depth, instant_now, last_json,
    move_layout, on_shard, reader, seed, seeded_collections, spawn, tree, tree_shares, tree_writer,
    writer, writers_landed,
};
use crate::support::*;

const ADMIN: &str = "range-moves-admin-token-0123456789";

/// `n` fresh tenant ids whose slots are in `first..=last`.
fn tenants_in(first: u16, last: u16, prefix: &str, n: usize) -> Vec<String> {
    let base = unique(prefix);
    (0..)
        .map(|i| format!("{base}-{i}"))
        .filter(|t| (first..=last).contains(&ShardKey::Str(t).slot().index()))
        .take(n)
        .collect()
}

/// A fresh tenant id whose slot is outside `first..=last` but on `shard` by the hash.
fn tenant_outside(app: &TestApp, first: u16, last: u16, shard: &str) -> String {
    let base = unique("outside");
    (0..)
        .map(|i| format!("{base}-{i}"))
        .find(|t| {
            !(first..=last).contains(&ShardKey::Str(t).slot().index())
                && hash_shard(&app.settings, t) == shard
        })
        .unwrap()
}

/// Rows on `shard` whose tenant hashes into `first..=last`, by the shard's own slot function.
async fn rows_in_range(layout: &Layout, shard: &str, first: u16, last: u16) -> i64 {
    on_shard(
        layout,
        shard,
        &format!(
            "SELECT count(*) FROM bookmarks WHERE _autumn_slot(tenant_id) BETWEEN {first} AND {last}"
        ),
    )
    .await[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// What shard0 says to a direct insert of a bookmark of `tenant` (psql, no app): the
/// error message if it refused it.
async fn direct_insert_on_shard0(layout: &Layout, tenant: &str) -> Result<(), String> {
    let (port, db) = port_of(layout, "shard0");
    session(port, &db)
        .await
        .execute(
            "INSERT INTO bookmarks (tenant_id, id, url) VALUES ($1, gen_random_uuid(), 'https://psql.example')",
            &[&tenant],
        )
        .await
        .map(drop)
        .map_err(|e| e.as_db_error().map(|d| d.message().to_owned()).unwrap_or(e.to_string()))
}

/// `move_slot run --from shard0 --to shard1 --slots RANGES --confirm --grace 0s`, which must
/// succeed; its last JSON line.
fn move_range(tool: &Tool, ranges: &str) -> Value {
    tool.ok(&[
        "run",
        "--from",
        "shard0",
        "--to",
        "shard1",
        "--slots",
        ranges,
        "--confirm",
        "--grace",
        "0s",
    ])
}

/// `run --from shard0 --to shard1 --slots RANGES --confirm --grace 1s`, in a thread.
async fn run_in_background(tool: &Tool, step: &str, ranges: &str) -> std::process::Output {
    let config = tool.config.path().to_owned();
    let (step, ranges) = (step.to_owned(), ranges.to_owned());
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_move_slot"))
            .arg("--config")
            .arg(config)
            .args([
                step.as_str(),
                "--from",
                "shard0",
                "--to",
                "shard1",
                "--slots",
            ])
            .arg(ranges)
            .args(if step == "run" {
                &[][..]
            } else {
                &["--confirm", "--grace", "1s"][..]
            })
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Creates brand-new tenants of the range until `stop`, one bookmark each, through the
/// apps in turn; returns each acknowledged tenant's bookmark id.
async fn newcomers(
    apps: Arc<Vec<TestApp>>,
    mut names: Vec<String>,
    stop: Arc<AtomicBool>,
) -> Acknowledged {
    let mut known = Acknowledged::default();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) && !names.is_empty() {
        n += 1;
        let app = &apps[n % apps.len()];
        let tenant = names.last().unwrap().clone();
        let res = app
            .post("/api/bookmarks")
            .headers(app.tenant(&tenant).await)
            .json(&json!({"url": format!("https://new.example/{tenant}")}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let retry_after = res.headers().get("retry-after").is_some();
        let body: Value = res.json().await.unwrap_or_default();
        match status {
            201 => {
                known
                    .rows
                    .insert(tenant, body["id"].as_str().unwrap().to_owned());
                names.pop();
                known.acknowledged += 1;
            }
            503 if retry_after
                && matches!(
                    body["error"]["code"].as_str(),
                    Some("tenant_moving" | "tenant_moved")
                ) =>
            {
                known.refused += 1;
            }
            _ => known.unexpected.push(format!("{tenant}: {status} {body}")),
        }
    }
    known
}

#[tokio::test]
async fn the_shards_slot_function_matches_the_rust_hash_on_the_golden_vectors_and_random_keys() {
    let layout = move_layout().await;
    let app = spawn(&layout, "slot-function").await; // migrates the shards
    let mut keys: Vec<String> = include_str!("../slot-vectors.tsv")
        .lines()
        .filter(|l| l.starts_with("str\t"))
        .map(|l| l.split('\t').nth(1).unwrap().to_owned())
        .collect();
    let golden = keys.len();
    assert!(golden >= 5, "the golden file has string vectors");
    let alphabet: Vec<char> = "az09-_.ÿé中文ß🦀\u{10FFFF}\u{7F}~ ".chars().collect();
    for i in 0..3000usize {
        let len = 1 + (i * 7919) % 40;
        let key: String = (0..len)
            .map(|j| alphabet[(i * 31 + j * 17 + rand::random::<u8>() as usize) % alphabet.len()])
            .collect();
        keys.push(key);
    }
    let (port, db) = port_of(&layout, "shard0");
    let session = session(port, &db).await;
    let rows = session
        .query(
            "SELECT k, _autumn_slot(k) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i",
            &[&keys],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), keys.len());
    for (row, key) in rows.iter().zip(&keys) {
        let sql_slot: i32 = row.get(1);
        assert_eq!(
            sql_slot,
            i32::from(ShardKey::Str(key).slot().index()),
            "key {key:?}"
        );
    }
    // And the golden file's own numbers, not just agreement with Rust.
    for line in include_str!("../slot-vectors.tsv")
        .lines()
        .filter(|l| l.starts_with("str\t"))
    {
        let mut parts = line.split('\t').skip(1);
        let (key, slot) = (parts.next().unwrap(), parts.next().unwrap());
        let got: i32 = session
            .query_one("SELECT _autumn_slot($1)", &[&key])
            .await
            .unwrap()
            .get(0);
        assert_eq!(got.to_string(), slot, "golden key {key:?}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_online_range_move_carries_existing_and_brand_new_tenants_and_spares_the_co_tenant() {
    let layout = move_layout().await;
    let apps = Arc::new(vec![
        spawn(&layout, "web1").await,
        spawn(&layout, "web2").await,
    ]);
    let tool = Tool::new(&layout);
    let (first, last) = (0u16, 2047u16);
    let existing = tenants_in(first, last, "ranged", 5);
    for (i, t) in existing.iter().enumerate() {
        // The last one, a quiet whale, holds most of the range's rows.
        seed(&layout, "shard0", t, if i == 4 { DEEP_TENANT } else { 300 }).await;
    }
    let co_tenant = tenant_outside(&apps[0], first, last, "shard0");
    let fresh = tenants_in(first, last, "newcomer", 400);

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = existing
        .iter()
        .take(3)
        .enumerate()
        .map(|(who, t)| tokio::spawn(writer(apps.clone(), t.clone(), who, stop.clone())))
        .collect();
    // The whale's collection tree (80 collections, four levels) is worked meanwhile.
    let whale = existing[4].clone();
    let (collections, mut shares) = tree_shares(&layout, "shard0", &whale, 1).await;
    let tree_writer = tokio::spawn(tree_writer(
        apps.clone(),
        whale.clone(),
        7,
        collections,
        shares.remove(0),
        stop.clone(),
    ));
    let arrivals = tokio::spawn(newcomers(apps.clone(), fresh, stop.clone()));
    let co_writer = tokio::spawn(writer(apps.clone(), co_tenant.clone(), 9, stop.clone()));
    let readers: Vec<_> = [existing[3].clone(), co_tenant.clone()]
        .into_iter()
        .map(|t| tokio::spawn(reader(apps.clone(), t, stop.clone())))
        .collect();
    // The load is under way before the move: every writer's creates land on the source.
    let loaded: Vec<&str> = existing[..3]
        .iter()
        .chain([&co_tenant])
        .map(String::as_str)
        .collect();
    let under_way = eventually(Duration::from_secs(30), || async {
        writers_landed(&layout, "shard0", &loaded, "-infinity").await == 4
    })
    .await;
    assert!(under_way, "every writer's creates land on shard0");

    // Up to the flip (no --confirm: the run stops after the re-pin).
    let moved = run_in_background(&tool, "run", "0-2047").await;
    let stderr = String::from_utf8_lossy(&moved.stderr);
    assert!(moved.status.success(), "move failed: {stderr}");
    let flipped = Instant::now();
    let flipped_at = instant_now();
    // Every replica routes the range to the destination within a second of the flip.
    for app in apps.iter() {
        let probe = tenants_in(first, last, "probe", 1).pop().unwrap();
        let routed = eventually(Duration::from_secs(1), || async {
            served_shard(app, &probe).await.as_deref() == Ok("shard1")
        })
        .await;
        assert!(
            routed,
            "{} still routes the range elsewhere",
            app.settings.origin
        );
    }
    let seen_by_all = flipped.elapsed();
    // The source rows go once every replica routes the range away: the short --grace
    // stands in for the routing caches' expiry, which the loop above has seen happen. (A
    // replica still routing to the source after the delete would find nothing there to
    // refuse a delete or an update of a moved row: it would answer 404.)
    let deleted = run_in_background(&tool, "delete", "0-2047").await;
    let stderr = String::from_utf8_lossy(&deleted.stderr);
    assert!(deleted.status.success(), "delete failed: {stderr}");
    // The load goes on after the flip: every writer's creates land on the destination.
    let carried_on = eventually(Duration::from_secs(30), || async {
        writers_landed(&layout, "shard1", &loaded[..3], &flipped_at).await == 3
    })
    .await;
    assert!(
        carried_on,
        "every writer's creates land on shard1 after the flip"
    );
    stop.store(true, Ordering::Relaxed);

    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    let (mut acknowledged, mut refused) = (0, 0);
    for w in writers {
        let w = w.await.unwrap();
        assert!(
            w.unexpected.is_empty(),
            "unexpected answers: {:?}",
            w.unexpected
        );
        acknowledged += w.acknowledged;
        refused += w.refused;
        expected.extend(w.rows);
    }
    let tree_writes = tree_writer.await.unwrap();
    assert!(
        tree_writes.unexpected.is_empty() && tree_writes.acknowledged > 0,
        "the tree writer: {} acknowledged, unexpected {:?}",
        tree_writes.acknowledged,
        tree_writes.unexpected
    );
    let arrived = arrivals.await.unwrap();
    assert!(
        arrived.unexpected.is_empty(),
        "new tenants: {:?}",
        arrived.unexpected
    );
    let co = co_writer.await.unwrap();
    let done = last_json(&deleted);
    eprintln!(
        "{acknowledged} writes and {} new tenants acknowledged, {} refused (503), fence {} ms, \
         flip seen by both replicas within {seen_by_all:?}",
        arrived.acknowledged,
        refused + arrived.refused,
        done["fence_ms"]
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["slots"], "0-2047");

    // Every acknowledged write of the range's tenants, old and new, is on the destination.
    for t in existing.iter().take(3) {
        let ids = on_shard(
            &layout,
            "shard1",
            &format!(
                "SELECT id::text, title FROM bookmarks WHERE tenant_id = '{t}' \
                 AND url LIKE 'https://load.example/%'"
            ),
        )
        .await;
        for row in ids {
            let id = row[0].clone().unwrap();
            if let Some(title) = expected.remove(&id) {
                assert_eq!(
                    row[1].clone().unwrap_or_default(),
                    title,
                    "{id}'s final title"
                );
            }
        }
    }
    assert!(
        expected.is_empty(),
        "acknowledged rows missing on the destination: {expected:?}"
    );
    assert!(
        arrived.acknowledged > 0,
        "new tenants arrived during the move"
    );
    for (tenant, id) in &arrived.rows {
        let found = on_shard(
            &layout,
            "shard1",
            &format!("SELECT count(*) FROM bookmarks WHERE tenant_id = '{tenant}' AND id = '{id}'"),
        )
        .await;
        assert_eq!(
            found[0][0].as_deref(),
            Some("1"),
            "new tenant {tenant}'s bookmark"
        );
    }
    let seeded = on_shard(
        &layout,
        "shard1",
        &format!(
            "SELECT count(*) FROM bookmarks WHERE tenant_id = '{whale}' \
             AND url LIKE 'https://seed.example/%'"
        ),
    )
    .await;
    assert_eq!(
        seeded[0][0].as_deref(),
        Some(DEEP_TENANT.to_string().as_str())
    );
    check_tree(&layout, "shard1", &whale, &[tree_writes]).await;
    assert_eq!(all_rows(&layout, "shard0", &whale).await, 0);
    assert_eq!(
        rows_in_range(&layout, "shard0", first, last).await,
        0,
        "nothing of the range is left on the source"
    );
    assert!(
        acknowledged > 20,
        "the writers made progress ({acknowledged})"
    );
    // The co-tenant on the same source never noticed; reads never failed.
    assert!(
        co.unexpected.is_empty() && co.refused == 0,
        "co-tenant: {:?}",
        co.unexpected
    );
    for r in readers {
        let (n, failures) = r.await.unwrap();
        assert!(
            n > 20 && failures.is_empty(),
            "{n} reads, failures: {failures:?}"
        );
    }
    // One override routes the whole range; no directory row per tenant.
    let overrides = on_control(
        &layout,
        "SELECT first_slot, last_slot, shard_name FROM _autumn_slot_map",
    )
    .await;
    assert_eq!(
        overrides,
        vec![vec![
            Some("0".into()),
            Some("2047".into()),
            Some("shard1".into())
        ]]
    );
    let directory = on_control(&layout, "SELECT count(*) FROM _autumn_shard_directory").await;
    assert_eq!(directory[0][0].as_deref(), Some("0"));
    for app in Arc::try_unwrap(apps).ok().unwrap() {
        app.stop().await;
    }
}

#[tokio::test]
async fn a_replica_cut_off_from_control_stores_a_new_tenant_of_a_moved_range_on_the_new_owner_only()
{
    let layout = move_layout().await;
    let current = spawn(&layout, "current").await;
    // The stale replica reaches control through a relay that is frozen during the move.
    let relay = Relay::start(layout.control.0).await;
    let mut stale_layout = layout.clone();
    stale_layout.control.0 = relay.port;
    let stale = spawn(&stale_layout, "stale").await;
    let tool = Tool::new(&layout);
    let newcomer = tenants_in(0, 1023, "late", 1).pop().unwrap();
    // Its key is looked up (and cached) while control still answers.
    assert_eq!(
        served_shard(&stale, &newcomer).await.as_deref(),
        Ok("shard0")
    );

    relay.freeze();
    move_range(&tool, "0-1023");

    // The old owner refuses it as departed, naming the new one; the replica sends it
    // there within the same request, though it cannot read the slot map.
    let res = stale
        .post("/api/bookmarks")
        .headers(stale.tenant(&newcomer).await)
        .json(&json!({"url": "https://late.example/1"}))
        .send()
        .await
        .unwrap();
    let status = res.status();
    assert_eq!(
        res.headers()["x-shard"],
        "shard1",
        "stored on the new owner"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        count(&layout, "shard0", &newcomer).await,
        0,
        "nothing stored on the old owner"
    );
    assert_eq!(count(&layout, "shard1", &newcomer).await, 1);
    // Even a direct insert on the old owner is refused.
    let refused = direct_insert_on_shard0(&layout, &newcomer)
        .await
        .unwrap_err();
    assert!(refused.contains("belongs to shard shard1"), "{refused}");

    // Once the replica can read control again, it routes there by the slot map itself.
    relay.thaw();
    let rerouted = eventually(Duration::from_secs(10), || async {
        served_shard(&stale, &newcomer).await.as_deref() == Ok("shard1")
    })
    .await;
    assert!(rerouted, "the replica's reads go to the new owner too");
    assert_eq!(count(&layout, "shard0", &newcomer).await, 0);
    current.stop().await;
    stale.stop().await;
}

#[tokio::test]
async fn tenants_placed_on_the_source_stay_and_a_later_pin_gives_and_its_unpin_takes_the_exception()
{
    let layout = move_layout().await;
    let app = spawn(&layout, "placed").await;
    let tool = Tool::new(&layout);
    let mut in_range = tenants_in(0, 511, "placed", 3);
    let (pinned, moving, later) = (
        in_range.pop().unwrap(),
        in_range.pop().unwrap(),
        in_range.pop().unwrap(),
    );
    seed(&layout, "shard0", &pinned, 50).await;
    seed(&layout, "shard0", &moving, 50).await;
    let out = bookmarks_cli(&layout, &["pin", &pinned, "shard0", "--note", "stays home"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The plan says who moves and who stays.
    let plan = tool.run(&[
        "plan", "--from", "shard0", "--to", "shard1", "--slots", "0-511",
    ]);
    assert!(plan.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&plan.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| lines.iter().find(|l| l["tenant"] == t).cloned().unwrap();
    assert_eq!(of(&pinned)["moves"], false, "{}", of(&pinned));
    assert_eq!(of(&moving)["moves"], true, "{}", of(&moving));

    move_range(&tool, "0-511");
    assert_eq!(
        count(&layout, "shard0", &pinned).await,
        50,
        "the pinned tenant stayed"
    );
    assert_eq!(
        count(&layout, "shard1", &moving).await,
        50,
        "the other one moved"
    );
    let created = app
        .create(&pinned, json!({"url": "https://home.example/1"}))
        .await;
    assert_eq!(
        created["shard"], "shard0",
        "the pinned tenant still writes at home"
    );
    assert_eq!(count(&layout, "shard0", &pinned).await, 51);

    // A brand-new tenant of the moved range, pinned to the old owner, writes there.
    let out = bookmarks_cli(&layout, &["pin", &later, "shard0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created = app
        .create(&later, json!({"url": "https://later.example/1"}))
        .await;
    assert_eq!(created["shard"], "shard0");
    // Unpinned, the old owner refuses it again.
    let out = bookmarks_cli(&layout, &["unpin", &later, "--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = direct_insert_on_shard0(&layout, &later).await.unwrap_err();
    assert!(refused.contains("belongs to shard shard1"), "{refused}");
    let created = app
        .create(&later, json!({"url": "https://later.example/2"}))
        .await;
    assert_eq!(created["shard"], "shard1", "by the slot map now");
    app.stop().await;
}

#[tokio::test]
async fn killed_range_moves_resume_to_the_end_and_abort_back_to_before_from_every_step() {
    let layout = move_layout().await;
    let app = spawn(&layout, "range-resume").await;
    let tool = Tool::new(&layout);
    let points = [
        ("during-copy", "copying"),
        ("after-fence", "fenced"),
        ("after-repin", "repinned"),
    ];
    for (i, (point, state)) in points.iter().enumerate() {
        for abort in [false, true] {
            let first = (i * 2 + usize::from(abort)) as u16 * 512;
            let last = first + 511;
            let ranges = format!("{first}-{last}");
            let tenants = tenants_in(first, last, "killed", 2);
            for t in &tenants {
                seed(&layout, "shard0", t, DEEP_TENANT).await;
            }
            let id = tool.kill_at(
                point,
                &[
                    "run",
                    "--from",
                    "shard0",
                    "--to",
                    "shard1",
                    "--slots",
                    &ranges,
                    "--confirm",
                    "--grace",
                    "0s",
                ],
            );
            assert_eq!(tool.status(id)["state"], *state, "killed at {point}");
            let owner = if abort {
                tool.ok(&["abort", &id.to_string()]);
                "shard0"
            } else {
                tool.ok(&["resume", &id.to_string(), "--grace", "0s"]);
                "shard1"
            };
            let other = other_shard(owner);
            let expected = if abort { "aborted" } else { "done" };
            assert_eq!(
                tool.status(id)["state"],
                expected,
                "{point}, abort: {abort}"
            );
            for t in &tenants {
                assert_eq!(
                    count(&layout, owner, t).await,
                    DEEP_TENANT as i64,
                    "{point}, abort: {abort}"
                );
                assert_eq!(count(&layout, other, t).await, 0, "{point}, abort: {abort}");
                assert_eq!(
                    (
                        tree(&layout, owner, t).await.len(),
                        depth(&layout, owner, t).await,
                        all_rows(&layout, other, t).await
                    ),
                    (seeded_collections(DEEP_TENANT), 5, 0),
                    "the collection tree is on {owner} only ({point}, abort: {abort})"
                );
                // The owner takes writes, through the app and its live slot map.
                let routed = eventually(Duration::from_secs(2), || async {
                    served_shard(&app, t).await.as_deref() == Ok(owner)
                })
                .await;
                assert!(routed, "{t} routes to {owner} ({point}, abort: {abort})");
                let created = app.create(t, json!({"url": "https://after.example"})).await;
                assert_eq!(created["shard"], owner);
            }
        }
    }
    // After the aborted ones, the map holds only the three finished moves' ranges.
    let overrides = on_control(
        &layout,
        "SELECT first_slot::text || '-' || last_slot FROM _autumn_slot_map ORDER BY 1",
    )
    .await;
    let overrides: Vec<String> = overrides
        .into_iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    assert_eq!(overrides, vec!["0-511", "1024-1535", "2048-2559"]);
    app.stop().await;
}

#[tokio::test]
async fn bookmarks_slots_shows_the_live_map_and_compact_refuses_to_re_route_then_folds_it_in() {
    let layout = move_layout().await;
    let mut options = test_options("slots");
    options.admin_token = bookmarks_sharded::admin::AdminToken::from_env_value(ADMIN).unwrap();
    let app = TestApp::spawn_with(layout.settings(), options).await;
    let tool = Tool::new(&layout);
    // A range with no tenant yet still moves: for the tenants to come.
    move_range(&tool, "100-199");
    // The admin page's slot map shows the difference and the edit, once it has heard.
    let shown = eventually(Duration::from_secs(10), || async {
        let page = app.get("/admin").bearer_auth(ADMIN).send().await.unwrap();
        let html = page.text().await.unwrap();
        html.contains("id=\"slot-drift\"") && html.contains("200-8191") && html.contains("100-199")
    })
    .await;
    if !shown {
        let page = app.get("/admin").bearer_auth(ADMIN).send().await.unwrap();
        let status = page.status();
        let html = page.text().await.unwrap();
        let at = html.find("id=\"slots\"").unwrap_or(0);
        panic!(
            "the admin page shows no drift ({status}): {}",
            &html[at..(at + 800).min(html.len())]
        );
    }

    let out = bookmarks_cli(&layout, &["slots"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["map"],
        json!([
            {"slots": "0-99", "shard": "shard0", "source": "config"},
            {"slots": "100-199", "shard": "shard1", "source": "slot_map"},
            {"slots": "200-8191", "shard": "shard0", "source": "config"},
            {"slots": "8192-16383", "shard": "shard1", "source": "config"},
        ])
    );
    assert_eq!(doc["drift"][0]["edit"], r#"slots = ["0-99", "200-8191"]"#);
    assert_eq!(
        doc["drift"][1]["edit"],
        r#"slots = ["100-199", "8192-16383"]"#
    );
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(words.contains("bookmarks slots compact"), "{words}");
    let key = tenants_in(100, 199, "routed", 1).pop().unwrap();
    let out = bookmarks_cli(&layout, &["route", &key]);
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (line["shard"].as_str(), line["via"].as_str()),
        (Some("shard1"), Some("slot_map"))
    );

    // The file still says shard0: removing the override would re-route, so it is refused.
    let out = bookmarks_cli(&layout, &["slots", "compact", "--slots", "100-199"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to remove"));
    let out = bookmarks_cli(&layout, &["slots", "compact"]);
    assert!(out.status.success());
    let kept: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (kept["removed"].as_str(), kept["kept"].as_str()),
        (Some("(none)"), Some("100-199"))
    );

    // With the suggested edit deployed, compact removes it and routing stays the same.
    let folded = Layout {
        shards: layout.shards.clone(),
        ..layout.clone()
    };
    let mut toml = folded.toml();
    toml = toml.replacen(
        "name = \"shard0\"\n",
        "name = \"shard0\"\nslots = [\"0-99\", \"200-8191\"]\n",
        1,
    );
    toml = toml.replacen(
        "name = \"shard1\"\n",
        "name = \"shard1\"\nslots = [\"100-199\", \"8192-16383\"]\n",
        1,
    );
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), toml).unwrap();
    let out = bookmarks_command(config.path())
        .args(["slots", "compact"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let removed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(removed["removed"], "100-199");
    let out = bookmarks_command(config.path())
        .args(["route", &key])
        .output()
        .unwrap();
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (line["shard"].as_str(), line["via"].as_str()),
        (Some("shard1"), Some("hash"))
    );
    let overrides = on_control(&layout, "SELECT count(*) FROM _autumn_slot_map").await;
    assert_eq!(overrides[0][0].as_deref(), Some("0"));
    app.stop().await;
}

#[tokio::test]
async fn a_range_of_ten_thousand_tenants_moves_with_one_guard_lock_within_the_default_lock_table() {
    let layout = move_layout().await;
    let app = spawn(&layout, "ten-thousand").await; // migrates
    let tool = Tool::new(&layout);
    let tenants = tenants_in(4096, 8191, "many", 10_000);
    let (port, db) = port_of(&layout, "shard0");
    session(port, &db)
        .await
        .execute(
            "INSERT INTO bookmarks (tenant_id, id, url) \
             SELECT t, gen_random_uuid(), 'https://many.example/' || t FROM unnest($1::text[]) t",
            &[&tenants],
        )
        .await
        .unwrap();
    let locks = on_shard(
        &layout,
        "shard0",
        "SELECT current_setting('max_locks_per_transaction')",
    )
    .await;
    assert_eq!(locks[0][0].as_deref(), Some("64"), "the default lock table");

    let done = move_range(&tool, "4096-8191");
    assert_eq!(done["state"], "done", "{done}");
    // Each bookmark and its change feed entry.
    assert_eq!(done["rows_verified"], 20_000);
    assert_eq!(rows_in_range(&layout, "shard1", 4096, 8191).await, 10_000);
    assert_eq!(rows_in_range(&layout, "shard0", 4096, 8191).await, 0);
    let overrides = on_control(&layout, "SELECT count(*) FROM _autumn_slot_map").await;
    assert_eq!(
        overrides[0][0].as_deref(),
        Some("1"),
        "one range entry, not a row per tenant"
    );
    app.stop().await;
}
