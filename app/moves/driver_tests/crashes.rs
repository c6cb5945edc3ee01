//! A move killed before any I/O call, or at a pause point, then resumed or aborted.

use super::*;

#[tokio::test]
async fn a_move_killed_before_any_io_call_resumes_to_the_end_losing_no_acknowledged_write() {
    for kind in KINDS {
        let mut whole = Case::new(kind);
        let (result, calls) = whole.drive(whole.io()).await;
        result.unwrap();
        whole.assert_moved();
        for crash in 0..calls {
            let mut case = Case::new(kind);
            let (result, _) = case.drive(case.io().crashing_before(crash)).await;
            assert!(result.is_err(), "{kind:?}: crashed before call {crash}");
            case.assert_nothing_lost();
            case.reload();
            let (result, _) = case.drive(case.io()).await;
            result.unwrap_or_else(|e| panic!("{kind:?}, crashed before call {crash}: {e}"));
            case.assert_moved();
            // One reindex job per moved tenant, however often the re-pin was begun.
            let jobs: Vec<String> = case.world.borrow().jobs.iter().cloned().collect();
            let expected: Vec<String> = case
                .movers
                .iter()
                .map(|t| format!("move-7-reindex-{t}"))
                .collect();
            assert_eq!(jobs, expected, "{kind:?}, crashed before call {crash}");
        }
    }
}

#[tokio::test]
async fn a_move_killed_before_any_io_call_aborts_to_as_before_unless_the_destination_took_writes() {
    for (kind, writing) in KINDS.into_iter().flat_map(|k| [(k, true), (k, false)]) {
        let quiet = |case: Case| {
            if !writing {
                case.world.borrow_mut().writers.clear();
            }
            case
        };
        let mut whole = quiet(Case::new(kind));
        let (_, calls) = whole.drive(whole.io()).await;
        let mut seen = std::collections::BTreeSet::new();
        for crash in 0..calls {
            let mut case = quiet(Case::new(kind));
            let (result, _) = case.drive(case.io().crashing_before(crash)).await;
            assert!(result.is_err());
            case.reload();
            let state = case.m.state;
            let outcome = case.abort().await;
            seen.insert(match &outcome {
                Ok(()) => "aborted",
                Err(MoveError::AbortAfterWrites { .. }) => "after writes",
                Err(MoveError::AbortDuringDelete { .. }) => "during delete",
                Err(_) => "other",
            });
            match outcome {
                Ok(()) => case.assert_aborted(),
                // After the re-pin the client wrote on the destination: undoing would
                // lose those writes, so the move stays re-pinned and nothing is lost.
                // A re-pin killed halfway counts: its record still says "verified".
                Err(MoveError::AbortAfterWrites { .. }) => {
                    assert!(
                        matches!(state, MoveState::Verified | MoveState::Repinned),
                        "{kind:?}, call {crash}: {state}"
                    );
                    case.reload();
                    assert_eq!(case.m.state, state);
                    case.assert_nothing_lost();
                    // Resuming finishes the move instead.
                    case.drive(case.io()).await.0.unwrap();
                    case.assert_moved();
                }
                Err(MoveError::AbortAfterDone { .. }) => {
                    assert_eq!(state, MoveState::Done, "{kind:?}, call {crash}");
                    case.assert_moved();
                }
                // Killed inside the delete step: the source rows are partly gone, and
                // `delete` (not an abort) finishes the move.
                Err(MoveError::AbortDuringDelete { .. }) => {
                    assert_eq!(state, MoveState::Repinned, "{kind:?}, call {crash}");
                    case.assert_nothing_lost();
                    case.step(Step::Delete).await.unwrap();
                    case.assert_moved();
                }
                Err(e) => panic!("{kind:?}, crashed before call {crash} in {state}: {e}"),
            }
        }
        // Every outcome was reached: a crash before the re-pin aborts; after it, writes
        // on the destination refuse the abort, and without them a delete begun does.
        let expected = match writing {
            true => ["aborted", "after writes"],
            false => ["aborted", "during delete"],
        };
        for outcome in expected {
            assert!(
                seen.contains(outcome),
                "{kind:?}: no crash led to {outcome}"
            );
        }
    }
}

#[tokio::test]
async fn a_move_killed_at_each_pause_point_resumes_or_aborts_cleanly() {
    let points = [
        PausePoint::DuringCopy,
        PausePoint::AfterFence,
        PausePoint::AfterRepin,
    ];
    for kind in KINDS {
        for point in points {
            for resume in [true, false] {
                let mut case = Case::new(kind);
                case.world.borrow_mut().writers.clear();
                let (result, _) = case.drive(case.io().crashing_at(point)).await;
                assert!(result.is_err(), "{kind:?} at {point:?}");
                case.reload();
                if resume {
                    case.drive(case.io()).await.0.unwrap();
                    case.assert_moved();
                } else {
                    case.abort().await.unwrap();
                    case.assert_aborted();
                }
            }
        }
    }
}
