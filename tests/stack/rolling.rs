//! Deploys and a third shard under load: a steady mix of creates, reads, updates and
//! deletes through nginx while requests are held in flight across a replica's SIGTERM,
//! while both replicas and the worker are restarted, and while the README's "Adding a
//! shard" runs. No request may fail, and every acknowledged create must be there after.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::{ROOT, Stack, eventually, run_readme};

/// What the load saw: requests by operation, failures (with what came back), and the
/// creates it was told succeeded and did not delete since.
#[derive(Default)]
struct Seen {
    sent: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
    kept: Vec<(usize, String, String)>,
    slowest: Duration,
}

/// One lane of load: its tenants (each in no other lane, so that one tenant's operations
/// are in order), about `per_second` requests a second until `stop`.
async fn lane(
    base: String,
    tenants: Vec<(String, HeaderMap)>,
    per_second: u32,
    stop: Arc<AtomicBool>,
) -> Seen {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut seen = Seen::default();
    let mut alive: Vec<Vec<String>> = vec![Vec::new(); tenants.len()];
    let pace = Duration::from_secs(1) / per_second;
    let mut tick = tokio::time::interval(pace);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let t = n % tenants.len();
        let (tenant, auth) = &tenants[t];
        let round = n / tenants.len();
        n += 1;
        let (op, req, expect) = match (round % 5, alive[t].last()) {
            (1 | 3, _) | (_, None) => {
                let url = format!("https://roll.example/{tenant}/{n}");
                let req = http
                    .post(format!("{base}/api/bookmarks"))
                    .json(&json!({ "url": url }));
                ("create", req, 201)
            }
            (0, Some(id)) => ("get", http.get(format!("{base}/api/bookmarks/{id}")), 200),
            (2, Some(id)) => {
                let req = http
                    .patch(format!("{base}/api/bookmarks/{id}"))
                    .json(&json!({ "title": format!("patched {n}") }));
                ("patch", req, 200)
            }
            (_, Some(id)) => (
                "delete",
                http.delete(format!("{base}/api/bookmarks/{id}")),
                204,
            ),
        };
        *seen.sent.entry(op).or_default() += 1;
        let started = Instant::now();
        let res = req.headers(auth.clone()).send().await;
        seen.slowest = seen.slowest.max(started.elapsed());
        match res {
            Ok(res) if res.status() == expect => match op {
                "create" => {
                    let body: Value = res.json().await.unwrap_or_default();
                    let id = body["id"].as_str().unwrap_or_default().to_owned();
                    let url = body["url"].as_str().unwrap_or_default().to_owned();
                    seen.kept.push((t, id.clone(), url));
                    alive[t].push(id);
                }
                "delete" => {
                    let id = alive[t].pop().unwrap();
                    seen.kept.retain(|(_, kept, _)| *kept != id);
                }
                _ => {}
            },
            Ok(res) => {
                let status = res.status();
                let by = res
                    .headers()
                    .get("x-served-by")
                    .map(|v| v.to_str().unwrap_or("").to_owned());
                let body = res.text().await.unwrap_or_default();
                seen.failures
                    .push(format!("{op} {tenant}: {status} from {by:?}: {body}"));
            }
            Err(e) => seen.failures.push(format!("{op} {tenant}: {e}")),
        }
    }
    seen
}

/// The load: `lanes` lanes over `tenants`, about `per_second` requests a second in all.
struct Load {
    stop: Arc<AtomicBool>,
    lanes: Vec<tokio::task::JoinHandle<Seen>>,
    tenants: Vec<(String, HeaderMap)>,
    lanes_count: usize,
}

impl Load {
    async fn start(stack: &Stack, tenants: &[String], lanes: usize, per_second: u32) -> Load {
        let mut with_auth = Vec::new();
        for t in tenants {
            with_auth.push((t.clone(), stack.as_tenant(t).await));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..lanes)
            .map(|l| {
                let mine: Vec<_> = with_auth.iter().skip(l).step_by(lanes).cloned().collect();
                let per_lane = (per_second / lanes as u32).max(1);
                tokio::spawn(lane(stack.base.clone(), mine, per_lane, stop.clone()))
            })
            .collect();
        Load {
            stop,
            lanes: handles,
            tenants: with_auth,
            lanes_count: lanes,
        }
    }

    /// Stops the load; asserts that nothing failed and that every acknowledged create that
    /// was not deleted is there, with its URL, through nginx.
    async fn finish(self, stack: &Stack) {
        self.stop.store(true, Ordering::Relaxed);
        let mut sent = BTreeMap::new();
        let mut failures = Vec::new();
        let mut slowest = Duration::ZERO;
        let mut checked = 0;
        for (l, handle) in self.lanes.into_iter().enumerate() {
            let seen = handle.await.unwrap();
            for (op, n) in seen.sent {
                *sent.entry(op).or_insert(0) += n;
            }
            failures.extend(seen.failures);
            slowest = slowest.max(seen.slowest);
            let mine: Vec<_> = self
                .tenants
                .iter()
                .skip(l)
                .step_by(self.lanes_count)
                .collect();
            for (t, id, url) in seen.kept {
                let res = stack
                    .get(&format!("/api/bookmarks/{id}"))
                    .headers(mine[t].1.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    res.status(),
                    200,
                    "acknowledged create {id} of {}",
                    mine[t].0
                );
                let body: Value = res.json().await.unwrap();
                assert_eq!(body["url"], url.as_str(), "{body}");
                checked += 1;
            }
        }
        let total: usize = sent.values().sum();
        eprintln!(
            "load: {total} requests {sent:?}, slowest {slowest:?}, {checked} acknowledged creates read back"
        );
        assert!(
            sent.get("create").is_some_and(|&n| n > 20)
                && sent.get("delete").is_some_and(|&n| n > 5),
            "the load ran every kind of request: {sent:?}"
        );
        assert!(
            failures.is_empty(),
            "{} of {total} requests failed, e.g. {:?}",
            failures.len(),
            &failures[..failures.len().min(5)]
        );
    }
}

/// Creates sent while their shard's table is locked, so that they are in flight when web1
/// gets SIGTERM (from the rolling restart); all must be answered 201.
async fn held_creates_across_a_sigterm(stack: &Stack) {
    let tenant = "acme-corp"; // on shard1
    let auth = stack.as_tenant(tenant).await;
    let mut lock = stack.command("docker");
    lock.args([
        "compose",
        "exec",
        "-T",
        "postgres-shard-1",
        "psql",
        "-U",
        "bookmarks",
    ])
    .args(["-d", "bookmarks_shard", "-c"])
    .arg("begin; lock table bookmarks in exclusive mode; select pg_sleep(6); commit");
    let holder = std::thread::spawn(move || lock.output().unwrap());
    let locked = eventually(Duration::from_secs(10), || async {
        stack.psql(
            "postgres-shard-1",
            "select count(*) from pg_locks l join pg_class c on c.oid = l.relation \
             where c.relname = 'bookmarks' and l.mode = 'ExclusiveLock' and l.granted",
        ) == "1"
    })
    .await;
    assert!(locked, "shard1's bookmarks table is locked");
    let creates: Vec<_> = (0..6)
        .map(|i| {
            let req = stack
                .http
                .post(format!("{}/api/bookmarks", stack.base))
                .headers(auth.clone())
                .timeout(Duration::from_secs(20))
                .json(&json!({ "url": format!("https://roll.example/held/{i}") }));
            tokio::spawn(req.send())
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let roll = stack
        .command(&format!("{ROOT}/scripts/rolling-restart.sh"))
        .arg("web1")
        .output()
        .unwrap();
    assert!(
        roll.status.success(),
        "rolling-restart.sh web1: {}",
        String::from_utf8_lossy(&roll.stderr)
    );
    let mut served_by = Vec::new();
    for create in creates {
        let res = create.await.unwrap().expect("a held create is answered");
        served_by.push(res.headers()["x-served-by"].to_str().unwrap().to_owned());
        assert_eq!(res.status(), 201, "{:?}", res.text().await);
    }
    assert!(
        served_by.iter().any(|by| by == "web1"),
        "some of the held creates were in flight on web1 when it got SIGTERM: {served_by:?}"
    );
    let held = holder.join().unwrap();
    assert!(held.status.success(), "{held:?}");
}

/// The whole check: load, a replica's SIGTERM with requests in flight, then the README's
/// "Adding a shard" (a full rolling restart and a range move onto shard2), then the load's
/// verdict and a look at shard2.
pub async fn deploys_and_a_third_shard_fail_no_request(stack: &Stack) {
    let tenants: Vec<String> = (0..30).map(|i| format!("roll-{i}")).collect();
    let load = Load::start(stack, &tenants, 3, 45).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    held_creates_across_a_sigterm(stack).await;

    let (hooli_key, _) = stack.key_of("hooli").await;
    let said = run_readme(stack, "add-shard", &[("HOOLI_KEY", &hooli_key)]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    load.finish(stack).await;

    assert!(said.contains("left on shard0: 0"), "{said}");
    assert!(
        said.contains(r#""edit": "slots = [\"3072-8191\"]""#),
        "bookmarks slots prints the autumn.toml line for shard2: {said}"
    );
    let stats: Value = stack
        .get("/api/stats")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let shard2 = stats["shards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "shard2")
        .cloned()
        .unwrap_or_default();
    assert!(
        shard2["slots"] == 5120 && shard2["bookmarks"].as_i64().is_some_and(|n| n > 0),
        "shard2 owns the moved range and its rows: {stats}"
    );
    let leader = format!(
        "select count(*) from pg_locks where locktype = 'advisory' and granted \
         and ((classid::bigint << 32) | objid::bigint) = {}",
        bookmarks_sharded::search::reindexer::LEADER_LOCK
    );
    let led = eventually(Duration::from_secs(10), || async {
        stack.psql("postgres-shard-2", &leader) == "1"
    })
    .await;
    assert!(led, "shard2 has one reindexer leader");
}
