//! What proving a request's tenant costs when its key is cached: the per-request price of
//! `[tenancy] auth = "api_key"` (`cargo xtask bench request-path` and `cargo xtask bench
//! instructions` measure it inside the whole request).
//!
//! Each iteration checks 1024 distinct keys, as many tenants' requests would arrive; the
//! keys are remembered by the store first, so the control database is never asked.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Request;
use bookmarks_sharded::configuration::{AuthMode, Settings};
use bookmarks_sharded::pg::control::ControlLookups;
use bookmarks_sharded::pg::pool::build_pool;
use bookmarks_sharded::sharding::ShardSet;
use bookmarks_sharded::tenancy::api_key::ApiKey;
use bookmarks_sharded::tenancy::auth::Authenticator;
use bookmarks_sharded::tenancy::key_store::KeyStore;
use bookmarks_sharded::tenancy::keys::Credential;
use bookmarks_sharded::tenancy::session::Sessions;
use bookmarks_sharded::tenancy::{TenantHeader, TenantId};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn key_check(c: &mut Criterion) {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/autumn.toml")).unwrap();
    let settings = Settings::from_toml_str(&text, "autumn.toml", Vec::new()).unwrap();
    let shards = ShardSet::new(Arc::new(settings.topology)).unwrap();
    let topology = shards.topology();
    // Never used: every key is remembered, so no lookup reaches the pool.
    let control = build_pool(
        &topology.control_url,
        2,
        topology.pool_bounds(),
        "control",
        None,
    )
    .unwrap();
    let store = Arc::new(KeyStore::new(
        ControlLookups::new(control, topology.lookup_bounds()),
        Duration::from_secs(3600),
    ));
    let mut requests = Vec::new();
    for i in 0..1024 {
        let tenant = TenantId::parse(&format!("tenant-{i:09}")).unwrap();
        let key = ApiKey::generate();
        store.remember(
            key.digest(),
            Some(Credential {
                id: i,
                tenant: tenant.clone(),
                member: uuid::Uuid::nil(),
                member_name: "Owner".to_owned(),
                role: bookmarks_sharded::tenancy::members::Role::Admin,
                revoked: false,
                session_generation: 0,
            }),
        );
        let (parts, ()) = Request::builder()
            .uri("/api/bookmarks")
            .header("authorization", format!("Bearer {}", key.expose()))
            .header("x-tenant-id", tenant.as_str())
            .body(())
            .unwrap()
            .into_parts();
        requests.push((key, parts));
    }
    let authenticator = Authenticator::new(
        AuthMode::ApiKey,
        TenantHeader::new("X-Tenant-Id"),
        Arc::clone(&store),
        Sessions::ephemeral(Duration::from_secs(3600), false),
    );

    let mut group = c.benchmark_group("cached_key_check");
    group.throughput(Throughput::Elements(requests.len() as u64));
    group.bench_function("sha256_of_a_key", |b| {
        b.iter(|| {
            for (key, _) in &requests {
                black_box(black_box(key).digest());
            }
        })
    });
    group.bench_function("authenticate_a_request", |b| {
        b.iter(|| {
            for (_, parts) in &requests {
                let proven =
                    futures::executor::block_on(authenticator.authenticate(black_box(parts)));
                black_box(proven.unwrap());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, key_check);
criterion_main!(benches);
