//! Recording a new move and its members in one transaction: every tenant (or every slot
//! of a range) joins it, or one already in an unfinished move refuses it.

use std::collections::BTreeMap;

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

use super::{COLUMNS, MoveRecord, MoveRow, RecordError, active_for_range_slot, unfinished};
use crate::sharding::slot_range::ranges_text;
use crate::sharding::{ShardKey, SlotRange};

/// What a new move is.
#[derive(Clone, Debug)]
pub struct NewMove<'a> {
    pub tenants: &'a [String],
    pub from: &'a str,
    pub to: &'a str,
    pub slot: Option<u16>,
    pub slots: Option<&'a [SlotRange]>,
    pub confirm: bool,
    pub previous: &'a BTreeMap<String, Option<String>>,
}

/// Why a move could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// A tenant is already in an unfinished move.
    #[error("tenant {tenant} is already in move {move_id}")]
    Busy { tenant: String, move_id: i64 },
    /// A slot of a new range move is already being moved.
    #[error("slot {slot} is already being moved by move {move_id}")]
    SlotBusy { slot: u16, move_id: i64 },
    #[error(transparent)]
    Record(#[from] RecordError),
}

impl From<diesel::result::Error> for CreateError {
    fn from(e: diesel::result::Error) -> Self {
        CreateError::Record(RecordError::Db(e))
    }
}

#[derive(QueryableByName)]
struct Member {
    #[diesel(sql_type = Text)]
    tenant_key: String,
    #[diesel(sql_type = BigInt)]
    move_id: i64,
}

/// Records a new move and its members, atomically: either every tenant joins it, or a
/// tenant already in another unfinished move refuses it.
pub async fn create(
    control: &mut AsyncPgConnection,
    new: &NewMove<'_>,
) -> Result<MoveRecord, CreateError> {
    let previous = serde_json::to_string(new.previous).expect("a map of strings serializes");
    let tenants = new.tenants.to_vec();
    let (from, to) = (new.from.to_owned(), new.to.to_owned());
    let (slot, confirm) = (new.slot.map(i32::from), new.confirm);
    let slots = new.slots.map(ranges_text);
    let ranges = new.slots.map(<[SlotRange]>::to_vec);
    control
        .transaction(async move |tx| {
            if let Some(ranges) = &ranges {
                // Range moves are few: serialise their creation and look for an overlap.
                diesel::sql_query("LOCK TABLE tenant_moves IN SHARE ROW EXCLUSIVE MODE")
                    .execute(tx)
                    .await?;
                if let Some(busy) = overlapping(tx, ranges).await? {
                    return Err(busy);
                }
            } else {
                for tenant in &tenants {
                    let slot = ShardKey::Str(tenant).slot().index();
                    if let Some(other) = active_for_range_slot(tx, slot).await? {
                        return Err(CreateError::SlotBusy {
                            slot,
                            move_id: other.id,
                        });
                    }
                }
            }
            let busy: Vec<Member> = diesel::sql_query(
                "SELECT tenant_key, move_id FROM tenant_move_members \
                 WHERE tenant_key = ANY($1) ORDER BY tenant_key FOR UPDATE",
            )
            .bind::<Array<Text>, _>(&tenants)
            .load(tx)
            .await?;
            if let Some(m) = busy.into_iter().next() {
                return Err(CreateError::Busy {
                    tenant: m.tenant_key,
                    move_id: m.move_id,
                });
            }
            let row: MoveRow = diesel::sql_query(format!(
                "INSERT INTO tenant_moves (tenants, from_shard, to_shard, slot, slots, confirm, previous) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb) RETURNING {COLUMNS}"
            ))
            .bind::<Array<Text>, _>(&tenants)
            .bind::<Text, _>(&from)
            .bind::<Text, _>(&to)
            .bind::<Nullable<Integer>, _>(slot)
            .bind::<Nullable<Text>, _>(&slots)
            .bind::<Bool, _>(confirm)
            .bind::<Text, _>(&previous)
            .get_result(tx)
            .await?;
            let record = MoveRecord::try_from(row)?;
            // A range move's tenants are whoever the slot map sends through its ranges
            // (new ones too): the overlap checks cover them, not member rows.
            let members: &[String] = if ranges.is_some() { &[] } else { &tenants };
            for tenant in members {
                // A concurrent create of the same tenant fails here on the primary key.
                let inserted = diesel::sql_query(
                    "INSERT INTO tenant_move_members (tenant_key, move_id) VALUES ($1, $2) \
                     ON CONFLICT (tenant_key) DO NOTHING",
                )
                .bind::<Text, _>(tenant)
                .bind::<BigInt, _>(record.id)
                .execute(tx)
                .await?;
                if inserted == 0 {
                    let other: Member = diesel::sql_query(
                        "SELECT tenant_key, move_id FROM tenant_move_members WHERE tenant_key = $1",
                    )
                    .bind::<Text, _>(tenant)
                    .get_result(tx)
                    .await?;
                    return Err(CreateError::Busy {
                        tenant: other.tenant_key,
                        move_id: other.move_id,
                    });
                }
            }
            Ok(record)
        })
        .await
}

/// An unfinished move that a range move of `ranges` would collide with: another range
/// move over any of its slots, or a tenant move of a tenant hashing into them.
async fn overlapping(
    tx: &mut AsyncPgConnection,
    ranges: &[SlotRange],
) -> Result<Option<CreateError>, CreateError> {
    let inside = |slot: u16| ranges.iter().any(|r| r.contains(slot));
    for other in unfinished(tx).await? {
        let hit = match &other.slots {
            Some(theirs) => theirs.iter().flat_map(|r| r.iter()).find(|&s| inside(s)),
            None => other
                .tenants
                .iter()
                .map(|t| ShardKey::Str(t).slot().index())
                .find(|&s| inside(s)),
        };
        if let Some(slot) = hit {
            return Ok(Some(CreateError::SlotBusy {
                slot,
                move_id: other.id,
            }));
        }
    }
    Ok(None)
}
