//! How long routing takes per 16-byte tenant id (targets: hash routing < 25 ns/key, a
//! cached directory hit < 100 ns/key).
//!
//! Each iteration routes 1024 distinct ids, so the figure is an average over realistic,
//! varied keys rather than one key the branch predictor and caches have memorised.

use std::hint::black_box;
use std::sync::Arc;

use bookmarks_sharded::configuration::Settings;
use bookmarks_sharded::pg::pool::build_pool;
use bookmarks_sharded::sharding::{
    DirectoryRouter, PinRouter, ShardKey, ShardRouter, ShardSet, hash_route,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn shard_set() -> ShardSet {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/autumn.toml")).unwrap();
    let settings = Settings::from_toml_str(&text, "autumn.toml", Vec::new()).unwrap();
    ShardSet::new(Arc::new(settings.topology)).unwrap()
}

fn routing(c: &mut Criterion) {
    let shards = shard_set();
    let keys: Vec<String> = (0..1024).map(|i| format!("tenant-{i:09}")).collect();
    assert!(keys.iter().all(|k| k.len() == 16));

    let mut group = c.benchmark_group("route_16_byte_tenant");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("slot_only", |b| {
        b.iter(|| {
            for k in &keys {
                black_box(ShardKey::Str(black_box(k)).slot());
            }
        })
    });
    group.bench_function("hash_route", |b| {
        b.iter(|| {
            for k in &keys {
                black_box(hash_route(&shards, ShardKey::Str(black_box(k))).shard);
            }
        })
    });
    let router = PinRouter::from_shard_set(&shards);
    let router: &dyn ShardRouter = &router;
    group.bench_function("pin_router_trait_object", |b| {
        b.iter(|| {
            for k in &keys {
                let route =
                    futures::executor::block_on(router.route(ShardKey::Str(black_box(k)), &shards));
                black_box(route.unwrap().shard);
            }
        })
    });

    // A cached directory hit: what every request of a known tenant pays with directory
    // routing on. Half the keys have a directory row, half are cached misses (no row);
    // the control pool is never used, so no database is needed.
    let topology = shards.topology();
    let control = build_pool(
        &topology.control_url,
        2,
        topology.pool_bounds(),
        "control",
        None,
    )
    .unwrap();
    let directory = DirectoryRouter::new(control, &shards);
    for (i, k) in keys.iter().enumerate() {
        directory.remember(k, (i % 2 == 0).then_some("shard0"), &shards);
    }
    let directory: &dyn ShardRouter = &directory;
    group.bench_function("directory_cached_hit", |b| {
        b.iter(|| {
            for k in &keys {
                let route = futures::executor::block_on(
                    directory.route(ShardKey::Str(black_box(k)), &shards),
                );
                black_box(route.unwrap().shard);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, routing);
criterion_main!(benches);
