//! `slots = [...]` of each `[[database.shards]]`: resolved into every shard's owned ranges,
//! checked to cover each slot exactly once, or split evenly when no shard declares any.

use std::collections::BTreeMap;

use super::raw::{RawDatabase, SlotEntry};
use crate::sharding::slot::SLOT_COUNT;
use crate::sharding::slot_range::{SlotRange, compact, display_ranges};

/// Each shard's owned slots, either as declared (validated to cover every slot exactly once)
/// or auto-split into contiguous even ranges in declaration order.
pub fn resolve_slots(
    db: &RawDatabase,
    labels: &[String],
    problems: &mut Vec<String>,
) -> Option<Vec<Vec<SlotRange>>> {
    let n = db.shards.len();
    if n == 0 {
        return None;
    }
    let declaring: Vec<usize> = (0..n).filter(|&i| db.shards[i].slots.is_some()).collect();
    if declaring.is_empty() {
        if n > usize::from(SLOT_COUNT) {
            problems.push(format!(
                "{n} shards is more than the {SLOT_COUNT} slots to share"
            ));
            return None;
        }
        let total = usize::from(SLOT_COUNT);
        return Some(
            (0..n)
                .map(|i| {
                    let start = (i * total / n) as u16;
                    let end = ((i + 1) * total / n - 1) as u16;
                    vec![SlotRange::new(start, end).expect("auto-split ranges are in bounds")]
                })
                .collect(),
        );
    }
    if declaring.len() < n {
        let silent: Vec<&str> = (0..n)
            .filter(|i| !declaring.contains(i))
            .map(|i| labels[i].as_str())
            .collect();
        let loud: Vec<&str> = declaring.iter().map(|&i| labels[i].as_str()).collect();
        problems.push(format!(
            "slots are all-or-none: {} declare slots but {} do not (declare slots on every shard, or on none to auto-split)",
            loud.join(", "),
            silent.join(", ")
        ));
        return None;
    }

    let mut claims: Vec<Vec<usize>> = vec![Vec::new(); usize::from(SLOT_COUNT)];
    // Slots a bad entry evidently meant to cover ("9-3", "16000-20000"): not owned, but not
    // reported as gaps either, so each mistake is reported once, as itself.
    let mut meant = vec![false; usize::from(SLOT_COUNT)];
    let mut per_shard: Vec<Vec<SlotRange>> = vec![Vec::new(); n];
    let before = problems.len();
    for (i, raw) in db.shards.iter().enumerate() {
        for entry in raw.slots.as_deref().unwrap_or_default() {
            let text = match entry {
                SlotEntry::Index(v) => v.to_string(),
                SlotEntry::Text(t) => t.clone(),
            };
            match text.parse::<SlotRange>() {
                Ok(range) => {
                    per_shard[i].push(range);
                    for slot in range.iter() {
                        claims[usize::from(slot)].push(i);
                    }
                }
                Err(e) => {
                    problems.push(format!("{}: slots entry {e}", labels[i]));
                    for slot in intended_slots(&text) {
                        meant[usize::from(slot)] = true;
                    }
                }
            }
        }
    }

    // Coverage is still checked when some entries are bad: every problem at once.
    let gaps = compact(
        (0..SLOT_COUNT).filter(|&s| claims[usize::from(s)].is_empty() && !meant[usize::from(s)]),
    );
    if !gaps.is_empty() {
        problems.push(format!(
            "slots {} are owned by no shard (every slot 0-{} must be owned exactly once)",
            display_ranges(&gaps),
            SLOT_COUNT - 1
        ));
    }
    let mut overlaps: BTreeMap<Vec<usize>, Vec<u16>> = BTreeMap::new();
    for slot in 0..SLOT_COUNT {
        let owners = &claims[usize::from(slot)];
        if owners.len() > 1 {
            overlaps.entry(owners.clone()).or_default().push(slot);
        }
    }
    for (owners, slots) in overlaps {
        let who: Vec<&str> = owners.iter().map(|&i| labels[i].as_str()).collect();
        problems.push(format!(
            "slots {} are claimed more than once, by {}",
            display_ranges(&compact(slots)),
            who.join(" and ")
        ));
    }
    if problems.len() > before {
        return None;
    }
    Some(
        per_shard
            .into_iter()
            .map(|mut ranges| {
                ranges.sort();
                compact(ranges.iter().flat_map(|r| r.iter()))
            })
            .collect(),
    )
}

/// The in-range slots an unparsable entry most plausibly meant: a reversed range read
/// forwards, a range running past the end clipped to the last slot. Empty when the entry
/// is not made of numbers at all.
fn intended_slots(text: &str) -> impl Iterator<Item = u16> {
    let number = |s: &str| s.trim().parse::<u64>().ok();
    let (a, b) = match text.trim().split_once('-') {
        Some((a, b)) => (number(a), number(b)),
        None => (number(text), number(text)),
    };
    let last = u64::from(SLOT_COUNT - 1);
    let range = match (a, b) {
        (Some(a), Some(b)) if a.min(b) <= last => {
            Some((a.min(b) as u16)..=(a.max(b).min(last) as u16))
        }
        _ => None,
    };
    range.into_iter().flatten()
}
