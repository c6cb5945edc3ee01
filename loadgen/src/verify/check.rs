//! The comparison itself, free of I/O: a history of writes and what the read-back saw go
//! in, a [`Verdict`] comes out. Its rules, per bookmark:
//!
//! - an acknowledged delete means the row must be gone; a row that is gone needs a delete
//!   that may have been applied (acknowledged or unknown), else it was **lost**, or, when
//!   only refused deletes were sent, a refused delete was applied (**phantom**);
//! - a row that is there must show the content of a write that may have been applied and
//!   that no acknowledged write started after it was answered (so it may be the last): the
//!   acknowledged content, or an unknown write's. The content of a refused update is a
//!   **phantom**; anything else means an acknowledged write was **lost**;
//! - a refused create whose URL is there is a **phantom**, and so is a row carrying this
//!   run's URLs that no create asked for;
//! - a row that shows the title of such a write must show the collection it filed the
//!   bookmark in, or it is **misplaced**, and its states, or the write was **lost**;
//! - an acknowledged collection must be there with its name and parent (else **lost**),
//!   and a refused one must not (a **phantom**, as is one with this run's names that no
//!   write asked for);
//! - a write sent with a viewer's key that was acknowledged is a **phantom** (a viewer
//!   writes nothing);
//! - with the shards read directly, a tenant's rows (bookmarks and collections) on a shard
//!   other than the one the service routed its read-back to are **misplaced**.
//!
//! Writes of unknown outcome are listed with how they resolved: applied, not applied, or
//! undetermined (a later write overwrote whatever it did).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::history::{Content, Outcome, States, Write, WriteKind};

/// A bookmark as the read-back saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub url: String,
    pub title: String,
    pub collection: Option<String>,
    pub states: States,
}

/// A collection as the read-back saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionRow {
    pub id: String,
    pub name: String,
    pub parent: Option<String>,
}

/// One tenant's read-back through the service: its bookmarks and collections, and the
/// shard that answered.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub shard: Option<String>,
    pub rows: Vec<Row>,
    pub collections: Vec<CollectionRow>,
}

/// A row found by reading a shard's primary directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRow {
    pub shard: String,
    /// `bookmarks` or `collections`.
    pub table: String,
    pub tenant: String,
    pub id: String,
}

/// What marks this run's data: every URL its creates use starts with `urls`, every name
/// of a collection it makes with `collections`.
#[derive(Debug, Clone, Copy)]
pub struct RunMarks<'a> {
    pub urls: &'a str,
    pub collections: &'a str,
}

/// One offending row or write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub tenant: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub what: String,
}

/// How a write of unknown outcome turned out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    pub tenant: String,
    pub op: &'static str,
    /// The bookmark id, or the URL of a create.
    pub target: String,
    /// Why its outcome was unknown (`timeout`, `502`, …).
    pub label: String,
    /// `applied`, `not_applied` or `undetermined`.
    pub resolved: &'static str,
}

/// What the checker found. `lost`, `phantom`, `misplaced` and `unknown` are the counts of
/// the lists beside them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub lost: usize,
    pub phantom: usize,
    pub misplaced: usize,
    pub unknown: usize,
    pub lost_ids: Vec<Finding>,
    pub phantom_ids: Vec<Finding>,
    pub misplaced_ids: Vec<Finding>,
    pub unknown_writes: Vec<Resolution>,
    /// Writes by outcome: `acked`, `refused`, `unknown`.
    pub writes: BTreeMap<&'static str, usize>,
    /// Of those, the collection creates by outcome.
    pub collection_writes: BTreeMap<&'static str, usize>,
    /// Of those, the writes sent with a viewer's key, by outcome (all refused, or the
    /// acknowledged ones are phantoms).
    pub viewer_writes: BTreeMap<&'static str, usize>,
    /// Of those, the writes sent in batches, by outcome.
    pub batch_writes: BTreeMap<&'static str, usize>,
    /// Tenants written to and read back.
    pub tenants_checked: usize,
    /// Tenants (or `shard:<name>`) whose read-back failed until the patience ran out: the
    /// checker could not judge them.
    pub unreadable: Vec<String>,
    /// Reads during the run, sent with the tenant's latest consistency token, that did not
    /// show a bookmark an acknowledged write had created (its count is `stale`).
    pub stale: usize,
    pub stale_ids: Vec<crate::consistency::StaleRead>,
}

impl Verdict {
    /// Nothing lost, phantom or misplaced, and everything read.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.phantom == 0
            && self.misplaced == 0
            && self.stale == 0
            && self.unreadable.is_empty()
    }

    /// The verdict for the terminal: counts, then up to ten of each kind of finding.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let count = |k| self.writes.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "\nverify: {} tenants read back; writes {} acknowledged, {} refused, {} unknown",
            self.tenants_checked,
            count("acked"),
            count("refused"),
            count("unknown")
        );
        let of = |by: &BTreeMap<&'static str, usize>, k| by.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "verify: of those, collections {} acknowledged, {} refused; viewers' writes {} \
             refused, {} acknowledged; in batches {} acknowledged, {} refused, {} unknown",
            of(&self.collection_writes, "acked"),
            of(&self.collection_writes, "refused"),
            of(&self.viewer_writes, "refused"),
            of(&self.viewer_writes, "acked"),
            of(&self.batch_writes, "acked"),
            of(&self.batch_writes, "refused"),
            of(&self.batch_writes, "unknown"),
        );
        let mut resolved: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &self.unknown_writes {
            *resolved.entry(r.resolved).or_default() += 1;
        }
        let resolved: Vec<String> = resolved
            .iter()
            .map(|(how, n)| format!("{n} {}", how.replace('_', " ")))
            .collect();
        let resolved = if resolved.is_empty() {
            String::new()
        } else {
            format!(" ({})", resolved.join(", "))
        };
        let _ = writeln!(
            out,
            "verify: lost {}, phantom {}, misplaced {}, unknown {}{resolved}, stale reads {}: {}",
            self.lost,
            self.phantom,
            self.misplaced,
            self.unknown,
            self.stale,
            if self.passed() { "PASSED" } else { "FAILED" }
        );
        for (kind, list) in [
            ("lost", &self.lost_ids),
            ("phantom", &self.phantom_ids),
            ("misplaced", &self.misplaced_ids),
        ] {
            for f in list.iter().take(10) {
                let id = f.id.as_deref().unwrap_or("-");
                let _ = writeln!(out, "  {kind} {} {id}: {}", f.tenant, f.what);
            }
        }
        for s in self.stale_ids.iter().take(10) {
            let _ = writeln!(
                out,
                "  stale {} {} (read from {})",
                s.tenant, s.id, s.read_from
            );
        }
        for u in self.unreadable.iter().take(10) {
            let _ = writeln!(out, "  unreadable {u}");
        }
        out
    }

    fn finish(mut self) -> Self {
        self.lost = self.lost_ids.len();
        self.phantom = self.phantom_ids.len();
        self.misplaced = self.misplaced_ids.len();
        self.unknown = self.unknown_writes.len();
        self
    }
}

fn finding(tenant: &str, id: Option<&str>, url: Option<&str>, what: String) -> Finding {
    Finding {
        tenant: tenant.to_owned(),
        id: id.map(str::to_owned),
        url: url.map(str::to_owned),
        what,
    }
}

/// Compares `writes` with what was read back. `names` are the tenants by population index;
/// `seen` holds every tenant written to that could be read (the others are in
/// `unreadable`); `run` marks this run's URLs and collection names; `direct` is what the
/// shards held, when they were read.
pub fn check(
    names: &[String],
    writes: &[Write],
    seen: &BTreeMap<usize, Observed>,
    run: RunMarks<'_>,
    direct: Option<&[ShardRow]>,
    unreadable: Vec<String>,
) -> Verdict {
    let mut v = Verdict {
        unreadable,
        tenants_checked: seen.len(),
        ..Verdict::default()
    };
    for w in writes {
        let key = match w.outcome {
            Outcome::Acked => "acked",
            Outcome::Refused(_) => "refused",
            Outcome::Unknown(_) => "unknown",
        };
        *v.writes.entry(key).or_default() += 1;
        if matches!(w.kind, WriteKind::Collection { .. }) {
            *v.collection_writes.entry(key).or_default() += 1;
        }
        if w.viewer {
            *v.viewer_writes.entry(key).or_default() += 1;
        }
        if w.batched {
            *v.batch_writes.entry(key).or_default() += 1;
        }
        if w.viewer && w.outcome == Outcome::Acked {
            let name = names.get(w.tenant).map_or("?", String::as_str);
            v.phantom_ids.push(finding(
                name,
                None,
                None,
                format!(
                    "a write sent with a viewer's key was acknowledged: {:?}",
                    w.kind
                ),
            ));
        }
    }
    for (&tenant, observed) in seen {
        let name = names.get(tenant).map_or("?", String::as_str);
        let mine: Vec<&Write> = writes.iter().filter(|w| w.tenant == tenant).collect();
        check_tenant(&mut v, name, &mine, observed, run.urls);
        check_collections(&mut v, name, &mine, observed, run.collections);
        if let Some(direct) = direct {
            check_placement(&mut v, name, observed, direct);
        }
    }
    v.finish()
}

fn check_tenant(v: &mut Verdict, name: &str, writes: &[&Write], seen: &Observed, run_urls: &str) {
    let by_id: BTreeMap<&str, &Row> = seen.rows.iter().map(|r| (r.id.as_str(), r)).collect();
    let by_url: BTreeMap<&str, &Row> = seen.rows.iter().map(|r| (r.url.as_str(), r)).collect();
    // Bookmarks this run created (by id), each with its creating write.
    let mut tracked: BTreeMap<String, &Write> = BTreeMap::new();
    let mut asked_urls = BTreeSet::new();
    for w in writes {
        let WriteKind::Create { url, id, .. } = &w.kind else {
            continue;
        };
        asked_urls.insert(url.as_str());
        let row = by_url.get(url.as_str());
        match (&w.outcome, id, row) {
            (Outcome::Acked, Some(id), _) => {
                tracked.insert(id.clone(), w);
            }
            (Outcome::Acked, None, _) => {}
            (Outcome::Refused(label), _, Some(row)) => v.phantom_ids.push(finding(
                name,
                Some(&row.id),
                Some(url),
                format!("a create refused with {label} is there"),
            )),
            (Outcome::Refused(_), _, None) => {}
            (Outcome::Unknown(label), _, row) => {
                if let Some(row) = row {
                    tracked.insert(row.id.clone(), w);
                }
                v.unknown_writes.push(Resolution {
                    tenant: name.to_owned(),
                    op: "create",
                    target: url.clone(),
                    label: label.clone(),
                    resolved: if row.is_some() {
                        "applied"
                    } else {
                        "not_applied"
                    },
                });
            }
        }
    }
    for (id, create) in &tracked {
        let later: Vec<&Write> = writes
            .iter()
            .copied()
            .filter(|w| match &w.kind {
                WriteKind::Update { id: i, .. } | WriteKind::Delete { id: i } => i == id,
                WriteKind::Create { .. } | WriteKind::Collection { .. } => false,
            })
            .collect();
        let mut history = vec![*create];
        history.extend(later);
        check_bookmark(v, name, id, &history, by_id.get(id.as_str()).copied());
    }
    for row in &seen.rows {
        if row.url.starts_with(run_urls) && !asked_urls.contains(row.url.as_str()) {
            v.phantom_ids.push(finding(
                name,
                Some(&row.id),
                Some(&row.url),
                "a row with this run's URLs that no create asked for".to_owned(),
            ));
        }
    }
}

/// What a bookmark write leaves (none for a delete).
fn content_of(w: &Write) -> Option<&Content> {
    match &w.kind {
        WriteKind::Create { content, .. } | WriteKind::Update { content, .. } => Some(content),
        WriteKind::Delete { .. } | WriteKind::Collection { .. } => None,
    }
}

fn title_of(w: &Write) -> Option<&str> {
    content_of(w).map(|c| c.title.as_str())
}

/// One bookmark: `writes` starts with its create, then every update and delete of its id.
fn check_bookmark(v: &mut Verdict, name: &str, id: &str, writes: &[&Write], row: Option<&Row>) {
    let deletes = || {
        writes
            .iter()
            .filter(|w| matches!(w.kind, WriteKind::Delete { .. }))
    };
    let acked_delete = deletes().any(|w| w.outcome == Outcome::Acked);
    let maybe_deleted = deletes().any(|w| w.maybe_applied());
    let refused_delete = deletes().find(|w| !w.maybe_applied());
    let lost = |v: &mut Verdict, what: String| {
        v.lost_ids
            .push(finding(name, Some(id), row.map(|r| r.url.as_str()), what));
    };
    match row {
        None if maybe_deleted => {}
        None => match refused_delete {
            Some(d) => v.phantom_ids.push(finding(
                name,
                Some(id),
                None,
                format!("gone, but its only delete was refused ({})", label(d)),
            )),
            None => lost(v, "acknowledged, and gone without a delete".to_owned()),
        },
        Some(_) if acked_delete => lost(v, "an acknowledged delete, and still there".to_owned()),
        Some(row) => {
            // A write may be the last one applied unless an acknowledged write began after
            // it was answered.
            let may_be_last = |w: &Write| {
                w.maybe_applied()
                    && !writes.iter().any(|later| {
                        later.outcome == Outcome::Acked
                            && title_of(later).is_some()
                            && w.effect_until().is_some_and(|until| later.sent > until)
                    })
            };
            let shown = writes
                .iter()
                .find(|w| may_be_last(w) && title_of(w) == Some(row.title.as_str()));
            // Titles are unique to a write: the row shows that write, and must show all of it.
            if let Some(content) = shown.and_then(|w| content_of(w)) {
                if content.collection != row.collection {
                    v.misplaced_ids.push(finding(
                        name,
                        Some(id),
                        Some(&row.url),
                        format!(
                            "filed in {:?}, while the write that left its title filed it in {:?}",
                            row.collection, content.collection
                        ),
                    ));
                } else if content.states != row.states {
                    lost(
                        v,
                        format!(
                            "shows the title of a write with states {:?}, but {:?}",
                            content.states, row.states
                        ),
                    );
                }
            }
            if shown.is_none() {
                let refused = writes
                    .iter()
                    .find(|w| !w.maybe_applied() && title_of(w) == Some(row.title.as_str()));
                match refused {
                    Some(w) => v.phantom_ids.push(finding(
                        name,
                        Some(id),
                        Some(&row.url),
                        format!(
                            "shows the title of an update refused with {}: {:?}",
                            label(w),
                            row.title
                        ),
                    )),
                    None => {
                        let expected: Vec<&str> = writes
                            .iter()
                            .filter(|w| may_be_last(w))
                            .filter_map(|w| title_of(w))
                            .collect();
                        lost(
                            v,
                            format!(
                                "shows title {:?}; an acknowledged write left one of {expected:?}",
                                row.title
                            ),
                        );
                    }
                }
            }
        }
    }
    for w in writes.iter().skip(1) {
        let Outcome::Unknown(label) = &w.outcome else {
            continue;
        };
        let (op, resolved) = match (&w.kind, row) {
            (WriteKind::Delete { .. }, None) => ("delete", "applied"),
            (WriteKind::Delete { .. }, Some(_)) => ("delete", "not_applied"),
            (WriteKind::Update { content, .. }, Some(r)) if content.title == r.title => {
                ("update", "applied")
            }
            _ => ("update", "undetermined"),
        };
        v.unknown_writes.push(Resolution {
            tenant: name.to_owned(),
            op,
            target: id.to_owned(),
            label: label.clone(),
            resolved,
        });
    }
}

/// The tenant's collections against the collection writes: each acknowledged one there as
/// asked, no refused one there, none of this run's that no write asked for.
fn check_collections(
    v: &mut Verdict,
    name: &str,
    writes: &[&Write],
    seen: &Observed,
    run_collections: &str,
) {
    let by_name: BTreeMap<&str, &CollectionRow> = seen
        .collections
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut asked = BTreeSet::new();
    for w in writes {
        let WriteKind::Collection {
            name: wanted,
            parent,
            id,
        } = &w.kind
        else {
            continue;
        };
        asked.insert(wanted.as_str());
        let there = by_name.get(wanted.as_str());
        match (&w.outcome, there) {
            (Outcome::Acked, None) => v.lost_ids.push(finding(
                name,
                id.as_deref(),
                None,
                format!("an acknowledged collection {wanted:?} is gone"),
            )),
            (Outcome::Acked, Some(c)) if c.parent != *parent || id.as_ref() != Some(&c.id) => {
                v.lost_ids.push(finding(
                    name,
                    Some(&c.id),
                    None,
                    format!(
                        "collection {wanted:?} is in {:?}; its acknowledged create put it in {parent:?}",
                        c.parent
                    ),
                ))
            }
            (Outcome::Acked, Some(_)) => {}
            (Outcome::Refused(label), Some(c)) => v.phantom_ids.push(finding(
                name,
                Some(&c.id),
                None,
                format!("collection {wanted:?}, refused with {label}, is there"),
            )),
            (Outcome::Refused(_), None) => {}
            (Outcome::Unknown(label), there) => v.unknown_writes.push(Resolution {
                tenant: name.to_owned(),
                op: "collection",
                target: wanted.clone(),
                label: label.clone(),
                resolved: if there.is_some() {
                    "applied"
                } else {
                    "not_applied"
                },
            }),
        }
    }
    for c in &seen.collections {
        if c.name.starts_with(run_collections) && !asked.contains(c.name.as_str()) {
            v.phantom_ids.push(finding(
                name,
                Some(&c.id),
                None,
                format!(
                    "collection {:?} has this run's names, and no write asked for it",
                    c.name
                ),
            ));
        }
    }
}

fn label(w: &Write) -> &str {
    match &w.outcome {
        Outcome::Refused(l) | Outcome::Unknown(l) => l,
        Outcome::Acked => "2xx",
    }
}

/// Rows of the tenant on a shard other than the one that answered its read-back.
fn check_placement(v: &mut Verdict, name: &str, seen: &Observed, direct: &[ShardRow]) {
    let Some(home) = &seen.shard else {
        return;
    };
    for r in direct
        .iter()
        .filter(|r| r.tenant == name && r.shard != *home)
    {
        v.misplaced_ids.push(finding(
            name,
            Some(&r.id),
            None,
            format!(
                "in {} on {}, while the tenant routes to {home}",
                r.table, r.shard
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const RUN: &str = "https://example.com/1/run";

    fn names() -> Vec<String> {
        vec!["acme".to_owned(), "globex".to_owned()]
    }

    fn at(from_ms: u64, to_ms: u64, kind: WriteKind, outcome: Outcome) -> Write {
        Write {
            tenant: 0,
            viewer: false,
            batched: false,
            kind,
            sent: Duration::from_millis(from_ms),
            ended: Duration::from_millis(to_ms),
            outcome,
        }
    }

    fn create(n: u32, outcome: Outcome) -> Write {
        let acked = outcome == Outcome::Acked;
        at(
            u64::from(n) * 10,
            u64::from(n) * 10 + 5,
            WriteKind::Create {
                url: format!("{RUN}/{n}"),
                content: Content::titled(format!("t{n}")),
                id: acked.then(|| format!("id{n}")),
            },
            outcome,
        )
    }

    fn update(n: u32, title: &str, from_ms: u64, to_ms: u64, outcome: Outcome) -> Write {
        at(
            from_ms,
            to_ms,
            WriteKind::Update {
                id: format!("id{n}"),
                content: Content::titled(title),
            },
            outcome,
        )
    }

    fn delete(n: u32, outcome: Outcome) -> Write {
        at(
            1000,
            1005,
            WriteKind::Delete {
                id: format!("id{n}"),
            },
            outcome,
        )
    }

    fn row(n: u32, title: &str) -> Row {
        Row {
            id: format!("id{n}"),
            url: format!("{RUN}/{n}"),
            title: title.to_owned(),
            collection: None,
            states: States::default(),
        }
    }

    fn seen(rows: Vec<Row>) -> BTreeMap<usize, Observed> {
        seen_with(rows, Vec::new())
    }

    fn seen_with(rows: Vec<Row>, collections: Vec<CollectionRow>) -> BTreeMap<usize, Observed> {
        BTreeMap::from([(
            0,
            Observed {
                shard: Some("shard0".to_owned()),
                rows,
                collections,
            },
        )])
    }

    const MARKS: RunMarks<'static> = RunMarks {
        urls: RUN,
        collections: "run-c",
    };

    fn verdict(writes: &[Write], rows: Vec<Row>) -> Verdict {
        check(&names(), writes, &seen(rows), MARKS, None, Vec::new())
    }

    fn refused() -> Outcome {
        Outcome::Refused("503 tenant_moving".to_owned())
    }

    fn unknown() -> Outcome {
        Outcome::Unknown("timeout".to_owned())
    }

    #[test]
    fn a_history_that_was_kept_passes() {
        let writes = [
            create(1, Outcome::Acked),
            create(2, Outcome::Acked),
            update(1, "new", 100, 110, Outcome::Acked),
            delete(2, Outcome::Acked),
            create(3, refused()),
        ];
        let v = verdict(&writes, vec![row(1, "new")]);
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.writes["acked"], 4);
        assert_eq!(v.writes["refused"], 1);
    }

    #[test]
    fn an_acknowledged_create_that_is_gone_is_lost() {
        let v = verdict(&[create(1, Outcome::Acked)], vec![]);
        assert_eq!(v.lost, 1);
        assert_eq!(v.lost_ids[0].id.as_deref(), Some("id1"));
        assert!(!v.passed());
    }

    #[test]
    fn an_acknowledged_update_overwritten_by_an_older_value_is_lost() {
        let writes = [
            create(1, Outcome::Acked),
            update(1, "first", 100, 110, Outcome::Acked),
            update(1, "second", 200, 210, Outcome::Acked),
        ];
        assert_eq!(verdict(&writes, vec![row(1, "first")]).lost, 1);
        assert!(verdict(&writes, vec![row(1, "second")]).passed());
    }

    #[test]
    fn concurrent_acknowledged_updates_may_end_either_way() {
        let writes = [
            create(1, Outcome::Acked),
            update(1, "a", 100, 300, Outcome::Acked),
            update(1, "b", 200, 250, Outcome::Acked),
        ];
        assert!(verdict(&writes, vec![row(1, "a")]).passed());
        assert!(verdict(&writes, vec![row(1, "b")]).passed());
        assert_eq!(verdict(&writes, vec![row(1, "t1")]).lost, 1);
    }

    #[test]
    fn an_acknowledged_delete_of_a_row_still_there_is_lost() {
        let writes = [create(1, Outcome::Acked), delete(1, Outcome::Acked)];
        assert_eq!(verdict(&writes, vec![row(1, "t1")]).lost, 1);
    }

    #[test]
    fn a_refused_create_that_is_there_is_a_phantom() {
        let v = verdict(&[create(4, refused())], vec![row(4, "t4")]);
        assert_eq!(v.phantom, 1);
        assert_eq!(v.phantom_ids[0].url.as_deref(), Some(&*format!("{RUN}/4")));
        assert!(!v.passed());
    }

    #[test]
    fn a_refused_update_or_delete_that_took_effect_is_a_phantom() {
        let writes = [
            create(1, Outcome::Acked),
            update(1, "refused", 100, 110, refused()),
        ];
        assert_eq!(verdict(&writes, vec![row(1, "refused")]).phantom, 1);
        let writes = [create(1, Outcome::Acked), delete(1, refused())];
        assert_eq!(verdict(&writes, vec![]).phantom, 1);
        assert!(verdict(&writes, vec![row(1, "t1")]).passed());
    }

    #[test]
    fn a_row_of_this_run_that_nobody_created_is_a_phantom() {
        let v = verdict(&[], vec![row(9, "t9")]);
        assert_eq!(v.phantom, 1);
        let mut other = row(9, "t9");
        other.url = "https://example.com/1/earlier-run/9".to_owned();
        assert!(verdict(&[], vec![other]).passed());
    }

    #[test]
    fn an_unknown_create_resolves_by_whether_its_url_is_there() {
        let writes = [create(5, unknown())];
        let applied = verdict(&writes, vec![row(5, "t5")]);
        assert!(applied.passed());
        assert_eq!(applied.unknown, 1);
        assert_eq!(applied.unknown_writes[0].resolved, "applied");
        let not = verdict(&writes, vec![]);
        assert!(not.passed());
        assert_eq!(not.unknown_writes[0].resolved, "not_applied");
    }

    #[test]
    fn unknown_updates_and_deletes_resolve_both_ways() {
        let update_writes = [
            create(1, Outcome::Acked),
            update(1, "maybe", 100, 110, unknown()),
        ];
        let applied = verdict(&update_writes, vec![row(1, "maybe")]);
        assert!(applied.passed());
        assert_eq!(applied.unknown_writes[0].resolved, "applied");
        let not = verdict(&update_writes, vec![row(1, "t1")]);
        assert!(not.passed(), "{not:?}");
        assert_eq!(not.unknown_writes[0].resolved, "undetermined");
        let delete_writes = [create(1, Outcome::Acked), delete(1, unknown())];
        assert_eq!(
            verdict(&delete_writes, vec![]).unknown_writes[0].resolved,
            "applied"
        );
        assert_eq!(
            verdict(&delete_writes, vec![row(1, "t1")]).unknown_writes[0].resolved,
            "not_applied"
        );
    }

    #[test]
    fn an_unknown_update_can_explain_a_title_even_after_a_later_acknowledged_one() {
        // Its answer was lost: it may have been applied at any time, after "b" too.
        let writes = [
            create(1, Outcome::Acked),
            update(1, "a", 100, 110, unknown()),
            update(1, "b", 200, 210, Outcome::Acked),
        ];
        assert!(verdict(&writes, vec![row(1, "a")]).passed());
    }

    #[test]
    fn rows_on_a_shard_the_tenant_does_not_route_to_are_misplaced() {
        let writes = [create(1, Outcome::Acked)];
        let direct = [
            ShardRow {
                shard: "shard0".to_owned(),
                table: "bookmarks".to_owned(),
                tenant: "acme".to_owned(),
                id: "id1".to_owned(),
            },
            ShardRow {
                shard: "shard1".to_owned(),
                table: "bookmarks".to_owned(),
                tenant: "acme".to_owned(),
                id: "id1".to_owned(),
            },
            ShardRow {
                shard: "shard1".to_owned(),
                table: "bookmarks".to_owned(),
                tenant: "globex".to_owned(),
                id: "other".to_owned(),
            },
        ];
        let v = check(
            &names(),
            &writes,
            &seen(vec![row(1, "t1")]),
            MARKS,
            Some(&direct),
            Vec::new(),
        );
        assert_eq!(v.misplaced, 1, "{v:?}");
        assert!(v.misplaced_ids[0].what.contains("in bookmarks on shard1"));
        assert!(!v.passed());
    }

    #[test]
    fn a_tenant_that_could_not_be_read_fails_the_check() {
        let v = check(
            &names(),
            &[],
            &BTreeMap::new(),
            MARKS,
            None,
            vec!["acme".into()],
        );
        assert!(!v.passed());
        assert_eq!(v.lost, 0);
    }

    fn filed(n: u32, title: &str, collection: Option<&str>, states: States) -> Write {
        at(
            100,
            110,
            WriteKind::Update {
                id: format!("id{n}"),
                content: Content {
                    title: title.to_owned(),
                    collection: collection.map(str::to_owned),
                    states,
                },
            },
            Outcome::Acked,
        )
    }

    #[test]
    fn a_row_in_another_collection_than_its_write_filed_it_in_is_misplaced() {
        let unread = States::from_bits(1);
        let writes = [
            create(1, Outcome::Acked),
            filed(1, "filed", Some("c1"), unread),
        ];
        let mut there = row(1, "filed");
        there.collection = Some("c1".to_owned());
        there.states = unread;
        assert!(verdict(&writes, vec![there.clone()]).passed());
        let mut elsewhere = there.clone();
        elsewhere.collection = Some("c2".to_owned());
        let v = verdict(&writes, vec![elsewhere]);
        assert_eq!((v.misplaced, v.lost), (1, 0), "{v:?}");
        let mut unfiled = there.clone();
        unfiled.collection = None;
        assert_eq!(verdict(&writes, vec![unfiled]).misplaced, 1);
        let mut read = there;
        read.states = States::default();
        assert_eq!(verdict(&writes, vec![read]).lost, 1, "its states were lost");
    }

    fn collection(n: u32, parent: Option<&str>, outcome: Outcome) -> Write {
        let acked = outcome == Outcome::Acked;
        at(
            10,
            20,
            WriteKind::Collection {
                name: format!("run-c{n}"),
                parent: parent.map(str::to_owned),
                id: acked.then(|| format!("c{n}")),
            },
            outcome,
        )
    }

    fn collection_row(n: u32, parent: Option<&str>) -> CollectionRow {
        CollectionRow {
            id: format!("c{n}"),
            name: format!("run-c{n}"),
            parent: parent.map(str::to_owned),
        }
    }

    fn collections_verdict(writes: &[Write], collections: Vec<CollectionRow>) -> Verdict {
        let seen = seen_with(Vec::new(), collections);
        check(&names(), writes, &seen, MARKS, None, Vec::new())
    }

    #[test]
    fn collections_are_lost_phantom_or_moved_like_bookmarks() {
        let writes = [
            collection(1, None, Outcome::Acked),
            collection(2, Some("c1"), Outcome::Acked),
            collection(3, Some("c2"), refused()),
        ];
        let kept = vec![collection_row(1, None), collection_row(2, Some("c1"))];
        assert!(collections_verdict(&writes, kept.clone()).passed());
        let gone = collections_verdict(&writes, vec![collection_row(1, None)]);
        assert_eq!(gone.lost, 1, "{gone:?}");
        let moved = vec![collection_row(1, None), collection_row(2, None)];
        assert_eq!(collections_verdict(&writes, moved).lost, 1);
        let mut with_refused = kept.clone();
        with_refused.push(collection_row(3, Some("c2")));
        assert_eq!(collections_verdict(&writes, with_refused).phantom, 1);
        let mut unasked = kept;
        unasked.push(collection_row(9, None));
        assert_eq!(collections_verdict(&writes, unasked).phantom, 1);
        let maybe = [collection(4, None, unknown())];
        let v = collections_verdict(&maybe, vec![collection_row(4, None)]);
        assert!(v.passed());
        assert_eq!(v.unknown_writes[0].resolved, "applied");
    }

    #[test]
    fn batched_writes_are_counted_apart_and_held_to_their_answer_like_any_other() {
        let batch = |n, outcome| {
            let mut w = create(n, outcome);
            w.batched = true;
            w
        };
        let writes = [batch(1, Outcome::Acked), batch(2, refused())];
        let v = verdict(&writes, vec![row(1, "t1")]);
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.batch_writes.get("acked"), Some(&1));
        assert_eq!(v.batch_writes.get("refused"), Some(&1));
        // The acknowledged one missing is lost; the refused one present is a phantom.
        assert_eq!(verdict(&writes, vec![]).lost, 1);
        assert!(verdict(&writes, vec![row(1, "t1"), row(2, "t2")]).phantom >= 1);
    }

    #[test]
    fn an_acknowledged_write_sent_with_a_viewers_key_is_a_phantom() {
        let mut by_viewer = create(7, refused());
        by_viewer.viewer = true;
        by_viewer.outcome = Outcome::Refused("403 forbidden_role".to_owned());
        assert!(verdict(&[by_viewer.clone()], vec![]).passed());
        by_viewer.outcome = Outcome::Acked;
        let v = verdict(&[by_viewer], vec![row(7, "t7")]);
        assert!(v.phantom >= 1, "{v:?}");
        assert!(v.phantom_ids[0].what.contains("viewer"));
    }
}
