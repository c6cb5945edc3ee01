//! Where tenants last arrived on each shard: a move records, at its re-pin, the
//! destination's WAL position that contains every row it copied (`_autumn_shard_arrivals`
//! on the control database). A shard's replica serves reads only once it has replayed its
//! shard's latest arrival: before that it would show the moved tenants absent, a state they
//! never had. The floors are raised whenever routes are learned (the slot map's reload, a
//! directory lookup), before the new routes are used, so no read can reach a replica by a
//! route newer than the floor it must respect.

use std::sync::atomic::{AtomicU64, Ordering};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::AsyncPgConnection;

use super::topology::Topology;

/// One shard's latest arrival.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Arrival {
    #[diesel(sql_type = Text)]
    pub shard_name: String,
    /// The destination's WAL position, as a byte offset.
    #[diesel(sql_type = BigInt)]
    pub lsn: i64,
    #[diesel(sql_type = BigInt)]
    pub epoch: i64,
}

/// Every shard's floor and the latest arrival epoch this process has seen.
pub struct Arrivals {
    names: Vec<String>,
    floors: Vec<AtomicU64>,
    epoch: AtomicU64,
}

impl Arrivals {
    pub fn new(topology: &Topology) -> Self {
        Self {
            names: topology.shards.iter().map(|s| s.name.to_string()).collect(),
            floors: topology.shards.iter().map(|_| AtomicU64::new(0)).collect(),
            epoch: AtomicU64::new(0),
        }
    }

    /// Raises the floors to what `arrivals` say (never lowers one). Rows naming shards
    /// this topology does not have are ignored.
    pub fn raise(&self, arrivals: &[Arrival]) {
        for a in arrivals {
            if let Some(i) = self.names.iter().position(|n| *n == a.shard_name) {
                self.floors[i].fetch_max(a.lsn.max(0) as u64, Ordering::AcqRel);
            }
            self.epoch
                .fetch_max(a.epoch.max(0) as u64, Ordering::AcqRel);
        }
    }

    /// The WAL position a replica of shard `index` must have replayed to serve any read.
    pub fn floor(&self, index: usize) -> u64 {
        self.floors[index].load(Ordering::Acquire)
    }

    /// The latest arrival this process has heard of.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

/// Every shard's latest arrival.
pub async fn load(conn: &mut AsyncPgConnection) -> diesel::QueryResult<Vec<Arrival>> {
    use diesel_async::RunQueryDsl;
    diesel::sql_query(
        "SELECT shard_name, (arrival_lsn - '0/0'::pg_lsn)::bigint AS lsn, epoch \
         FROM _autumn_shard_arrivals",
    )
    .load(conn)
    .await
}

/// Records that tenants arrived on `shard` with every copied row at or before `lsn` (the
/// destination's WAL position): the floor only rises, the epoch always does.
pub async fn record(
    conn: &mut AsyncPgConnection,
    shard: &str,
    lsn: i64,
) -> diesel::QueryResult<()> {
    use diesel_async::RunQueryDsl;
    diesel::sql_query(
        "INSERT INTO _autumn_shard_arrivals (shard_name, arrival_lsn, epoch) \
         VALUES ($1, '0/0'::pg_lsn + $2::numeric, nextval('_autumn_arrival_epoch')) \
         ON CONFLICT (shard_name) DO UPDATE SET \
            arrival_lsn = greatest(_autumn_shard_arrivals.arrival_lsn, EXCLUDED.arrival_lsn), \
            epoch = EXCLUDED.epoch, arrived_at = now()",
    )
    .bind::<Text, _>(shard)
    .bind::<BigInt, _>(lsn)
    .execute(conn)
    .await
    .map(drop)
}

/// How far the server has written its WAL: after a commit returns (synchronous_commit is
/// not `off`, so its record was written and flushed), at or after the end of its commit
/// record. Not the insert position, which may point past a page header no record ends at,
/// so that a replica that has replayed everything could never reach it.
pub const WAL_POSITION: &str = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS lsn";

#[derive(QueryableByName)]
struct Position {
    #[diesel(sql_type = BigInt)]
    lsn: i64,
}

/// [`WAL_POSITION`] on `conn`.
pub async fn wal_position(conn: &mut AsyncPgConnection) -> diesel::QueryResult<u64> {
    use diesel_async::RunQueryDsl;
    let p: Position = diesel::sql_query(WAL_POSITION).get_result(conn).await?;
    Ok(p.lsn.max(0) as u64)
}
