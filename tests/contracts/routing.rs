//! Routing over a topology: hash and pin routers, lazy pools, and the property that moving
//! one slot in the config moves exactly that slot's keys.

use std::sync::Arc;

use bookmarks_sharded::configuration::Settings;
use bookmarks_sharded::sharding::{
    PinRouter, RouteVia, ShardKey, ShardRouter, ShardSet, hash_route,
};
use proptest::prelude::*;

fn shard_set(text: &str) -> ShardSet {
    let settings = Settings::from_toml_str(text, "test", Vec::new()).expect("valid config");
    ShardSet::new(Arc::new(settings.topology)).expect("pools build")
}

fn two_shards(shard0_slots: &str, shard1_slots: &str, extra: &str) -> String {
    format!(
        r#"
[database]
primary_url = "postgres://u:p@127.0.0.1:1/control"
[[database.shards]]
name = "shard0"
primary_url = "postgres://u:p@127.0.0.1:1/s0"
replica_url = "postgres://u:p@127.0.0.1:1/s0ro"
slots = {shard0_slots}
[[database.shards]]
name = "shard1"
primary_url = "postgres://u:p@127.0.0.1:1/s1"
slots = {shard1_slots}
{extra}
"#
    )
}

#[test]
fn a_shard_set_builds_with_no_database_running() {
    // Port 1 has no server: nothing may have been dialed.
    let set = shard_set(&two_shards(r#"["0-8191"]"#, r#"["8192-16383"]"#, ""));
    assert_eq!(set.len(), 2);
    assert_eq!(
        set.iter().map(|s| s.name()).collect::<Vec<_>>(),
        ["shard0", "shard1"]
    );
    assert!(set.by_name("shard0").unwrap().replica_pool().is_some());
    assert!(set.by_name("shard1").unwrap().replica_pool().is_none());
    assert!(set.by_name("shard2").is_none());
    assert_eq!(set.iter().next().unwrap().primary_pool().status().size, 0);
}

#[tokio::test]
async fn a_checkout_from_a_dead_shard_fails_within_the_connect_timeout() {
    let text = two_shards(r#"["0-8191"]"#, r#"["8192-16383"]"#, "").replace(
        "[database]\n",
        "[database]\nconnect_timeout_ms = 500\nacquire_timeout_ms = 500\n",
    );
    let set = shard_set(&text);
    let started = std::time::Instant::now();
    let result = set.by_name("shard1").unwrap().primary_pool().get().await;
    assert!(result.is_err());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_hash_router_sends_keys_to_the_owner_of_their_slot() {
    let set = shard_set(&two_shards(r#"["0-8191"]"#, r#"["8192-16383"]"#, ""));
    // Without pins, the pin router is hash routing behind the router trait.
    let router: Arc<dyn ShardRouter> = Arc::new(PinRouter::from_shard_set(&set));
    for (key, slot, shard) in [("tenant-1", 12427, "shard1"), ("hooli", 3974, "shard0")] {
        let route = router.route(ShardKey::Str(key), &set).await.unwrap();
        assert_eq!(route.slot.index(), slot);
        assert_eq!(set.get(route.shard).name(), shard);
        assert_eq!(route.via, RouteVia::Hash);
        assert_eq!(route, hash_route(&set, key));
    }
    let route = router.route(ShardKey::Int(0), &set).await.unwrap();
    assert_eq!(
        (route.slot.index(), set.get(route.shard).name()),
        (3503, "shard0")
    );
}

#[tokio::test]
async fn the_pin_router_prefers_pins_and_hashes_everyone_else() {
    let set = shard_set(&two_shards(
        r#"["0-8191"]"#,
        r#"["8192-16383"]"#,
        "[sharding]\npins = { \"acme-corp\" = \"shard0\" }",
    ));
    let router: Arc<dyn ShardRouter> = Arc::new(PinRouter::from_shard_set(&set));

    let pinned = router
        .route(ShardKey::Str("acme-corp"), &set)
        .await
        .unwrap();
    assert_eq!(set.get(pinned.shard).name(), "shard0");
    assert_eq!(pinned.via, RouteVia::Pin);
    assert_eq!(
        pinned.slot.index(),
        11394,
        "the hash slot is still reported"
    );

    let hashed = router.route(ShardKey::Str("tenant-1"), &set).await.unwrap();
    assert_eq!(
        (set.get(hashed.shard).name(), hashed.via),
        ("shard1", RouteVia::Hash)
    );

    // Pins are case-sensitive and match text keys only.
    let other_case = router
        .route(ShardKey::Str("ACME-CORP"), &set)
        .await
        .unwrap();
    assert_eq!(other_case.via, RouteVia::Hash);
}

#[test]
fn slot_for_key_and_shard_for_slot_agree_with_the_key_contract() {
    let set = shard_set(&two_shards(r#"["0-8191"]"#, r#"["8192-16383"]"#, ""));
    let slot = ShardKey::from("acme-corp").slot();
    assert_eq!(slot.index(), 11394);
    assert_eq!(set.shard_for_slot(slot).name(), "shard1");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The resharding runbook's safety property: moving one slot from shard0 to shard1 in the
    /// config changes the owner of exactly the keys in that slot.
    #[test]
    fn moving_one_slot_moves_exactly_that_slots_keys(
        keys in proptest::collection::vec(any::<String>(), 1..200),
        int_keys in proptest::collection::vec(any::<i64>(), 0..50),
        pick in any::<prop::sample::Index>(),
    ) {
        // Move the slot of one of the generated keys, so every case moves some key.
        let moved = ShardKey::Str(&keys[pick.index(keys.len())]).slot().index();
        let before = if moved < 8192 {
            shard_set(&two_shards(r#"["0-8191"]"#, r#"["8192-16383"]"#, ""))
        } else {
            shard_set(&two_shards(r#"["0-16383"]"#, "[]", ""))
        };
        let after_shard0: Vec<String> = [(0, moved), (moved + 1, if moved < 8192 { 8192 } else { 16384 })]
            .iter()
            .filter(|(a, b)| a < b)
            .map(|(a, b)| format!("\"{a}-{}\"", b - 1))
            .collect();
        let after_shard1 = if moved < 8192 {
            format!(r#"["{moved}", "8192-16383"]"#)
        } else {
            format!(r#"["{moved}"]"#)
        };
        let after = shard_set(&two_shards(&format!("[{}]", after_shard0.join(", ")), &after_shard1, ""));

        for slot in bookmarks_sharded::sharding::Slot::all() {
            let changed = before.shard_for_slot(slot).name() != after.shard_for_slot(slot).name();
            prop_assert_eq!(changed, slot.index() == moved, "slot {}", slot);
        }
        let str_keys = keys.iter().map(|k| ShardKey::Str(k));
        for key in str_keys.chain(int_keys.iter().map(|&i| ShardKey::Int(i))) {
            let changed = before.get(hash_route(&before, key).shard).name() != after.get(hash_route(&after, key).shard).name();
            prop_assert_eq!(changed, key.slot().index() == moved, "key {:?}", key);
        }
    }
}
