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
//! - with the shards read directly, a tenant's rows on a shard other than the one the
//!   service routed its read-back to are **misplaced**.
//!
//! Writes of unknown outcome are listed with how they resolved: applied, not applied, or
//! undetermined (a later write overwrote whatever it did).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::history::{Outcome, Write, WriteKind};

/// A bookmark as the read-back saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub url: String,
    pub title: String,
}

/// One tenant's read-back through the service: its rows and the shard that answered.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub shard: Option<String>,
    pub rows: Vec<Row>,
}

/// A row found by reading a shard's primary directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRow {
    pub shard: String,
    pub tenant: String,
    pub id: String,
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
    /// Tenants written to and read back.
    pub tenants_checked: usize,
    /// Tenants (or `shard:<name>`) whose read-back failed until the patience ran out: the
    /// checker could not judge them.
    pub unreadable: Vec<String>,
}

impl Verdict {
    /// Nothing lost, phantom or misplaced, and everything read.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.phantom == 0 && self.misplaced == 0 && self.unreadable.is_empty()
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
            "verify: lost {}, phantom {}, misplaced {}, unknown {}{resolved}: {}",
            self.lost,
            self.phantom,
            self.misplaced,
            self.unknown,
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
/// `unreadable`); `run_urls` is the prefix of every URL this run's creates used;
/// `direct` is what the shards held, when they were read.
pub fn check(
    names: &[String],
    writes: &[Write],
    seen: &BTreeMap<usize, Observed>,
    run_urls: &str,
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
    }
    for (&tenant, observed) in seen {
        let name = names.get(tenant).map_or("?", String::as_str);
        let mine: Vec<&Write> = writes.iter().filter(|w| w.tenant == tenant).collect();
        check_tenant(&mut v, name, &mine, observed, run_urls);
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
                WriteKind::Create { .. } => false,
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

fn title_of(w: &Write) -> Option<&str> {
    match &w.kind {
        WriteKind::Create { title, .. } | WriteKind::Update { title, .. } => Some(title),
        WriteKind::Delete { .. } => None,
    }
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
            let explains = writes
                .iter()
                .any(|w| may_be_last(w) && title_of(w) == Some(row.title.as_str()));
            if !explains {
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
            (WriteKind::Update { title, .. }, Some(r)) if *title == r.title => {
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
            format!("on {}, while the tenant routes to {home}", r.shard),
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
                title: format!("t{n}"),
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
                title: title.to_owned(),
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
        }
    }

    fn seen(rows: Vec<Row>) -> BTreeMap<usize, Observed> {
        BTreeMap::from([(
            0,
            Observed {
                shard: Some("shard0".to_owned()),
                rows,
            },
        )])
    }

    fn verdict(writes: &[Write], rows: Vec<Row>) -> Verdict {
        check(&names(), writes, &seen(rows), RUN, None, Vec::new())
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
                tenant: "acme".to_owned(),
                id: "id1".to_owned(),
            },
            ShardRow {
                shard: "shard1".to_owned(),
                tenant: "acme".to_owned(),
                id: "id1".to_owned(),
            },
            ShardRow {
                shard: "shard1".to_owned(),
                tenant: "globex".to_owned(),
                id: "other".to_owned(),
            },
        ];
        let v = check(
            &names(),
            &writes,
            &seen(vec![row(1, "t1")]),
            RUN,
            Some(&direct),
            Vec::new(),
        );
        assert_eq!(v.misplaced, 1, "{v:?}");
        assert!(v.misplaced_ids[0].what.contains("on shard1"));
        assert!(!v.passed());
    }

    #[test]
    fn a_tenant_that_could_not_be_read_fails_the_check() {
        let v = check(
            &names(),
            &[],
            &BTreeMap::new(),
            RUN,
            None,
            vec!["acme".into()],
        );
        assert!(!v.passed());
        assert_eq!(v.lost, 0);
    }
}
