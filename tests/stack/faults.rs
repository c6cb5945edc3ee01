//! The fault check, short: `loadgen --verify` through nginx for a minute while the nemesis's
//! short plan (`cargo xtask nemesis --plan short`, run here through the xtask library) kills
//! a web replica, pauses a shard primary and moves two tenants. Once the nemesis says the
//! stack is healed, every tenant is read back through nginx and from every shard primary: no
//! acknowledged write may be lost, no refused one may appear, no row may sit on a shard its
//! tenant does not route to. (`cargo xtask fault-run` is the long version, with every fault;
//! docs/reliability.md has its figures.)

use std::time::Duration;

use loadgen::{Config, Load, VerifyConfig};
use xtask::compose::Compose;
use xtask::nemesis::{Nemesis, Plan, Schedule};

use super::{ROOT, Stack, common::unique};

/// Seed of the nemesis's schedule and of the load; a failure names it.
const SEED: u64 = 7;

pub async fn no_acknowledged_write_is_lost_under_faults(stack: &Stack) {
    let timeline = std::env::temp_dir().join(format!("{}.jsonl", unique("timeline")));
    let tenants = 60;
    // The rows are read as the schema's owner, whom no tenant policy holds.
    let owner = stack.owner_password();
    let shard = |name: &str, port: u16| {
        (
            name.to_owned(),
            format!("postgres://bookmarks:{owner}@127.0.0.1:{port}/bookmarks_shard"),
        )
    };
    let config = Config {
        base_url: stack.base.clone(),
        admin_token: Some(stack.admin_token.clone()),
        tenants,
        seed: SEED,
        load: Load::Open {
            rate: 60.0,
            max_in_flight: 256,
        },
        duration: Duration::from_secs(60),
        timeout: Duration::from_secs(10),
        verify: Some(VerifyConfig {
            settle: Duration::from_secs(3),
            patience: Duration::from_secs(120),
            shards: vec![
                shard("shard0", stack.shard_ports[0]),
                shard("shard1", stack.shard_ports[1]),
                shard("shard2", stack.shard_ports[2]),
            ],
        }),
        timeline: Some(timeline.clone()),
        ..Config::default()
    };
    // docs/deploys.md's "Adding a shard" put shard2 in every app service's topology: the
    // nemesis's commands (and move_slot) must see it there too.
    let mut compose = Compose::with_env(stack.env());
    compose.set(
        "COMPOSE_FILE",
        format!("{}:{ROOT}/compose/shard2.yml", stack.files.join(":")),
    );
    let schedule =
        Schedule::draw(SEED, Plan::Short, None, tenants).expect("the short plan is drawn");
    // Its log is kept for the messages below, not printed as it goes.
    let nemesis = Nemesis::new(compose, schedule, &timeline).log_to(std::io::sink());
    let (report, nemesis) = tokio::join!(loadgen::run(&config), nemesis.run());
    let report = report.expect("the load runs");
    eprintln!("{}", report.table());
    let nemesis = nemesis.unwrap_or_else(|e| panic!("the nemesis failed: {e:#}"));
    let said = &nemesis.log;
    let faults = report.faults.as_ref().expect("the timeline was joined");
    assert!(faults.healed, "the nemesis healed the stack: {said}");
    let kinds: Vec<&str> = faults.windows.iter().map(|w| w.fault.as_str()).collect();
    for kind in ["kill-web", "pause-shard", "move"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}: {said}");
    }
    assert!(
        faults
            .windows
            .iter()
            .filter(|w| w.fault != "move")
            .all(|w| w.requests > 0),
        "the load ran through every fault (a move's window holds its own tenant's requests \
         only): {}",
        faults.table()
    );
    let verdict = report.verdict.as_ref().expect("--verify ran");
    assert!(
        verdict.passed(),
        "seed {SEED}: {} lost, {} phantom, {} misplaced, {} unreadable:\n{}",
        verdict.lost,
        verdict.phantom,
        verdict.misplaced,
        verdict.unreadable.len(),
        report.to_json()
    );
    let count = |by: &std::collections::BTreeMap<&str, usize>, k: &str| by.get(k).copied();
    assert!(
        count(&verdict.collection_writes, "acked").is_some_and(|n| n > 0)
            && count(&verdict.viewer_writes, "refused").is_some_and(|n| n > 0)
            && count(&verdict.viewer_writes, "acked").is_none(),
        "the mix made collections and sent viewers' writes, all refused: {:?} {:?}",
        verdict.collection_writes,
        verdict.viewer_writes
    );
    assert!(
        report.total.ok > 1000,
        "most requests succeeded: {}",
        report.table()
    );
    let _ = std::fs::remove_file(&timeline);
}
