//! What to tell the operator after a move: the `autumn.toml` edit that would make a moved
//! slot or range permanent, or why it is not safe yet.

use crate::moves::context::{self, live_owners};
use crate::moves::error::{MoveError, on_shard};
use crate::moves::plan::{self};
use crate::moves::record::MoveRecord;
use crate::moves::state::MoveState;
use crate::sharding::slot_range::ranges_text;

use super::Mover;

impl Mover {
    /// After a range move's flip: the live slot map differs from `autumn.toml`, and the
    /// edit that would fold it in.
    async fn range_advice(&self, m: &MoveRecord) -> Result<Option<String>, MoveError> {
        if m.state < MoveState::Repinned || m.state == MoveState::Aborted {
            return Ok(None);
        }
        let mut control = context::control(&self.control).await?;
        let owners = live_owners(&self.topology, &mut control).await?;
        let drift = owners.drift(&self.topology);
        if drift.is_empty() {
            return Ok(Some(
                "the live slot map matches autumn.toml again; `bookmarks slots compact` \
                 removes overrides that change nothing"
                    .to_owned(),
            ));
        }
        let edits: Vec<String> = drift
            .iter()
            .map(|d| format!("shard {}: {}", d.shard, d.edit))
            .collect();
        Ok(Some(format!(
            "every web replica routes slots {} to {} now, by the live slot map (no deploy \
             needed). To make autumn.toml say so too: {}; check it with `bookmarks \
             check-config`, deploy, then `bookmarks slots compact`",
            m.slots.as_deref().map(ranges_text).unwrap_or_default(),
            m.to,
            edits.join("; ")
        )))
    }

    /// After a slot's move is done: the `autumn.toml` change that would make the slot's
    /// placement permanent, or why it is not safe yet. `None` for tenant moves.
    pub async fn slot_advice(&self, m: &MoveRecord) -> Result<Option<String>, MoveError> {
        if m.slots.is_some() {
            return self.range_advice(m).await;
        }
        let Some(slot) = m.slot else {
            return Ok(None);
        };
        let slot = slot as u16;
        if m.state != MoveState::Done {
            return Ok(None);
        }
        let source = self.shard(&m.from).await?;
        let left = plan::tenants_in_slot(&source, self.tables, slot)
            .await
            .map_err(on_shard(format!("cannot list the tenants on {}", m.from)))?;
        if !left.is_empty() {
            return Ok(Some(format!(
                "slot {slot} still has tenants with rows on {}: {}. Do not move slot {slot} in \
                 autumn.toml until they are moved too, or they would lose their data",
                m.from,
                left.join(", ")
            )));
        }
        Ok(Some(plan::slot_remap_advice(
            &self.topology,
            slot,
            &m.from,
            &m.to,
        )))
    }
}
