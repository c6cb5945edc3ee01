//! How long routing takes per 16-byte tenant id (target: < 25 ns/key).
//!
//! Each iteration routes 1024 distinct ids, so the figure is an average over realistic,
//! varied keys rather than one key the branch predictor and caches have memorised.

use std::hint::black_box;
use std::sync::Arc;

use bookmarks_sharded::configuration::Settings;
use bookmarks_sharded::sharding::{PinRouter, ShardKey, ShardRouter, ShardSet};
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
                black_box(shards.hash_route(ShardKey::Str(black_box(k))).shard);
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
    group.finish();
}

criterion_group!(benches, routing);
criterion_main!(benches);
