//! A move's copy rate next to its floor: the same rows piped by `psql | psql COPY` into the
//! same destination schema, in the same run.
//!
//! Two Postgres servers in containers (control and shard0 on one, shard1 on the other) and
//! one tenant of `BENCH_ROWS` bookmarks (default 200 000, indexed for search already) filed
//! in a tree of 200 collections five deep: the two-table tenant. The app only migrates the
//! databases and is stopped, so no reindexer or liveness check runs beside the copies.
//! `BENCH_ROUNDS` times (default 3), in turn:
//!
//! - the floor: for each table, parents first, `psql -c "COPY (SELECT * …) TO STDOUT"` on
//!   the source piped into `psql -1 -c "COPY … FROM STDIN"` on the destination (the guard
//!   bypassed and the foreign keys deferred, as the mover does), then those rows deleted;
//! - the move's copy step (`Mover`, what `move_slot run` runs first: capture on, the bulk
//!   copy from one snapshot, the catch-up rounds), then `abort`, which deletes the copy.
//!
//! Each copy is followed by a `VACUUM` of the destination, so every round starts from the
//! same tables. Prints each round's rows/s and the ratio of the medians. Needs `psql` on the
//! PATH (Debian: `postgresql-client`). Run it by hand on an otherwise idle machine:
//! `BOOKMARKS_POSTGRES_IMAGE=bookmarks-offline/postgres:15 cargo bench --bench move_copy_floor`
//! (without the variable it pulls `postgres:15`).

// The integration tests' harness; a bench uses a few of its helpers.
#[allow(dead_code)]
#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code, unused_imports)]
#[path = "../tests/api/support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bookmarks_sharded::content::TENANT_TABLES;
use bookmarks_sharded::moves::plan::TenantSelection;
use bookmarks_sharded::moves::{Mover, Step};
use support::*;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Where one shard's database is, as psql takes it.
struct Db {
    port: u16,
    name: String,
}

impl Db {
    fn psql(&self) -> Command {
        let mut cmd = Command::new("psql");
        cmd.env("PGPASSWORD", PASSWORD)
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args(["-p", &self.port.to_string(), "-U", USER, "-d", &self.name]);
        cmd
    }
}

/// Pipes `tenant`'s rows of every tenant table from `source` into `dest`, one
/// `psql | psql` per table, parents first.
fn pipe(source: &Db, dest: &Db, tenant: &str) {
    for table in TENANT_TABLES {
        let mut out = source
            .psql()
            .args([
                "-c",
                &format!(
                    "COPY (SELECT * FROM {} WHERE {} = '{tenant}') TO STDOUT",
                    table.name, table.tenant_column
                ),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("psql on the PATH (apt-get install postgresql-client)");
        let into = dest
            .psql()
            .args([
                "-1",
                "-c",
                "SET LOCAL autumn.move_bypass = 'floor'",
                "-c",
                "SET CONSTRAINTS ALL DEFERRED",
                "-c",
                &format!("COPY {} FROM STDIN", table.name),
            ])
            .stdin(out.stdout.take().unwrap())
            .output()
            .unwrap();
        assert!(out.wait().unwrap().success(), "COPY out of {}", table.name);
        assert!(
            into.status.success(),
            "COPY into {}: {}",
            table.name,
            String::from_utf8_lossy(&into.stderr)
        );
    }
}

/// How many rows `tenant` has in every tenant table of `db`.
async fn rows_of(db: &Db, tenant: &str) -> i64 {
    let counts: Vec<String> = TENANT_TABLES
        .iter()
        .map(|t| {
            format!(
                "(SELECT count(*) FROM {} WHERE {} = '{tenant}')",
                t.name, t.tenant_column
            )
        })
        .collect();
    let total = sql(db.port, &db.name, &format!("SELECT {}", counts.join(" + "))).await;
    total[0][0].as_deref().unwrap().parse().unwrap()
}

async fn bench() {
    let (a, b, mut layout) = split_servers("bookmarks-floor-net").await;
    layout.extra = "[sharding]\ndirectory_router = true\n".to_owned();
    let app = TestApp::spawn(layout.settings(), "floor").await;
    let settings = app.settings.clone();
    app.stop().await;
    let rows: usize = env_or("BENCH_ROWS", 200_000);
    let rounds: usize = env_or("BENCH_ROUNDS", 3);
    let tenant = format!("floor-{rows}");
    let from = hash_shard(&settings, &tenant);
    let to = other_shard(&from).to_owned();
    let db = |shard: &str| Db {
        port: if shard == "shard0" { a.port } else { b.port },
        name: shard.to_owned(),
    };
    let (source, dest) = (db(&from), db(&to));
    // A tenant that has been in use for a while: filed in collections, indexed for search
    // (built in one statement with the triggers off, not by the reindexer's batches).
    sql(
        source.port,
        &from,
        &format!(
            "SET session_replication_role = replica; \
             INSERT INTO collections (tenant_id, id, name, parent_id) \
             SELECT '{tenant}', md5('{tenant}:c' || i)::uuid, 'c' || i, \
             CASE WHEN i = 0 THEN NULL WHEN i < 5 THEN md5('{tenant}:c' || (i - 1))::uuid \
             ELSE md5('{tenant}:c' || ((i - 5) % 4))::uuid END FROM generate_series(0, 199) i; \
             INSERT INTO bookmarks (tenant_id, id, url, title, notes, tags, collection_id) \
             SELECT '{tenant}', gen_random_uuid(), 'https://floor.example/seed/' || i, \
             'A bookmark title number ' || i, repeat('notes ', 10 + i % 20), \
             ARRAY['bench', 'tag' || (i % 10)], \
             CASE WHEN i % 10 = 0 THEN NULL ELSE md5('{tenant}:c' || (i % 200))::uuid END \
             FROM generate_series(1, {rows}) i; \
             INSERT INTO bookmark_search (tenant_id, bookmark_id, document, tags) \
             SELECT tenant_id, id, bookmark_document(title, url, notes, tags), tags \
             FROM bookmarks WHERE tenant_id = '{tenant}'; \
             INSERT INTO tenant_tags (tenant_id, tag, count) \
             SELECT tenant_id, tag, count(*) FROM bookmarks, unnest(tags) AS tag \
             WHERE tenant_id = '{tenant}' GROUP BY tenant_id, tag; \
             RESET session_replication_role"
        ),
    )
    .await;
    // VACUUM cannot share the seed's (implicit) transaction.
    sql(source.port, &from, "VACUUM ANALYZE").await;
    let settle = || async {
        sql(dest.port, &to, "VACUUM ANALYZE").await;
    };

    let mut mover = Mover::connect(&settings, TENANT_TABLES).await.unwrap();
    let (mut floor, mut moved) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let started = Instant::now();
        pipe(&source, &dest, &tenant);
        let took = started.elapsed();
        let piped = rows_of(&dest, &tenant).await;
        floor.push(piped as f64 / took.as_secs_f64());
        let deletes: String = TENANT_TABLES
            .iter()
            .rev()
            .map(|t| {
                format!(
                    "DELETE FROM {} WHERE {} = '{tenant}'; ",
                    t.name, t.tenant_column
                )
            })
            .collect();
        sql(
            dest.port,
            &to,
            &format!("BEGIN; SET LOCAL autumn.move_bypass = 'floor'; {deletes} COMMIT"),
        )
        .await;
        settle().await;

        let selection = TenantSelection::Tenants(vec![tenant.clone()]);
        let mut m = mover.start(&from, &to, &selection, true).await.unwrap();
        mover.claim(&m).await.unwrap();
        let started = Instant::now();
        mover
            .step(&mut m, Step::Copy, Duration::ZERO)
            .await
            .unwrap();
        let took_move = started.elapsed();
        moved.push(m.rows_copied as f64 / took_move.as_secs_f64());
        mover.abort(&mut m).await.unwrap();
        settle().await;
        println!(
            "round {round}: psql | psql {piped} rows in {} ms = {:.0} rows/s; \
             move's copy step {} rows in {} ms = {:.0} rows/s",
            took.as_millis(),
            floor[round - 1],
            m.rows_copied,
            took_move.as_millis(),
            moved[round - 1],
        );
        assert_eq!(
            (m.rows_copied, rows_of(&dest, &tenant).await),
            (piped, 0),
            "both copied the same rows of every table, and abort took the copy away"
        );
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (floor, moved) = (median(&mut floor), median(&mut moved));
    println!(
        "\none tenant of {rows} bookmarks in 200 collections, {from} -> {to}, {rounds} rounds\n\
         \x20 psql | psql COPY, median:        {floor:.0} rows/s\n\
         \x20 the move's copy step, median:    {moved:.0} rows/s\n\
         \x20 move / floor:                    {:.2}",
        moved / floor
    );
    for s in [a, b] {
        keep_until_exit(s.container);
    }
}
