//! Every step in every state, and each way a move refuses or stops on its own.

use std::time::{Duration, Instant};

use super::*;

#[tokio::test]
async fn every_step_in_every_state_runs_says_done_or_refuses_as_the_state_machine_says() {
    for kind in KINDS {
        for state in MoveState::ALL {
            for step in Step::ALL {
                let mut case = case_in(kind, state).await;
                let before = case.world.borrow().clone();
                let result = case.step(step).await;
                let what = format!("{kind:?} move, {state} then {step:?}");
                match state.check(step) {
                    StepCheck::Run => {
                        result.unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(case.m.state, target(step), "{what}");
                        case.assert_nothing_lost();
                    }
                    StepCheck::AlreadyDone => {
                        result.unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(case.m.state, state, "{what}");
                    }
                    StepCheck::OutOfOrder => {
                        assert!(
                            matches!(result, Err(MoveError::OutOfOrder { .. })),
                            "{what}: {result:?}"
                        );
                        assert_eq!(case.m.state, state, "{what}");
                    }
                }
                if state.check(step) != StepCheck::Run {
                    // Refused or already done: nothing was touched, not even read.
                    let after = case.world.borrow();
                    assert_eq!(after.shards.len(), before.shards.len());
                    for (name, shard) in &after.shards {
                        assert_eq!(shard.rows, before.shards[name].rows, "{what}");
                    }
                    assert_eq!(after.records[&7].state, state, "{what}");
                }
            }
        }
    }
}

#[tokio::test]
async fn a_copy_that_differs_from_the_source_fails_verification_and_the_source_keeps_everything() {
    for kind in KINDS {
        let mut case = case_in(kind, MoveState::Copied).await;
        {
            let mut w = case.world.borrow_mut();
            let row = w.shard("shard1").rows.keys().next().unwrap().clone();
            *w.shard_mut("shard1").rows.get_mut(&row).unwrap() += 1;
        }
        let result = case.step(Step::Verify).await;
        assert!(
            matches!(result, Err(MoveError::VerificationFailed { .. })),
            "{result:?}"
        );
        case.assert_aborted();
    }
}

#[tokio::test]
async fn a_fence_longer_than_allowed_is_lifted_and_the_move_goes_back_to_copied() {
    for kind in KINDS {
        let mut case = case_in(kind, MoveState::Fenced).await;
        // This process has held the fence for an hour by its clock.
        let an_hour_ago = Instant::now() - Duration::from_secs(3600);
        let io = case.io();
        let (result, _) = case
            .run(
                io,
                FenceOptions::default(),
                Some(an_hour_ago),
                async |cx, m| driver::step(cx, m, Step::Verify, Duration::ZERO).await,
            )
            .await;
        assert!(
            matches!(result, Err(MoveError::FenceTooLong { .. })),
            "{result:?}"
        );
        case.reload();
        assert_eq!(case.m.state, MoveState::Copied);
        assert!(case.m.last_error.is_some());
        // The source takes the movers' writes again.
        let t = case.movers[0].clone();
        let row = ("bookmarks".to_owned(), t, "new".to_owned());
        case.world.borrow_mut().write(&row, Some(1)).unwrap();
        case.drive(case.io()).await.0.unwrap();
        case.assert_moved();
    }
}

#[tokio::test]
async fn delete_refuses_when_routing_changed_after_the_repin_and_keeps_the_source_rows() {
    for kind in KINDS {
        let mut case = case_in(kind, MoveState::Repinned).await;
        {
            let mut w = case.world.borrow_mut();
            let t = case.movers[0].clone();
            match kind {
                Kind::Tenants => drop(w.directory.insert(t, "shard0".to_owned())),
                Kind::Range => drop(w.slot_map.insert(slot_of(&t), "shard0".to_owned())),
            }
        }
        let result = case.step(Step::Delete).await;
        match kind {
            Kind::Tenants => assert!(matches!(result, Err(MoveError::Rerouted { .. }))),
            Kind::Range => assert!(matches!(result, Err(MoveError::RangeRerouted { .. }))),
        }
        assert_eq!(case.m.state, MoveState::Repinned);
        let w = case.world.borrow();
        for t in &case.movers {
            assert!(
                !w.shard("shard0").rows_of(t).is_empty(),
                "{t} kept on shard0"
            );
        }
    }
}

#[tokio::test]
async fn abort_is_refused_once_done_and_once_the_destination_took_writes() {
    for kind in KINDS {
        let mut done = case_in(kind, MoveState::Done).await;
        assert!(matches!(
            done.abort().await,
            Err(MoveError::AbortAfterDone { .. })
        ));
        done.assert_moved();

        let mut case = case_in(kind, MoveState::Repinned).await;
        case.world.borrow_mut().writers.clear();
        let t = case.movers[0].clone();
        let row = ("tags".to_owned(), t, "after-repin".to_owned());
        case.world.borrow_mut().write(&row, Some(5)).unwrap();
        let result = case.abort().await;
        assert!(
            matches!(result, Err(MoveError::AbortAfterWrites { .. })),
            "{result:?}"
        );
        case.reload();
        assert_eq!(case.m.state, MoveState::Repinned);
        case.assert_nothing_lost();
        // And an abort with no write since the re-pin puts everything back.
        let quiet = Case::new(kind);
        quiet.world.borrow_mut().writers.clear();
        let mut quiet = bring(quiet, MoveState::Repinned).await;
        quiet.abort().await.unwrap();
        quiet.assert_aborted();
    }
}
