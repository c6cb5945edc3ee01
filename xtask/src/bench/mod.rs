//! `cargo xtask bench …`: the benchmarks. Those that need the app outside Docker start
//! throwaway Postgres servers ([`crate::postgres`]); those that need the whole stack start
//! a compose stack of their own ([`crate::compose`]); the data-moving ones are criterion-style
//! harnesses under benches/ that start Postgres in Docker ([`criterion`]).

pub mod criterion;
pub mod fleet;
pub mod instructions;
pub mod load;
pub mod outages;
pub mod ready_flood;
pub mod replica_reads;
pub mod request_path;
pub mod rls_whale;
pub mod rolling;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// The request path against the database's ceiling and a bare handler (docs/performance.md).
    RequestPath(request_path::Args),
    /// What a flood of /ready costs a replica's databases and its tenants.
    ReadyFlood(ready_flood::Args),
    /// Instructions per request, counted by callgrind (steady across runs, unlike req/s).
    Instructions(instructions::Args),
    /// The same service and load at 2, 16 and 64 shards (docs/performance.md, "A fleet").
    Fleet(fleet::Args),
    /// What row-level security costs a whale's filtered reads.
    RlsWhale(rls_whale::Args),
    /// Deploys and a third shard under load, on a compose stack of its own (docs/deploys.md).
    Rolling(rolling::Args),
    /// What a tenant sees when its shard's primary stops or is paused (docs/outages.md).
    #[command(alias = "outage")]
    Outages(outages::Args),
    /// Reads from streaming replicas with consistency tokens, against primaries only.
    ReplicaReads(replica_reads::Args),
    /// A tenant of 100 000 and one of 1 000 000 bookmarks moved under load (benches/move_tenant.rs).
    Move(criterion::Args),
    /// A slot range moved under load through two servers (benches/move_range.rs).
    MoveRange(criterion::Args),
    /// What a move's delete costs the source shard's other tenants (benches/move_delete.rs).
    MoveDelete(criterion::Args),
    /// How far the search index trails writes (benches/index_lag.rs).
    IndexLag(criterion::Args),
}

pub async fn run(bench: Bench) -> crate::Outcome {
    match bench {
        Bench::RequestPath(args) => request_path::run(args).await,
        Bench::ReadyFlood(args) => ready_flood::run(args).await,
        Bench::Instructions(args) => instructions::run(args).await,
        Bench::Fleet(args) => fleet::run(args).await,
        Bench::RlsWhale(args) => rls_whale::run(args).await,
        Bench::Rolling(args) => rolling::run(args).await,
        Bench::Outages(args) => outages::run(args).await,
        Bench::ReplicaReads(args) => replica_reads::run(args).await,
        Bench::Move(args) => criterion::run("move_tenant", args).await,
        Bench::MoveRange(args) => criterion::run("move_range", args).await,
        Bench::MoveDelete(args) => criterion::run("move_delete", args).await,
        Bench::IndexLag(args) => criterion::run("index_lag", args).await,
    }
}
