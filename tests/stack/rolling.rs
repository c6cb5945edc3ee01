//! Deploys and a third shard: requests held in flight across a replica's SIGTERM are all
//! answered; then `loadgen --verify` sends a steady mix of creates, reads, updates and
//! deletes through nginx while docs/deploys.md's "Adding a shard" runs (both replicas and the
//! worker restarted, a range moved onto the new shard). No request may fail, and the
//! checker must find every acknowledged write afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::{ROOT, Stack, eventually, run_section};

/// The load's seed: every bookmark it creates has a URL under `https://example.com/11/run-`.
const SEED: u64 = 11;

/// How many bookmarks the load's runs have created on the shards `services` name.
fn load_creates(stack: &Stack, services: &[&str]) -> usize {
    let query =
        format!("select count(*) from bookmarks where url like 'https://example.com/{SEED}/run-%'");
    services
        .iter()
        .map(|service| stack.psql(service, &query).parse::<usize>().unwrap())
        .sum()
}

/// The load: `loadgen --verify` through nginx, open loop at `rate` requests/s over
/// `tenants` tenants (`tenant-0001`…) with the default mix, until [`Load::finish`].
struct Load {
    stop: Arc<AtomicBool>,
    run: std::thread::JoinHandle<Result<loadgen::Report, String>>,
}

impl Load {
    fn start(stack: &Stack, tenants: usize, rate: f64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let config = loadgen::Config {
            base_url: stack.base.clone(),
            admin_token: Some(stack.admin_token.clone()),
            tenants,
            seed: SEED,
            load: loadgen::Load::Open {
                rate,
                max_in_flight: 256,
            },
            // An upper bound: the checks it runs beside end it.
            duration: Duration::from_secs(900),
            // Requests held in flight across a replica's leaving wait for their answer.
            timeout: Duration::from_secs(20),
            // The default mix without its viewer writes: those are refused by design (403),
            // and every request here must succeed across the restarts.
            mix: "list=68,get=10,create=14,update=5,delete=1,collection=1"
                .parse()
                .expect("the mix parses"),
            verify: Some(loadgen::VerifyConfig {
                settle: Duration::from_secs(2),
                ..loadgen::VerifyConfig::default()
            }),
            stop: Some(stop.clone()),
            ..loadgen::Config::default()
        };
        // Its own thread and runtime: the load keeps its pace whatever the test awaits.
        let run = std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
            runtime
                .block_on(loadgen::run(&config))
                .map_err(|e| e.to_string())
        });
        Load { stop, run }
    }

    /// Stops the load; asserts that no request failed and that the checker found every
    /// acknowledged write, read back through nginx.
    async fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let run = self.run;
        let report = tokio::task::spawn_blocking(move || run.join().unwrap())
            .await
            .unwrap()
            .expect("the load runs");
        eprintln!("{}", report.table());
        // A 404 is loadgen's own race (a get, update or delete of a bookmark another of
        // its requests is deleting); whether any write went missing is the checker's to say.
        let failed: Vec<_> = report
            .total
            .errors
            .iter()
            .filter(|(kind, _)| kind.as_str() != "404")
            .collect();
        assert!(failed.is_empty(), "requests failed: {failed:?}");
        let verdict = report.verdict.as_ref().expect("--verify ran");
        assert!(verdict.passed(), "{}", verdict.summary());
        assert!(
            verdict.writes.get("acked").is_some_and(|&n| n > 100),
            "the load wrote: {}",
            verdict.summary()
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
    // Every create is in flight: each one's insert waits for the table lock.
    let queued = eventually(Duration::from_secs(10), || async {
        stack
            .psql(
                "postgres-shard-1",
                "select count(*) from pg_locks l join pg_class c on c.oid = l.relation \
                 where c.relname = 'bookmarks' and not l.granted",
            )
            .parse::<usize>()
            .is_ok_and(|n| n >= creates.len())
    })
    .await;
    assert!(queued, "the held creates wait for shard1's lock");
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

/// The whole check: a replica's SIGTERM with requests in flight, then, under load, the
/// docs/deploys.md's "Adding a shard" (a full rolling restart and a range move onto shard2), then
/// the load's verdict and a look at shard2.
pub async fn deploys_and_a_third_shard_fail_no_request(stack: &Stack) {
    // Before the load: the held creates lock shard1's table for 6 s, long enough for the
    // shard's query deadline to refuse the load's writes there, which is no roll's doing.
    held_creates_across_a_sigterm(stack).await;

    let two_shards = ["postgres-shard-0", "postgres-shard-1"];
    let before = load_creates(stack, &two_shards);
    let load = Load::start(stack, 30, 45.0);
    // The load is under way (its creates land) before the deploy starts; a load that ended
    // at once says why in `finish`.
    let under_way = eventually(Duration::from_secs(60), || async {
        load.run.is_finished() || load_creates(stack, &two_shards) >= before + 10
    })
    .await;
    assert!(under_way, "the load's creates land before the deploy");

    let (hooli_key, _) = stack.key_of("hooli").await;
    let said = run_section(stack, "add-shard", &[("HOOLI_KEY", &hooli_key)]);
    // The load goes on after it: its creates land on the three shards.
    let three_shards = ["postgres-shard-0", "postgres-shard-1", "postgres-shard-2"];
    let after = load_creates(stack, &three_shards);
    let carried_on = eventually(Duration::from_secs(60), || async {
        load.run.is_finished() || load_creates(stack, &three_shards) >= after + 10
    })
    .await;
    assert!(
        carried_on,
        "the load's creates land after the new shard is in"
    );
    load.finish().await;

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
