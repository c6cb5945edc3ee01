//! Step 2: verify, fence, verify what changed. A mismatch aborts the move: the source stays
//! authoritative and nothing of it is deleted.
//!
//! Ahead of the fence, while the tenants stay writable and their writes are captured, the
//! source (in one snapshot) and the destination are compared per table by row count and a
//! checksum of every column, leaving out the rows with a captured change not yet copied.
//! Then the source is fenced (it refuses the tenants' writes), the last captured changes
//! are copied, and only the rows changed since the snapshot are compared, one by one. So
//! the fence's work grows with the writes made during the move, not with the tenants'
//! size. `verify --full` (and a move resumed while fenced, which no longer knows what
//! changed) compares every row inside the fence instead, as one checksum per table.
//!
//! The recorded fingerprint is that of the whole verified state either way: the snapshot's
//! checksum, minus what the changed rows were then, plus what they are now.

use super::routing;
use std::time::Instant;

use super::abort::undo_copy;
use super::copy::catch_up_until_small;
use crate::moves::checksum::{self, TableSum};
use crate::moves::context::StepContext;
use crate::moves::error::{MoveError, on_db};
use crate::moves::io::{At, MoveIo};
use crate::moves::pause::PausePoint;
use crate::moves::record::{MoveRecord, MoveState, Set};
use crate::moves::scope::{Scope, Side};
use crate::moves::tenant_guard::GuardState;
use crate::moves::transfer::{self, Keys};

/// The verification made ahead of the fence, kept for the check inside it (the source
/// snapshot its `sums` were read in stays open in the [`MoveIo`] until then).
struct Ahead {
    members: Vec<String>,
    /// Per table, at the snapshot, without the rows in `pending`.
    sums: Vec<TableSum>,
    /// Rows whose captured change had not been copied at the snapshot.
    pending: Keys,
    /// `pending` plus every row whose change was copied since: what the fence compares.
    changed: Keys,
}

/// What the verification found: the tenants, their fingerprint, and how much it compared.
struct Verified {
    tenants: Vec<String>,
    sums: Vec<TableSum>,
    how: String,
}

pub async fn run<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
) -> Result<(), MoveError> {
    let scope = Scope::of(m);
    let mut ahead = None;
    if m.state == MoveState::Copied {
        if !cx.fence.full {
            match verify_ahead(cx, m, &scope).await? {
                Ok(found) => ahead = Some(found),
                Err(failure) => return abort(cx, m, failure).await,
            }
        }
        cx.io
            .guard(Side::Source, &scope, m.id, GuardState::Fenced, &m.to)
            .await
            .map_err(on_db(format!("cannot fence the tenants on {}", m.from)))?;
        *cx.fenced_since = Some(Instant::now());
        cx.advance(m, MoveState::Fenced, &[Set::Now("fenced_at")])
            .await?;
        cx.progress
            .step(&format!("fenced: {} refuses the tenants' writes", m.from));
        cx.io
            .pause(PausePoint::AfterFence)
            .await
            .map_err(on_db("paused after the fence"))?;
    } else {
        // Fenced by an earlier run: what changed since its verification is not known here.
        cx.fenced_since.get_or_insert_with(Instant::now);
        if !cx.fence.full {
            cx.progress.step(
                "the move was fenced by an earlier run: comparing every row inside the fence",
            );
        }
    }
    let final_copy = Instant::now();
    let mut applied = 0;
    loop {
        let changed = ahead.as_mut().map(|a: &mut Ahead| &mut a.changed);
        let n = cx
            .io
            .catch_up(m.id, changed)
            .await
            .map_err(on_db("final copy failed"))?;
        applied += n;
        if n == 0 {
            break;
        }
        within_fence_cap(cx, m, &scope, "copying the last changes").await?;
    }
    let final_copy = final_copy.elapsed();
    let checking = Instant::now();
    let found = match ahead {
        Some(ahead) => compare_changed(cx, m, ahead).await?,
        None => compare_all(cx, m, &scope).await?,
    };
    let found = match found {
        Ok(found) => found,
        Err(failure) => return abort(cx, m, failure).await,
    };
    within_fence_cap(cx, m, &scope, "comparing").await?;
    let rows: i64 = found.sums.iter().map(|s| s.rows).sum();
    let sums = serde_json::to_value(&found.sums).expect("sums serialize");
    cx.advance(
        m,
        MoveState::Verified,
        &[
            Set::Tenants(&found.tenants),
            Set::Count("rows_verified", rows),
            Set::Count("changes_applied", m.changes_applied + applied as i64),
            Set::Json("checksums", &sums),
            Set::Now("verified_at"),
        ],
    )
    .await?;
    cx.progress.step(&format!(
        "verified {rows} row(s): {} (final copy of {applied} change(s) {} ms, comparison {} ms)",
        found.how,
        final_copy.as_millis(),
        checking.elapsed().as_millis()
    ));
    Ok(())
}

/// Compares the two shards while the tenants stay writable; then copies what was written
/// meanwhile, noting each row it copies.
async fn verify_ahead<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &MoveRecord,
    scope: &Scope,
) -> Result<Result<Ahead, MoveError>, MoveError> {
    let started = Instant::now();
    // Nothing copies to the destination until both sides are read, so the destination
    // holds exactly the snapshot's rows except those with a change logged but not copied
    // yet (`pending`).
    let pending = cx
        .io
        .open_snapshot(m.id)
        .await
        .map_err(on_db(format!("cannot read a snapshot of {}", m.from)))?;
    let members = routing::members(scope, cx.io, m, At::Snapshot).await?;
    let at_source = match compare_tables(cx, At::Snapshot, m, &members, &pending).await? {
        Ok(sums) => sums,
        Err(failure) => {
            cx.io.close_snapshot();
            return Ok(Err(failure));
        }
    };
    let rows: i64 = at_source.iter().map(|s| s.rows).sum();
    cx.progress.step(&format!(
        "verified {rows} row(s) ahead of the fence in {} ms; {} row(s) with changes still \
         being copied are compared inside it",
        started.elapsed().as_millis(),
        transfer::key_count(&pending)
    ));
    let mut changed = pending.clone();
    catch_up_until_small(cx.io, m.id, Some(&mut changed)).await?;
    Ok(Ok(Ahead {
        members,
        sums: at_source,
        pending,
        changed,
    }))
}

/// Inside the fence, after a verification ahead of it: compares only the rows changed
/// since its snapshot.
async fn compare_changed<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &MoveRecord,
    ahead: Ahead,
) -> Result<Result<Verified, MoveError>, MoveError> {
    // Rows changed after the snapshot were counted in `sums` as they were then.
    let mut since = ahead.changed.clone();
    for (table, keys) in &ahead.pending {
        if let Some(s) = since.get_mut(table) {
            s.retain(|k| !keys.contains(k));
        }
    }
    let (now_source, now_dest, then) = tokio::join!(
        cx.io.row_hashes(At::Source, &ahead.changed),
        cx.io.row_hashes(At::Dest, &ahead.changed),
        cx.io.row_hashes(At::Snapshot, &since)
    );
    cx.io.close_snapshot();
    let now_source = now_source.map_err(on_db(format!("cannot checksum {}", m.from)))?;
    let now_dest = now_dest.map_err(on_db(format!("cannot checksum {}", m.to)))?;
    let then = then.map_err(on_db(format!("cannot checksum {}", m.from)))?;
    if let Some(failure) = mismatch(checksum::row_differences(&now_source, &now_dest)) {
        return Ok(Err(failure));
    }
    let tenants = match Scope::of(m) {
        Scope::Tenants(tenants) => tenants,
        // A range's members: those of the snapshot, less any whose rows all went since,
        // plus any that first wrote since (every such write was captured).
        Scope::Ranges(_) => {
            let touched: std::collections::BTreeSet<String> = ahead
                .changed
                .values()
                .flatten()
                .map(|(tenant, _)| tenant.clone())
                .collect();
            let touched: Vec<String> = touched.into_iter().collect();
            let still = cx
                .io
                .tenants_with_rows(At::Source, &touched)
                .await
                .map_err(on_db(format!("cannot list the tenants on {}", m.from)))?;
            let mut all: std::collections::BTreeSet<String> = ahead
                .members
                .into_iter()
                .filter(|t| touched.binary_search(t).is_err())
                .collect();
            all.extend(still);
            all.into_iter().collect()
        }
    };
    Ok(Ok(Verified {
        tenants,
        sums: checksum::adjust(&ahead.sums, &then, &now_source),
        how: format!(
            "the rows ahead of the fence, then the {} row(s) changed since inside it",
            transfer::key_count(&ahead.changed)
        ),
    }))
}

/// Inside the fence: one checksum per table over every row, on both shards.
async fn compare_all<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &MoveRecord,
    scope: &Scope,
) -> Result<Result<Verified, MoveError>, MoveError> {
    // Fenced: the members cannot change any more (a range's new tenants included).
    let tenants = routing::members(scope, cx.io, m, At::Source).await?;
    let found = compare_tables(cx, At::Source, m, &tenants, &Keys::new()).await?;
    Ok(found.map(|sums| Verified {
        tenants,
        sums,
        how: "every row, inside the fence".to_owned(),
    }))
}

/// Fingerprints `tenants` per table at `source` (the source, or its snapshot) and on the
/// destination at once, leaving out the rows `except` names; the source's fingerprints,
/// or the verification failure naming every table that differs.
async fn compare_tables<Io: MoveIo>(
    cx: &StepContext<'_, Io>,
    source: At,
    m: &MoveRecord,
    tenants: &[String],
    except: &Keys,
) -> Result<Result<Vec<TableSum>, MoveError>, MoveError> {
    let (at_source, at_dest) = tokio::join!(
        cx.io.sums_except(source, tenants, except),
        cx.io.sums_except(At::Dest, tenants, except)
    );
    let at_source = at_source.map_err(on_db(format!("cannot checksum {}", m.from)))?;
    let at_dest = at_dest.map_err(on_db(format!("cannot checksum {}", m.to)))?;
    Ok(
        match mismatch(checksum::differences(&at_source, &at_dest)) {
            Some(failure) => Err(failure),
            None => Ok(at_source),
        },
    )
}

/// The verification failure for `differences`, if there are any.
fn mismatch(differences: Vec<String>) -> Option<MoveError> {
    (!differences.is_empty()).then(|| MoveError::VerificationFailed {
        differences: differences.join("; "),
    })
}

/// A mismatch: the copy is undone, the move aborted, the source authoritative as before.
async fn abort<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
    failure: MoveError,
) -> Result<(), MoveError> {
    undo_copy(cx, m).await?;
    let why = failure.to_string();
    cx.advance(
        m,
        MoveState::Aborted,
        &[Set::Error(Some(&why)), Set::Now("finished_at")],
    )
    .await?;
    Err(failure)
}

/// Lifts the fence if it has been up longer than `--max-fence` (`during` says what it was
/// waiting for): the source takes the tenants' writes again and keeps capturing them, and
/// the move is back at "copied", to be resumed.
pub async fn within_fence_cap<Io: MoveIo>(
    cx: &mut StepContext<'_, Io>,
    m: &mut MoveRecord,
    scope: &Scope,
    during: &'static str,
) -> Result<(), MoveError> {
    let Some(since) = *cx.fenced_since else {
        return Ok(());
    };
    let took = since.elapsed();
    if took <= cx.fence.max {
        return Ok(());
    }
    cx.io
        .guard(Side::Source, scope, m.id, GuardState::Capturing, &m.to)
        .await
        .map_err(on_db(format!("cannot lift the fence on {}", m.from)))?;
    *cx.fenced_since = None;
    let failure = MoveError::FenceTooLong {
        move_id: m.id,
        max_ms: cx.fence.max.as_millis(),
        took_ms: took.as_millis(),
        during,
    };
    let why = failure.to_string();
    cx.advance(
        m,
        MoveState::Copied,
        &[Set::Null("fenced_at"), Set::Error(Some(&why))],
    )
    .await?;
    Err(failure)
}
