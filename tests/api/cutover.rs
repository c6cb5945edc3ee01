//! A move's cutover as clients see it: a write that meets the fence waits for it to lift,
//! within its budget and the process's cap, and a fence that would last too long is
//! lifted by the mover itself; the fence's check of what changed during the copy still
//! catches a row that differs.

use std::process::Command;
use std::time::{Duration, Instant};

use bookmarks_sharded::sharding::topology::MoveWaitPolicy;
use serde_json::{Value, json};

use crate::moves::{Paused, Tool, count, move_layout, rows, seed, spawn, step, tenant};
use crate::support::*;

/// A server whose writes wait at most `budget_ms` for a fence, `max` of them at once.
async fn server(layout: &Layout, name: &str, budget_ms: u64, max: usize) -> TestApp {
    let mut settings = layout.settings();
    settings.topology.move_wait = MoveWaitPolicy {
        budget: Duration::from_millis(budget_ms),
        max,
    };
    TestApp::spawn(settings, name).await
}

/// One create for `tenant`: its status, whether it said Retry-After, its `X-Shard`, its
/// error code, and how long it took.
async fn timed_create(
    app: &TestApp,
    tenant: &str,
    n: usize,
) -> (u16, bool, String, Value, Duration) {
    let headers = app.tenant(tenant).await;
    let started = Instant::now();
    let res = app
        .post("/api/bookmarks")
        .headers(headers)
        .json(&json!({"url": format!("https://waits.example/{n}")}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let retry_after = res.headers().get("retry-after").is_some();
    let shard = res
        .headers()
        .get("x-shard")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body: Value = res.json().await.unwrap_or_default();
    (
        status,
        retry_after,
        shard,
        body["error"]["code"].clone(),
        started.elapsed(),
    )
}

/// Starts `run` of `tenant` held `pause` at a point, from a blocking thread.
async fn start_paused(tool: &Tool, pause: &'static str, args: &[&str]) -> Paused {
    let cmd: Command = tool.cmd(args);
    tokio::task::spawn_blocking(move || Paused::start(cmd, pause))
        .await
        .unwrap()
}

async fn move_waits(app: &TestApp) -> Value {
    app.json("/actuator/metrics").await["move_waits"].clone()
}

#[tokio::test]
async fn a_write_waits_at_most_its_budget_and_past_the_cap_the_excess_is_refused_at_once_while_the_rest_wait()
 {
    let layout = move_layout().await;
    let short = server(&layout, "short-wait", 600, 1_000).await;
    let capped = server(&layout, "capped", 5_000, 2).await;
    let tool = Tool::new(&layout);
    let (t, home, away) = tenant(&short, "waits");
    seed(&layout, &home, &t, 100).await;
    // Keys checked and four connections to `capped` open now, so that the timings below
    // are the writes' own.
    short.check_key(&t).await;
    let _ = tokio::join!(
        capped.get_as("/api/bookmarks", &t),
        capped.get_as("/api/bookmarks", &t),
        capped.get_as("/api/bookmarks", &t),
        capped.get_as("/api/bookmarks", &t),
    );

    // The fence stays up for 2 s.
    let args = step("run", &home, &away, &t, &["--confirm", "--grace", "0s"]);
    let paused = start_paused(&tool, "after-fence:2s", &args).await;
    let (one, a, b, c, d) = tokio::join!(
        timed_create(&short, &t, 0),
        timed_create(&capped, &t, 1),
        timed_create(&capped, &t, 2),
        timed_create(&capped, &t, 3),
        timed_create(&capped, &t, 4),
    );
    let (code, done, stderr) = paused.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(done["state"], "done", "{done}");

    // The budget: refused after it, not before, and well before the fence lifted.
    let (status, retry_after, _, error, took) = one;
    assert_eq!((status, retry_after), (503, true), "{error}");
    assert_eq!(error, "tenant_moving");
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_millis(1_500),
        "answered after {took:?}"
    );
    // The cap: two wait and land on the destination; the other two are refused at once.
    let mut answers = [a, b, c, d];
    answers.sort_by_key(|x| x.0);
    for (status, _, shard, error, took) in &answers[..2] {
        assert_eq!(*status, 201, "{error}");
        assert_eq!(shard, &away, "written on the destination");
        assert!(*took >= Duration::from_millis(1_000), "it waited: {took:?}");
    }
    for (status, retry_after, _, error, took) in &answers[2..] {
        assert_eq!((*status, *retry_after), (503, true), "{error}");
        assert_eq!(error, "tenant_moving");
        assert!(
            *took < Duration::from_millis(500),
            "refused at once: {took:?}"
        );
    }
    assert_eq!(count(&layout, &away, &t).await, 102);
    assert_eq!(count(&layout, &home, &t).await, 0);

    let short_waits = move_waits(&short).await;
    assert_eq!(short_waits["over_budget"], 1, "{short_waits}");
    assert_eq!(short_waits["waited"], 1, "{short_waits}");
    let capped_waits = move_waits(&capped).await;
    assert_eq!(capped_waits["over_cap"], 2, "{capped_waits}");
    assert_eq!(capped_waits["waited"], 2, "{capped_waits}");
    assert_eq!(capped_waits["waiting"], 0, "{capped_waits}");
    let scraped = capped.metrics_text().await;
    assert!(
        scraped.contains("move_wait_overflows_total{reason=\"cap\"}")
            && scraped.contains("move_wait_seconds_bucket"),
        "{scraped}"
    );
    short.stop().await;
    capped.stop().await;
}

#[tokio::test]
async fn a_fence_held_past_max_fence_is_lifted_the_source_takes_writes_again_and_resume_finishes() {
    let layout = move_layout().await;
    let app = spawn(&layout, "fence-cap").await;
    let tool = Tool::new(&layout);
    let (t, home, away) = tenant(&app, "capped-fence");
    seed(&layout, &home, &t, 200).await;

    let args = step(
        "run",
        &home,
        &away,
        &t,
        &["--confirm", "--grace", "0s", "--max-fence", "300ms"],
    );
    let paused = start_paused(&tool, "after-fence:800ms", &args).await;
    let (code, record, stderr) = paused.finish();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("longer than --max-fence 300 ms") && stderr.contains("was lifted"),
        "{stderr}"
    );
    assert_eq!(record["state"], "copied", "{record}");
    assert!(
        record["last_error"].as_str().unwrap().contains("max-fence"),
        "{record}"
    );
    // The source is authoritative and writable again, and still captures the writes.
    let guards = tenant_guards(&layout, &home).await;
    assert_eq!(
        guards,
        vec![vec![Some(t.clone()), Some("capturing".into())]]
    );
    let created = app
        .create(&t, json!({"url": "https://capped.example/after-lift"}))
        .await;
    assert_eq!(created["shard"], home.as_str());

    let id = record["id"].as_i64().unwrap().to_string();
    let done = tool.ok(&["resume", &id, "--grace", "0s"]);
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(
        count(&layout, &away, &t).await,
        201,
        "the later write moved too"
    );
    assert_eq!(count(&layout, &home, &t).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_row_changed_during_the_copy_and_tampered_with_inside_the_fence_aborts_the_move() {
    let layout = move_layout().await;
    let app = spawn(&layout, "tamper-fence").await;
    let tool = Tool::new(&layout);
    let (t, home, away) = tenant(&app, "fence-tamper");
    seed(&layout, &home, &t, 40).await;
    let copied = tool.ok(&step("copy", &home, &away, &t, &[]));
    assert_eq!(copied["state"], "copied");
    // A change made while the move runs: captured, and copied before the fence.
    let id = rows(&layout, &home, &t).await[0][0].clone().unwrap();
    let res = app
        .patch(&format!("/api/bookmarks/{id}"))
        .headers(app.tenant(&t).await)
        .json(&json!({"title": "changed during the copy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let before = rows(&layout, &home, &t).await;

    let paused = start_paused(
        &tool,
        "after-fence:1500ms",
        &step("verify", &home, &away, &t, &[]),
    )
    .await;
    // Inside the fence the copy of that row is altered behind the mover's back.
    crate::moves::on_shard(
        &layout,
        &away,
        &format!(
            "SET autumn.move_bypass = 'test'; UPDATE bookmarks SET title = 'tampered' \
             WHERE tenant_id = '{t}' AND id = '{id}'"
        ),
    )
    .await;
    let (code, record, stderr) = paused.finish();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        // 40 rows and the touched one, each with its change feed entry.
        stderr.contains("verified 80 row(s) ahead of the fence")
            && stderr.contains("2 row(s) with changes still being copied are compared inside it")
            && stderr.contains("changed during the copy differ")
            && stderr.contains(&format!("{id} of {t} (different on the destination)")),
        "{stderr}"
    );
    assert_eq!(record["state"], "aborted", "{record}");
    assert_eq!(
        rows(&layout, &home, &t).await,
        before,
        "nothing deleted from the source"
    );
    assert_eq!(count(&layout, &away, &t).await, 0);
    assert!(
        tenant_guards(&layout, &home).await.is_empty()
            && tenant_guards(&layout, &away).await.is_empty()
    );
    app.create(&t, json!({"url": "https://tampered.example/writable"}))
        .await;
    app.stop().await;
}
