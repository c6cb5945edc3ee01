//! Who owns each slot: `autumn.toml`'s owners with the overrides on top, how the result
//! differs from the file, and the edit that would fold it in. Pure values, no I/O.

use crate::sharding::slot::SLOT_COUNT;
use crate::sharding::slot_range::{SlotRange, compact};
use crate::sharding::topology::Topology;

/// One `_autumn_slot_map` row: a range whose owner is not the one `autumn.toml` names.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Override {
    pub range: SlotRange,
    pub shard: String,
    /// The range move that wrote it.
    pub move_id: Option<i64>,
}

/// Who owns one slot, and which rule said so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Index into the topology's shards.
    pub shard: usize,
    /// True when a slot override decided (even one that names the configured owner).
    pub overridden: bool,
}

/// One snapshot of the effective map.
#[derive(Clone, Debug)]
pub struct SlotOwners {
    owners: Vec<Owner>,
    overrides: Vec<Override>,
    /// Overrides that cannot apply (a shard this topology lacks): their slots keep the
    /// configured owner, and the log and `bookmarks slots` say so.
    problems: Vec<String>,
}

/// A run of slots with one owner and one source, as `bookmarks slots` prints it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Run {
    pub slots: String,
    pub shard: String,
    /// `config` (autumn.toml) or `slot_map` (a control database override).
    pub source: &'static str,
}

/// One shard whose slots differ from its `slots = [...]` in `autumn.toml`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Drift {
    pub shard: String,
    pub config: String,
    pub live: String,
    /// The line to write in that shard's `[[database.shards]]` block.
    pub edit: String,
}

impl SlotOwners {
    /// The map `autumn.toml` alone gives.
    pub fn baseline(topology: &Topology) -> Self {
        Self::build(topology, Vec::new())
    }

    pub fn build(topology: &Topology, overrides: Vec<Override>) -> Self {
        let mut owners: Vec<Owner> = (0..SLOT_COUNT)
            .map(|slot| Owner {
                shard: topology.owner_of(slot),
                overridden: false,
            })
            .collect();
        let mut problems = Vec::new();
        for o in &overrides {
            match topology
                .shards
                .iter()
                .position(|s| s.name.as_str() == o.shard)
            {
                Some(shard) => {
                    for slot in o.range.iter() {
                        owners[usize::from(slot)] = Owner {
                            shard,
                            overridden: true,
                        };
                    }
                }
                None => problems.push(format!(
                    "the slot map gives slots {} to shard {:?}, which is not configured; they \
                     stay with their autumn.toml owner",
                    o.range, o.shard
                )),
            }
        }
        Self {
            owners,
            overrides,
            problems,
        }
    }

    pub fn owner(&self, slot: u16) -> Owner {
        self.owners[usize::from(slot)]
    }

    pub fn overrides(&self) -> &[Override] {
        &self.overrides
    }

    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// How many slots the shard at `index` owns.
    pub fn slot_count_of(&self, index: usize) -> u32 {
        self.owners.iter().filter(|o| o.shard == index).count() as u32
    }

    /// The slots of the shard at `index`, as the fewest ranges.
    pub fn ranges_of(&self, index: usize) -> Vec<SlotRange> {
        compact((0..SLOT_COUNT).filter(|&s| self.owners[usize::from(s)].shard == index))
    }

    /// The whole map as runs of one owner and source, in slot order.
    pub fn runs(&self, topology: &Topology) -> Vec<Run> {
        let mut runs: Vec<(u16, u16, Owner)> = Vec::new();
        for (slot, owner) in self.owners.iter().enumerate() {
            let slot = slot as u16;
            match runs.last_mut() {
                Some((_, end, last)) if last == owner => *end = slot,
                _ => runs.push((slot, slot, *owner)),
            }
        }
        runs.into_iter()
            .map(|(start, end, owner)| Run {
                slots: SlotRange::new(start, end).expect("ordered").to_string(),
                shard: topology.shards[owner.shard].name.as_str().to_owned(),
                source: if owner.overridden {
                    "slot_map"
                } else {
                    "config"
                },
            })
            .collect()
    }

    /// Every shard whose slots here differ from `autumn.toml`, with the edit that folds
    /// the difference into the file. Empty when the file says it all.
    pub fn drift(&self, topology: &Topology) -> Vec<Drift> {
        let quoted = |ranges: &[SlotRange]| -> String {
            let items: Vec<String> = ranges.iter().map(|r| format!("\"{r}\"")).collect();
            format!("[{}]", items.join(", "))
        };
        topology
            .shards
            .iter()
            .enumerate()
            .filter_map(|(index, spec)| {
                let live = self.ranges_of(index);
                let config = compact((0..SLOT_COUNT).filter(|&s| topology.owner_of(s) == index));
                (live != config).then(|| Drift {
                    shard: spec.name.as_str().to_owned(),
                    config: quoted(&config),
                    live: quoted(&live),
                    edit: format!("slots = {}", quoted(&live)),
                })
            })
            .collect()
    }

    /// The slots of `ranges` whose override differs from the configured owner: removing
    /// their overrides would change routing.
    pub fn would_change(&self, topology: &Topology, ranges: &[SlotRange]) -> Vec<SlotRange> {
        compact(ranges.iter().flat_map(|r| r.iter()).filter(|&s| {
            let owner = self.owners[usize::from(s)];
            owner.overridden && owner.shard != topology.owner_of(s)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Settings;

    fn two_shards() -> Topology {
        Settings::from_toml_str(
            r#"
[database]
primary_url = "postgres://u@localhost/control"
[[database.shards]]
name = "shard0"
primary_url = "postgres://u@localhost/s0"
slots = ["0-8191"]
[[database.shards]]
name = "shard1"
primary_url = "postgres://u@localhost/s1"
slots = ["8192-16383"]
"#,
            "test",
            Vec::new(),
        )
        .unwrap()
        .topology
    }

    fn moved(range: &str, shard: &str) -> Override {
        Override {
            range: range.parse().unwrap(),
            shard: shard.to_owned(),
            move_id: Some(1),
        }
    }

    #[test]
    fn an_override_decides_its_slots_and_nothing_else() {
        let t = two_shards();
        let map = SlotOwners::build(&t, vec![moved("0-4095", "shard1")]);
        assert_eq!(
            map.owner(0),
            Owner {
                shard: 1,
                overridden: true
            }
        );
        assert_eq!(
            map.owner(4096),
            Owner {
                shard: 0,
                overridden: false
            }
        );
        let runs = map.runs(&t);
        assert_eq!(runs.len(), 3);
        assert_eq!(
            (runs[0].slots.as_str(), runs[0].source),
            ("0-4095", "slot_map")
        );
    }

    #[test]
    fn drift_names_the_autumn_toml_edit_for_each_changed_shard() {
        let t = two_shards();
        let map = SlotOwners::build(&t, vec![moved("0-4095", "shard1")]);
        let drift = map.drift(&t);
        assert_eq!(drift.len(), 2);
        assert_eq!(drift[0].edit, r#"slots = ["4096-8191"]"#);
        assert_eq!(drift[1].edit, r#"slots = ["0-4095", "8192-16383"]"#);
        assert!(SlotOwners::baseline(&t).drift(&t).is_empty());
    }

    #[test]
    fn an_override_on_an_unknown_shard_keeps_the_configured_owner_and_says_so() {
        let t = two_shards();
        let map = SlotOwners::build(&t, vec![moved("10-20", "shard9")]);
        assert_eq!(
            map.owner(10),
            Owner {
                shard: 0,
                overridden: false
            }
        );
        assert_eq!(map.problems().len(), 1);
    }

    #[test]
    fn only_overrides_that_differ_from_the_file_would_change_routing() {
        let t = two_shards();
        let map = SlotOwners::build(
            &t,
            vec![moved("0-99", "shard1"), moved("8192-8200", "shard1")],
        );
        let all = [SlotRange::full()];
        assert_eq!(map.would_change(&t, &all), vec!["0-99".parse().unwrap()]);
    }
}
