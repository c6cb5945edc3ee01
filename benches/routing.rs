//! How long hash routing takes for a typical 16-byte tenant id (target: < 25 ns/key).

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
    let key = "tenant-00001234"; // 15 bytes + 1 below
    let key = format!("{key}x");
    assert_eq!(key.len(), 16);

    let mut group = c.benchmark_group("route_16_byte_tenant");
    group.throughput(Throughput::Elements(1));
    group.bench_function("slot_only", |b| {
        b.iter(|| ShardKey::Str(black_box(&key)).slot())
    });
    group.bench_function("hash_route", |b| {
        b.iter(|| shards.hash_route(ShardKey::Str(black_box(&key))).shard)
    });
    let router = PinRouter::from_shard_set(&shards);
    group.bench_function("pin_router_trait_object", |b| {
        let router: &dyn ShardRouter = &router;
        b.iter(|| {
            futures::executor::block_on(router.route(ShardKey::Str(black_box(&key)), &shards))
                .unwrap()
                .shard
        })
    });
    group.finish();
}

criterion_group!(benches, routing);
criterion_main!(benches);
