//! Operator moves: `MovePipeline` marks, the owner's `ReleasePipeline` gives up, the next
//! `AssignOwner` places and clears the mark.

use super::*;
use crate::command::SpecJson;

/// A state with pipeline `p` owned by node 1 at epoch 1, and nodes 1, 2 and 3 known (each
/// renewed a lease).
fn owned_by_1() -> ClusterState {
    let mut state = ClusterState::new();
    for node in [1, 2, 3] {
        state.apply(Command::RenewLease { node });
    }
    state.apply(Command::CreatePipeline {
        name: "p".into(),
        spec: SpecJson::new(serde_json::json!({})),
        incarnation: None,
    });
    let assigned = state.apply(Command::AssignOwner {
        pipeline: "p".into(),
        node: 1,
        epoch: 1,
    });
    assert_eq!(assigned, Response::Applied);
    state
}

fn move_to(state: &mut ClusterState, to: NodeId) -> Response {
    state.apply(Command::MovePipeline {
        pipeline: "p".into(),
        to,
    })
}

fn release(state: &mut ClusterState, node: NodeId, epoch: Epoch) -> Response {
    state.apply(Command::ReleasePipeline {
        pipeline: "p".into(),
        node,
        epoch,
    })
}

#[test]
fn a_move_marks_the_pipeline_and_keeps_its_owner() {
    let mut state = owned_by_1();
    assert_eq!(
        move_to(&mut state, 2),
        Response::Moving {
            owner: Some(1),
            move_to: Some(2),
            epoch: 1
        }
    );
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.move_to(), Some(2));
    assert_eq!(record.ownership(), Some(Ownership { node: 1, epoch: 1 }));
    // the owner's writes still apply until it releases
    let report = state.apply(Command::ReportStatus {
        pipeline: "p".into(),
        epoch: 1,
        state: RunnerState::Stopped,
        reason: None,
        detail: None,
    });
    assert_eq!(report, Response::Applied);
}

#[test]
fn a_move_is_refused_for_an_unknown_pipeline_or_node() {
    let mut state = owned_by_1();
    let before = state.clone();
    assert_eq!(
        state.apply(Command::MovePipeline {
            pipeline: "nope".into(),
            to: 2
        }),
        Response::UnknownPipeline
    );
    assert_eq!(move_to(&mut state, 9), Response::UnknownNode { node: 9 });
    assert_eq!(Response::UnknownNode { node: 9 }.code(), "member_not_live");
    assert_eq!(state, before);
}

#[test]
fn a_move_to_the_owner_cancels_and_a_second_move_redirects() {
    let mut state = owned_by_1();
    move_to(&mut state, 2);
    assert_eq!(
        move_to(&mut state, 3),
        Response::Moving {
            owner: Some(1),
            move_to: Some(3),
            epoch: 1
        }
    );
    assert_eq!(state.pipeline("p").unwrap().move_to(), Some(3));
    assert_eq!(
        move_to(&mut state, 1),
        Response::Moving {
            owner: Some(1),
            move_to: None,
            epoch: 1
        }
    );
    assert_eq!(state.pipeline("p").unwrap().move_to(), None);
    // cancelled: the owner's release is refused and it keeps the pipeline
    assert_eq!(release(&mut state, 1, 1), Response::NoMovePending);
    assert_eq!(state.ownership("p"), Some(Ownership { node: 1, epoch: 1 }));
}

#[test]
fn the_release_unowns_and_fences_the_old_owner_then_the_assignment_clears_the_move() {
    let mut state = owned_by_1();
    move_to(&mut state, 2);
    assert_eq!(release(&mut state, 1, 1), Response::Applied);
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.owner(), None);
    assert_eq!(record.epoch(), 1);
    assert_eq!(record.move_to(), Some(2));
    // every later write of the old owner is fenced, a repeated release too
    let late = state.apply(Command::CommitCheckpoint {
        pipeline: "p".into(),
        epoch: 1,
        position: capstan_core::position::Position::parse(
            capstan_core::position::Flavor::Mysql,
            "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",
        )
        .unwrap(),
        processed: None,
    });
    assert_eq!(late, Response::Unowned);
    assert_eq!(release(&mut state, 1, 1), Response::Unowned);
    // the scheduler's assignment places it and clears the mark
    let assigned = state.apply(Command::AssignOwner {
        pipeline: "p".into(),
        node: 2,
        epoch: 2,
    });
    assert_eq!(assigned, Response::Applied);
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.ownership(), Some(Ownership { node: 2, epoch: 2 }));
    assert_eq!(record.move_to(), None);
    assert_eq!(state.max_epoch(), 2);
}

#[test]
fn only_the_current_owner_at_its_epoch_releases() {
    let mut state = owned_by_1();
    move_to(&mut state, 3);
    let before = state.clone();
    assert_eq!(
        release(&mut state, 1, 0),
        Response::StaleEpoch { current: 1 }
    );
    assert_eq!(
        release(&mut state, 2, 1),
        Response::StaleEpoch { current: 1 }
    );
    assert_eq!(
        state.apply(Command::ReleasePipeline {
            pipeline: "nope".into(),
            node: 1,
            epoch: 1
        }),
        Response::UnknownPipeline
    );
    assert_eq!(state, before);
}

#[test]
fn an_unowned_pipeline_keeps_the_move_until_it_is_placed() {
    let mut state = owned_by_1();
    state.apply(Command::CreatePipeline {
        name: "q".into(),
        spec: SpecJson::new(serde_json::json!({})),
        incarnation: None,
    });
    let moved = state.apply(Command::MovePipeline {
        pipeline: "q".into(),
        to: 3,
    });
    assert_eq!(
        moved,
        Response::Moving {
            owner: None,
            move_to: Some(3),
            // a new pipeline starts at the highest epoch used (p's)
            epoch: 1
        }
    );
    assert_eq!(state.pipeline("q").unwrap().move_to(), Some(3));
}

#[test]
fn a_record_without_a_move_reads_and_writes_as_before() {
    let state = owned_by_1();
    let json = serde_json::to_value(state.pipeline("p").unwrap()).unwrap();
    assert!(json.get("move_to").is_none(), "{json}");
    let mut moving = state.clone();
    move_to(&mut moving, 2);
    let json = serde_json::to_value(moving.pipeline("p").unwrap()).unwrap();
    assert_eq!(json["move_to"], 2);
    let back: PipelineRecord = serde_json::from_value(json).unwrap();
    assert_eq!(back.move_to(), Some(2));
}
