//! `_autumn_slot_map` on the control database: reading the overrides, and rewriting them
//! (a range move's flip, `bookmarks slots compact`) in one locked transaction.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection};

use super::owners::{Override, SlotOwners};
use crate::sharding::slot::SLOT_COUNT;
use crate::sharding::slot_range::{SlotRange, compact, display_ranges};
use crate::sharding::topology::Topology;

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Integer)]
    first_slot: i32,
    #[diesel(sql_type = Integer)]
    last_slot: i32,
    #[diesel(sql_type = Text)]
    shard_name: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    move_id: Option<i64>,
}

/// Every override, in slot order.
pub async fn load(conn: &mut AsyncPgConnection) -> diesel::QueryResult<Vec<Override>> {
    use diesel_async::RunQueryDsl;
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT first_slot, last_slot, shard_name, move_id FROM _autumn_slot_map \
         ORDER BY first_slot",
    )
    .load(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let range = SlotRange::new(
                u16::try_from(r.first_slot).ok()?,
                u16::try_from(r.last_slot).ok()?,
            )?;
            Some(Override {
                range,
                shard: r.shard_name,
                move_id: r.move_id,
            })
        })
        .collect())
}

/// The effective map as the control database has it now.
pub async fn current(
    conn: &mut AsyncPgConnection,
    topology: &Topology,
) -> diesel::QueryResult<SlotOwners> {
    Ok(SlotOwners::build(topology, load(conn).await?))
}

/// Per slot, the override's (shard, move) if it has one.
type PerSlot = Vec<Option<(String, Option<i64>)>>;

/// Rewrites the table as `change` leaves it, in one transaction that holds the table
/// against concurrent rewrites; one notification reaches every process at commit.
async fn rewrite(
    conn: &mut AsyncPgConnection,
    change: impl FnOnce(&mut PerSlot) + Send,
) -> diesel::QueryResult<()> {
    use diesel_async::RunQueryDsl;
    conn.transaction(async move |tx| {
        diesel::sql_query("LOCK TABLE _autumn_slot_map IN SHARE ROW EXCLUSIVE MODE")
            .execute(tx)
            .await?;
        let mut per_slot: PerSlot = vec![None; usize::from(SLOT_COUNT)];
        for o in load(tx).await? {
            for slot in o.range.iter() {
                per_slot[usize::from(slot)] = Some((o.shard.clone(), o.move_id));
            }
        }
        change(&mut per_slot);
        diesel::sql_query("DELETE FROM _autumn_slot_map")
            .execute(tx)
            .await?;
        let mut start = 0usize;
        while start < per_slot.len() {
            let mut end = start;
            while end + 1 < per_slot.len() && per_slot[end + 1] == per_slot[start] {
                end += 1;
            }
            if let Some((shard, move_id)) = &per_slot[start] {
                diesel::sql_query(
                    "INSERT INTO _autumn_slot_map (first_slot, last_slot, shard_name, move_id) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind::<Integer, _>(start as i32)
                .bind::<Integer, _>(end as i32)
                .bind::<Text, _>(shard)
                .bind::<Nullable<BigInt>, _>(*move_id)
                .execute(tx)
                .await?;
            }
            start = end + 1;
        }
        Ok(())
    })
    .await
}

/// Gives `ranges` to `shard`: an override where `autumn.toml` names another owner, none
/// where it names this one (a range moved back leaves nothing behind).
pub async fn assign(
    conn: &mut AsyncPgConnection,
    topology: &Topology,
    ranges: &[SlotRange],
    shard: &str,
    move_id: i64,
) -> diesel::QueryResult<()> {
    let configured: Vec<bool> = (0..SLOT_COUNT)
        .map(|s| topology.shards[topology.owner_of(s)].name.as_str() == shard)
        .collect();
    let ranges = ranges.to_vec();
    let shard = shard.to_owned();
    rewrite(conn, move |per_slot| {
        for slot in ranges.iter().flat_map(|r| r.iter()) {
            let i = usize::from(slot);
            per_slot[i] = (!configured[i]).then(|| (shard.clone(), Some(move_id)));
        }
    })
    .await
}

/// What `compact` did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Compacted {
    /// Slots whose override named the configured owner, now removed.
    pub removed: String,
    /// Slots whose override still changes routing, kept.
    pub kept: String,
}

/// Why `compact` refused.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(
        "refusing to remove the overrides of slots {0}: autumn.toml gives them to another \
         shard, so removing them would route their tenants away from their data. Fold them \
         into autumn.toml first (`bookmarks slots` prints the edit), deploy, then compact"
    )]
    WouldChangeRouting(String),
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

/// Removes the overrides that change nothing (they name the owner `autumn.toml` names, as
/// after the edit `bookmarks slots` suggests is deployed). With `only`, just those slots,
/// and refuses if any of them would change routing.
pub async fn compact_overrides(
    conn: &mut AsyncPgConnection,
    topology: &Topology,
    only: Option<&[SlotRange]>,
) -> Result<Compacted, CompactError> {
    let now = current(conn, topology).await?;
    let wanted: Vec<SlotRange> = only.map_or_else(|| vec![SlotRange::full()], <[_]>::to_vec);
    let refused = now.would_change(topology, &wanted);
    if only.is_some() && !refused.is_empty() {
        return Err(CompactError::WouldChangeRouting(display_ranges(&refused)));
    }
    let in_wanted = |s: u16| wanted.iter().any(|r| r.contains(s));
    let removable: Vec<u16> = (0..SLOT_COUNT)
        .filter(|&s| {
            let owner = now.owner(s);
            in_wanted(s) && owner.overridden && owner.shard == topology.owner_of(s)
        })
        .collect();
    let removed = compact(removable.iter().copied());
    let gone = removable.clone();
    rewrite(conn, move |per_slot| {
        for slot in gone {
            per_slot[usize::from(slot)] = None;
        }
    })
    .await?;
    Ok(Compacted {
        removed: display_ranges(&removed),
        kept: display_ranges(&refused),
    })
}
