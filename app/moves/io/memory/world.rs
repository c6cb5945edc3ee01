//! The in-memory world: shards as maps of rows with the guard rules of the shard
//! migrations (capture, fence, departed, incoming; per tenant or per slot), a control
//! database of records, directory rows and a slot map, and a client writing through the
//! routing whose acknowledged writes are the truth a move must keep.

use std::collections::{BTreeMap, BTreeSet};

use crate::moves::record::MoveRecord;
use crate::moves::tenant_guard::GuardState;
use crate::sharding::ShardKey;

pub const TABLES: [&str; 2] = ["bookmarks", "tags"];

/// (table, tenant, key)
pub type RowId = (String, String, String);

#[derive(Clone, Debug)]
pub(super) struct Guard {
    pub(super) move_id: i64,
    pub(super) state: GuardState,
    pub(super) peer: String,
}

/// One shard: its rows (a row's value stands for its hash), guards, change log and the
/// tenants placed on it despite its slot guard.
#[derive(Clone, Debug, Default)]
pub struct Shard {
    pub rows: BTreeMap<RowId, i64>,
    pub(super) tenant_guard: BTreeMap<String, Guard>,
    pub(super) slot_guard: BTreeMap<u16, Guard>,
    /// (move, table, tenant, key), oldest first.
    pub(super) changes: Vec<(i64, String, String, String)>,
    pub(super) placed: BTreeSet<String>,
}

/// Why a shard refused a client's write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Fenced,
    Incoming,
    Departed(String),
}

impl Shard {
    fn guard_for(&self, tenant: &str) -> Option<&Guard> {
        self.tenant_guard.get(tenant).or_else(|| {
            let slot = slot_of(tenant);
            (!self.placed.contains(tenant))
                .then(|| self.slot_guard.get(&slot))
                .flatten()
        })
    }

    /// A client's write (`None`: a delete), as the tenant guard trigger treats it.
    fn write(&mut self, row: &RowId, value: Option<i64>) -> Result<(), Refusal> {
        let capture = match self.guard_for(&row.1) {
            None => None,
            Some(g) => match g.state {
                GuardState::Capturing => Some(g.move_id),
                GuardState::Fenced => return Err(Refusal::Fenced),
                GuardState::Incoming => return Err(Refusal::Incoming),
                GuardState::Departed => return Err(Refusal::Departed(g.peer.clone())),
            },
        };
        match value {
            Some(v) => self.rows.insert(row.clone(), v),
            None => self.rows.remove(row),
        };
        if let Some(move_id) = capture {
            self.changes
                .push((move_id, row.0.clone(), row.1.clone(), row.2.clone()));
        }
        Ok(())
    }

    pub fn rows_of(&self, tenant: &str) -> BTreeMap<RowId, i64> {
        self.rows
            .iter()
            .filter(|(id, _)| id.1 == tenant)
            .map(|(id, v)| (id.clone(), *v))
            .collect()
    }

    pub(super) fn tenants(&self) -> BTreeSet<String> {
        self.rows.keys().map(|id| id.1.clone()).collect()
    }

    pub fn is_guarded(&self) -> bool {
        !self.tenant_guard.is_empty() || !self.slot_guard.is_empty()
    }

    pub fn logged_changes(&self) -> usize {
        self.changes.len()
    }
}

pub fn slot_of(tenant: &str) -> u16 {
    ShardKey::Str(tenant).slot().index()
}

/// Shards, control and the clients' view of what they were told.
#[derive(Clone, Debug, Default)]
pub struct World {
    pub shards: BTreeMap<String, Shard>,
    pub directory: BTreeMap<String, String>,
    /// The live slot map's changes over the configuration: slot → shard.
    pub slot_map: BTreeMap<u16, String>,
    pub records: BTreeMap<i64, MoveRecord>,
    pub jobs: BTreeSet<String>,
    /// Every row as the clients' acknowledged writes left it: what must survive any move.
    pub truth: BTreeMap<RowId, i64>,
    pub refused: Vec<Refusal>,
    /// The next client write, when writing between calls is on.
    next_write: Option<u64>,
    /// The tenants the client writes for.
    pub writers: Vec<String>,
}

impl World {
    /// Two shards, each configured with half the slots, and `rows` rows per table for each
    /// of `tenants` on the shard the configuration routes them to.
    pub fn new(tenants: &[&str], rows: usize) -> Self {
        let mut world = World {
            shards: ["shard0", "shard1"]
                .into_iter()
                .map(|s| (s.to_owned(), Shard::default()))
                .collect(),
            ..World::default()
        };
        for tenant in tenants {
            for table in TABLES {
                for k in 0..rows {
                    let row = (table.to_owned(), tenant.to_string(), format!("k{k}"));
                    let value = (k as i64 + 1) * 7_919 + tenant.len() as i64;
                    world.write(&row, Some(value)).expect("no move yet");
                }
            }
        }
        world
    }

    /// Where routing sends `tenant` now: its directory row, else the live slot map.
    pub fn route(&self, tenant: &str) -> String {
        if let Some(shard) = self.directory.get(tenant) {
            return shard.clone();
        }
        let slot = slot_of(tenant);
        self.slot_map
            .get(&slot)
            .cloned()
            .unwrap_or_else(|| configured_owner(slot).to_owned())
    }

    /// A client's write through routing, following a "departed" answer once as the web
    /// replicas do; acknowledged writes become the truth.
    pub fn write(&mut self, row: &RowId, value: Option<i64>) -> Result<(), Refusal> {
        let mut shard = self.route(&row.1);
        let mut outcome = self.shards.get_mut(&shard).unwrap().write(row, value);
        if let Err(Refusal::Departed(peer)) = &outcome {
            shard = peer.clone();
            outcome = self.shards.get_mut(&shard).unwrap().write(row, value);
        }
        match &outcome {
            Ok(()) => match value {
                Some(v) => drop(self.truth.insert(row.clone(), v)),
                None => drop(self.truth.remove(row)),
            },
            Err(refusal) => self.refused.push(refusal.clone()),
        }
        outcome
    }

    /// Has the client write between I/O calls from now on: inserts, updates and deletes
    /// of `writers`' rows, in turn.
    pub fn keep_writing(&mut self, writers: &[&str]) {
        self.writers = writers.iter().map(|w| w.to_string()).collect();
        self.next_write = Some(0);
    }

    pub(super) fn client_writes(&mut self) {
        let Some(n) = self.next_write else { return };
        self.next_write = Some(n + 1);
        if self.writers.is_empty() {
            return;
        }
        let tenant = self.writers[n as usize % self.writers.len()].clone();
        let table = TABLES[(n as usize / 2) % TABLES.len()];
        let key = format!("k{}", n % 5);
        let value = match n % 4 {
            3 => None,
            _ => Some(1_000_000 + n as i64),
        };
        let _ = self.write(&(table.to_owned(), tenant, key), value);
    }

    /// `tenant`'s rows by the truth.
    pub fn truth_of(&self, tenant: &str) -> BTreeMap<RowId, i64> {
        self.truth
            .iter()
            .filter(|(id, _)| id.1 == tenant)
            .map(|(id, v)| (id.clone(), *v))
            .collect()
    }

    pub fn shard(&self, name: &str) -> &Shard {
        &self.shards[name]
    }

    pub fn shard_mut(&mut self, name: &str) -> &mut Shard {
        self.shards.get_mut(name).unwrap()
    }
}

/// The configuration's owner of `slot`: the lower half on shard0.
pub fn configured_owner(slot: u16) -> &'static str {
    if slot < crate::sharding::SLOT_COUNT / 2 {
        "shard0"
    } else {
        "shard1"
    }
}
