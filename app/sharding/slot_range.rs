//! `SlotRange`: an inclusive run of slots, as written in `slots = ["0-8191", "9000"]`.

use std::fmt;
use std::str::FromStr;

use super::slot::SLOT_COUNT;

/// An inclusive range `start..=end` with `start <= end < SLOT_COUNT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotRange {
    start: u16,
    end: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotRangeError {
    #[error("{0:?} is not a slot index or an \"A-B\" range")]
    Malformed(String),
    #[error("{0:?} is out of range (slots are 0-{max})", max = SLOT_COUNT - 1)]
    OutOfRange(String),
    #[error("{0:?} is reversed (the start is after the end)")]
    Reversed(String),
}

impl SlotRange {
    pub fn new(start: u16, end: u16) -> Option<Self> {
        (start <= end && end < SLOT_COUNT).then_some(Self { start, end })
    }

    /// Every slot: what a single shard owns when it is the only one.
    pub fn full() -> Self {
        Self {
            start: 0,
            end: SLOT_COUNT - 1,
        }
    }

    pub fn start(self) -> u16 {
        self.start
    }

    pub fn end(self) -> u16 {
        self.end
    }

    pub fn len(self) -> u32 {
        u32::from(self.end - self.start) + 1
    }

    /// Never true: a range holds at least one slot. Present for clippy's `len` convention.
    pub fn is_empty(self) -> bool {
        false
    }

    pub fn contains(self, slot: u16) -> bool {
        (self.start..=self.end).contains(&slot)
    }

    pub fn iter(self) -> impl Iterator<Item = u16> {
        self.start..=self.end
    }
}

impl FromStr for SlotRange {
    type Err = SlotRangeError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let text = raw.trim();
        let (start, end) = match text.split_once('-') {
            Some((a, b)) => (parse_index(a.trim(), raw)?, parse_index(b.trim(), raw)?),
            None => {
                let i = parse_index(text, raw)?;
                (i, i)
            }
        };
        if start > end {
            return Err(SlotRangeError::Reversed(raw.to_owned()));
        }
        Ok(Self {
            start: start as u16,
            end: end as u16,
        })
    }
}

fn parse_index(digits: &str, raw: &str) -> Result<u32, SlotRangeError> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SlotRangeError::Malformed(raw.to_owned()));
    }
    match digits.parse::<u32>() {
        Ok(i) if i < u32::from(SLOT_COUNT) => Ok(i),
        _ => Err(SlotRangeError::OutOfRange(raw.to_owned())),
    }
}

impl fmt::Display for SlotRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

/// A list of ranges as `--slots 0-99,200-299` gives them: ascending, disjoint, merged
/// where they touch, never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRanges(Vec<SlotRange>);

impl SlotRanges {
    pub fn as_slice(&self) -> &[SlotRange] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<SlotRange> {
        self.0
    }
}

/// Why a list of slot ranges was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotRangesError {
    #[error(transparent)]
    Range(#[from] SlotRangeError),
    #[error("{0} and {1} overlap")]
    Overlap(SlotRange, SlotRange),
}

impl FromStr for SlotRanges {
    type Err = SlotRangesError;

    fn from_str(raw: &str) -> Result<Self, SlotRangesError> {
        let mut ranges = Vec::new();
        for part in raw.split(',') {
            ranges.push(part.parse::<SlotRange>()?);
        }
        ranges.sort();
        for pair in ranges.windows(2) {
            if pair[1].start <= pair[0].end {
                return Err(SlotRangesError::Overlap(pair[0], pair[1]));
            }
        }
        Ok(Self(compact(ranges.iter().flat_map(|r| r.iter()))))
    }
}

/// `0-99,200-299`, as `--slots` takes it and the `slots` column of a range move holds it.
impl fmt::Display for SlotRanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&ranges_text(&self.0))
    }
}

/// Ranges joined by commas, without spaces: the form [`SlotRanges`] parses.
pub fn ranges_text(ranges: &[SlotRange]) -> String {
    ranges
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Written as in config files: `"0-8191"`, `"9000"`.
impl serde::Serialize for SlotRange {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Folds ascending slot indices into the fewest ranges: `[1,2,3,7]` → `1-3, 7`.
pub fn compact(sorted_slots: impl IntoIterator<Item = u16>) -> Vec<SlotRange> {
    let mut ranges: Vec<SlotRange> = Vec::new();
    for slot in sorted_slots {
        match ranges.last_mut() {
            Some(last) if u32::from(last.end) + 1 == u32::from(slot) => last.end = slot,
            _ => ranges.push(SlotRange {
                start: slot,
                end: slot,
            }),
        }
    }
    ranges
}

/// Renders ranges the way config files write them: `0-8191, 9000`.
pub fn display_ranges(ranges: &[SlotRange]) -> String {
    if ranges.is_empty() {
        return "(none)".to_owned();
    }
    ranges
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
