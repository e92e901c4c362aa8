use capstan_core::position::{Flavor, Position};

use super::*;
use crate::command::{DesiredState, KeyBytes, RunnerState, SpecJson};

fn gtids(text: &str) -> Position {
    Position::parse(Flavor::Mysql, text).unwrap()
}

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn create(state: &mut ClusterState, name: &str) {
    let spec = SpecJson::new(serde_json::json!({"source": "db"}));
    let response = state.apply(Command::CreatePipeline {
        name: name.into(),
        spec,
        incarnation: None,
    });
    assert_eq!(response, Response::Applied);
}

fn assign(state: &mut ClusterState, name: &str, node: u64, epoch: Epoch) -> Response {
    state.apply(Command::AssignOwner {
        pipeline: name.into(),
        node,
        epoch,
    })
}

fn checkpoint(state: &mut ClusterState, name: &str, epoch: Epoch, text: &str) -> Response {
    state.apply(Command::CommitCheckpoint {
        pipeline: name.into(),
        epoch,
        position: gtids(text),
        processed: None,
    })
}

#[test]
fn create_update_delete() {
    let mut state = ClusterState::new();
    create(&mut state, "orders");
    let duplicate = state.apply(Command::CreatePipeline {
        name: "orders".into(),
        spec: SpecJson::default(),
        incarnation: None,
    });
    assert_eq!(duplicate, Response::PipelineExists);

    let record = state.pipeline("orders").unwrap();
    assert_eq!(record.desired_state(), DesiredState::Stopped);
    assert_eq!(record.generation(), 1);
    assert_eq!(record.ownership(), None);

    let spec = SpecJson::new(serde_json::json!({"source": "other"}));
    let updated = state.apply(Command::UpdatePipelineConfig {
        name: "orders".into(),
        spec: spec.clone(),
    });
    assert_eq!(updated, Response::Applied);
    assert_eq!(state.pipeline("orders").unwrap().generation(), 2);
    assert_eq!(state.pipeline("orders").unwrap().spec(), &spec);

    let deleted = state.apply(Command::DeletePipeline {
        name: "orders".into(),
    });
    assert_eq!(deleted, Response::Applied);
    assert!(state.pipelines().is_empty());
}

#[test]
fn unknown_pipeline_is_distinct() {
    let mut state = ClusterState::new();
    let commands = [
        Command::UpdatePipelineConfig {
            name: "x".into(),
            spec: SpecJson::default(),
        },
        Command::DeletePipeline { name: "x".into() },
        Command::SetDesiredState {
            name: "x".into(),
            state: DesiredState::Running,
        },
        Command::AssignOwner {
            pipeline: "x".into(),
            node: 1,
            epoch: 1,
        },
        Command::CommitCheckpoint {
            pipeline: "x".into(),
            epoch: 1,
            position: gtids(""),
            processed: None,
        },
        Command::ReportStatus {
            pipeline: "x".into(),
            epoch: 1,
            state: RunnerState::Streaming,
            reason: None,
            detail: None,
        },
        Command::ResetOffsets {
            pipeline: "x".into(),
            incarnation: None,
        },
    ];
    for command in commands {
        assert_eq!(state.apply(command), Response::UnknownPipeline);
    }
    assert_eq!(state, ClusterState::new());
}

#[test]
fn assign_owner_needs_a_greater_epoch() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assert_eq!(state.next_epoch("p"), Some(1));
    assert_eq!(assign(&mut state, "p", 1, 1), Response::Applied);
    assert_eq!(
        assign(&mut state, "p", 2, 1),
        Response::EpochNotIncreasing { current: 1 }
    );
    assert_eq!(
        assign(&mut state, "p", 2, 0),
        Response::EpochNotIncreasing { current: 1 }
    );
    assert_eq!(assign(&mut state, "p", 2, 5), Response::Applied);
    let owner = state.ownership("p").unwrap();
    assert_eq!((owner.node, owner.epoch), (2, 5));
    assert_eq!(state.max_epoch(), 5);
}

#[test]
fn stale_owner_is_fenced() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    assert_eq!(
        checkpoint(&mut state, "p", 1, &format!("{UUID}:1-5")),
        Response::Applied
    );
    assign(&mut state, "p", 2, 2);

    let before = state.clone();
    assert_eq!(
        checkpoint(&mut state, "p", 1, &format!("{UUID}:1-9")),
        Response::StaleEpoch { current: 2 }
    );
    let status = state.apply(Command::ReportStatus {
        pipeline: "p".into(),
        epoch: 1,
        state: RunnerState::Streaming,
        reason: None,
        detail: None,
    });
    assert_eq!(status, Response::StaleEpoch { current: 2 });
    assert!(status.is_fenced());
    let future = checkpoint(&mut state, "p", 3, &format!("{UUID}:1-9"));
    assert_eq!(future, Response::StaleEpoch { current: 2 });
    assert_eq!(state, before);

    assert_eq!(
        checkpoint(&mut state, "p", 2, &format!("{UUID}:1-9")),
        Response::Applied
    );
    assert_eq!(
        state.pipeline("p").unwrap().checkpoint(),
        Some(&gtids(&format!("{UUID}:1-9")))
    );
}

#[test]
fn writes_to_an_unowned_pipeline_are_refused() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assert_eq!(
        checkpoint(&mut state, "p", 0, &format!("{UUID}:1")),
        Response::Unowned
    );
    assert!(Response::Unowned.is_fenced());
}

#[test]
fn checkpoint_must_not_regress() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    checkpoint(&mut state, "p", 1, &format!("{UUID}:1-10"));
    assert_eq!(
        checkpoint(&mut state, "p", 1, &format!("{UUID}:1-4")),
        Response::CheckpointRegressed
    );
    let mariadb = state.apply(Command::CommitCheckpoint {
        pipeline: "p".into(),
        epoch: 1,
        position: Position::parse(Flavor::Mariadb, "0-1-100").unwrap(),
        processed: None,
    });
    assert_eq!(mariadb, Response::CheckpointRegressed);
    // a retry of the same checkpoint is fine
    assert_eq!(
        checkpoint(&mut state, "p", 1, &format!("{UUID}:1-10")),
        Response::Applied
    );
}

#[test]
fn snapshot_progress_and_completion() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    let progress = |status, cursor: u8| Command::CommitSnapshotProgress {
        pipeline: "p".into(),
        epoch: 1,
        table: "shop.orders".into(),
        pk_cursor: Some(KeyBytes::new(vec![cursor])),
        delivered_pk: Some(KeyBytes::new(vec![cursor])),
        status,
        rows_done: u64::from(cursor),
        rows_estimated: 10,
    };
    assert_eq!(
        state.apply(progress(SnapshotTableStatus::InProgress, 1)),
        Response::Applied
    );
    assert_eq!(
        state.apply(progress(SnapshotTableStatus::Complete, 2)),
        Response::Applied
    );
    assert_eq!(
        state.apply(progress(SnapshotTableStatus::Complete, 2)),
        Response::Applied
    );
    assert_eq!(
        state.apply(progress(SnapshotTableStatus::InProgress, 3)),
        Response::TableAlreadyComplete
    );
    let table = state
        .pipeline("p")
        .unwrap()
        .table_progress("shop.orders")
        .unwrap();
    assert_eq!(table.status, SnapshotTableStatus::Complete);
    assert_eq!(table.pk_cursor, Some(KeyBytes::new(vec![2])));
}

#[test]
fn begin_snapshot_seeds_the_floor_and_pending_tables_fenced_by_epoch() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    let p0 = Position::parse(Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5").unwrap();
    let begin = |epoch| Command::BeginSnapshot {
        pipeline: "p".into(),
        epoch,
        position: p0.clone(),
        tables: vec![("shop.a".into(), 7), ("shop.b".into(), 0)],
    };
    assert!(state.apply(begin(0)).is_fenced());
    assert_eq!(state.apply(begin(1)), Response::Applied);
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.checkpoint(), Some(&p0));
    let a = record.table_progress("shop.a").unwrap();
    assert_eq!(
        (a.status, a.rows_estimated, a.rows_done),
        (SnapshotTableStatus::Pending, 7, 0)
    );
    assert_eq!(record.snapshot_progress().len(), 2);
    // a re-snapshot may move the floor back and replaces the table set
    let later = Position::parse(Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9").unwrap();
    let commit = Command::CommitCheckpoint {
        pipeline: "p".into(),
        epoch: 1,
        position: later,
        processed: None,
    };
    assert_eq!(state.apply(commit), Response::Applied);
    assert_eq!(state.apply(begin(1)), Response::Applied);
    assert_eq!(state.pipeline("p").unwrap().checkpoint(), Some(&p0));
}

#[test]
fn revise_snapshot_tables_adds_pending_and_forgets_keeping_the_checkpoint_fenced_by_epoch() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    let p0 = gtids(&format!("{UUID}:1-5"));
    let begin = Command::BeginSnapshot {
        pipeline: "p".into(),
        epoch: 1,
        position: p0,
        tables: vec![("shop.a".into(), 7), ("shop.b".into(), 3)],
    };
    assert_eq!(state.apply(begin), Response::Applied);
    let done = Command::CommitSnapshotProgress {
        pipeline: "p".into(),
        epoch: 1,
        table: "shop.a".into(),
        pk_cursor: Some(KeyBytes::new(vec![9])),
        delivered_pk: Some(KeyBytes::new(vec![9])),
        status: SnapshotTableStatus::Complete,
        rows_done: 7,
        rows_estimated: 7,
    };
    assert_eq!(state.apply(done.clone()), Response::Applied);
    assert_eq!(
        checkpoint(&mut state, "p", 1, &format!("{UUID}:1-20")),
        Response::Applied
    );
    let revise = |epoch| Command::ReviseSnapshotTables {
        pipeline: "p".into(),
        epoch,
        snapshot: vec![("shop.c".into(), 40)],
        forget: vec!["shop.b".into()],
    };
    assert!(state.apply(revise(0)).is_fenced());
    assert_eq!(state.pipeline("p").unwrap().snapshot_progress().len(), 2);
    assert_eq!(state.apply(revise(1)), Response::Applied);
    let record = state.pipeline("p").unwrap();
    // the stream goes on from where it was: the new table is woven in from the checkpoint
    assert_eq!(record.checkpoint(), Some(&gtids(&format!("{UUID}:1-20"))));
    let names: Vec<&str> = record
        .snapshot_progress()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["shop.a", "shop.c"]);
    let a = record.table_progress("shop.a").unwrap();
    assert_eq!((a.status, a.rows_done), (SnapshotTableStatus::Complete, 7));
    let c = record.table_progress("shop.c").unwrap();
    assert_eq!(
        (
            c.status,
            c.rows_estimated,
            c.pk_cursor.clone(),
            c.delivered_pk.clone()
        ),
        (SnapshotTableStatus::Pending, 40, None, None)
    );
    // a complete table named again is snapshotted again from its first key
    let again = Command::ReviseSnapshotTables {
        pipeline: "p".into(),
        epoch: 1,
        snapshot: vec![("shop.a".into(), 8)],
        forget: vec![],
    };
    assert_eq!(state.apply(again), Response::Applied);
    let a = state
        .pipeline("p")
        .unwrap()
        .table_progress("shop.a")
        .unwrap();
    assert_eq!(
        (a.status, a.rows_done, a.pk_cursor.clone()),
        (SnapshotTableStatus::Pending, 0, None)
    );
    // and its old completion no longer stands in the way of new progress
    assert_eq!(state.apply(done), Response::Applied);
}

#[test]
fn report_status_records_the_owner() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 7, 3);
    let response = state.apply(Command::ReportStatus {
        pipeline: "p".into(),
        epoch: 3,
        state: RunnerState::Failed,
        reason: Some("source unreachable".into()),
        detail: None,
    });
    assert_eq!(response, Response::Applied);
    let status = state.pipeline("p").unwrap().status().unwrap();
    assert_eq!((status.node, status.epoch), (7, 3));
    assert_eq!(status.state, RunnerState::Failed);
}

#[test]
fn a_halt_survives_moves_until_restart_config_update_or_reset() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    let fail = |epoch| Command::ReportStatus {
        pipeline: "p".into(),
        epoch,
        state: RunnerState::Failed,
        reason: Some("authentication_failed".into()),
        detail: Some("source: authentication failed".into()),
    };
    assert_eq!(state.apply(fail(1)), Response::Applied);
    // a move: the epoch changes, the halt stays
    assign(&mut state, "p", 2, 2);
    let halt = state.pipeline("p").unwrap().halt().unwrap();
    assert_eq!(
        (halt.epoch, halt.reason.as_deref(), halt.detail.as_deref()),
        (
            1,
            Some("authentication_failed"),
            Some("source: authentication failed")
        )
    );
    // a later non-failed report does not clear it; a restart does
    let streaming = Command::ReportStatus {
        pipeline: "p".into(),
        epoch: 2,
        state: RunnerState::Paused,
        reason: None,
        detail: None,
    };
    assert_eq!(state.apply(streaming), Response::Applied);
    assert!(state.pipeline("p").unwrap().halt().is_some());
    state.apply(Command::RestartPipeline { name: "p".into() });
    assert!(state.pipeline("p").unwrap().halt().is_none());
    // a config update clears it
    assert_eq!(state.apply(fail(3)), Response::Applied);
    state.apply(Command::UpdatePipelineConfig {
        name: "p".into(),
        spec: SpecJson::new(serde_json::json!({"source": "db2"})),
    });
    assert!(state.pipeline("p").unwrap().halt().is_none());
    // and so does an offsets reset
    assert_eq!(state.apply(fail(3)), Response::Applied);
    state.apply(Command::SetDesiredState {
        name: "p".into(),
        state: DesiredState::Stopped,
    });
    state.apply(Command::ResetOffsets {
        pipeline: "p".into(),
        incarnation: None,
    });
    assert!(state.pipeline("p").unwrap().halt().is_none());
}

#[test]
fn reset_offsets_only_when_stopped_and_revokes_the_owner() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    state.apply(Command::SetDesiredState {
        name: "p".into(),
        state: DesiredState::Running,
    });
    assign(&mut state, "p", 1, 1);
    checkpoint(&mut state, "p", 1, &format!("{UUID}:1-10"));

    let reset = Command::ResetOffsets {
        pipeline: "p".into(),
        incarnation: None,
    };
    assert_eq!(
        state.apply(reset.clone()),
        Response::NotStopped {
            desired: DesiredState::Running
        }
    );
    state.apply(Command::SetDesiredState {
        name: "p".into(),
        state: DesiredState::Stopped,
    });
    assert_eq!(state.apply(reset), Response::Applied);
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.checkpoint(), None);
    assert_eq!(record.ownership(), None);
    assert_eq!(record.epoch(), 2);
    // the old owner's straggling write is fenced
    assert_eq!(
        checkpoint(&mut state, "p", 1, &format!("{UUID}:1-11")),
        Response::StaleEpoch { current: 2 }
    );
    assert_eq!(assign(&mut state, "p", 1, 3), Response::Applied);
}

#[test]
fn a_recreated_pipeline_fences_owners_of_the_deleted_one() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 4);
    state.apply(Command::DeletePipeline { name: "p".into() });
    create(&mut state, "p");
    assert_eq!(state.pipeline("p").unwrap().epoch(), 4);
    // the zombie owner (epoch 4) of the deleted pipeline cannot write
    assert_eq!(
        checkpoint(&mut state, "p", 4, &format!("{UUID}:1")),
        Response::Unowned
    );
    assert_eq!(
        assign(&mut state, "p", 2, 4),
        Response::EpochNotIncreasing { current: 4 }
    );
    assert_eq!(assign(&mut state, "p", 2, 5), Response::Applied);
    assert_eq!(
        checkpoint(&mut state, "p", 4, &format!("{UUID}:1")),
        Response::StaleEpoch { current: 5 }
    );
}

#[test]
fn serde_round_trip() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    checkpoint(&mut state, "p", 1, &format!("{UUID}:1-10"));
    let json = serde_json::to_vec(&state).unwrap();
    let back: ClusterState = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, state);
}

#[test]
fn lease_renewals_count_and_release_until_renewed() {
    let mut s = ClusterState::new();
    assert_eq!(s.apply(Command::RenewLease { node: 1 }), Response::Applied);
    s.apply(Command::RenewLease { node: 1 });
    s.apply(Command::RenewLease { node: 2 });
    assert_eq!(s.lease_renewals().get(&1), Some(&2));
    s.apply(Command::ReleaseLease { node: 2 });
    assert!(s.released_nodes().contains(&2));
    s.apply(Command::RenewLease { node: 2 });
    assert!(s.released_nodes().is_empty());
}

fn maria(text: &str) -> Position {
    Position::parse(Flavor::Mariadb, text).unwrap()
}

fn commit_pair(state: &mut ClusterState, position: &str, processed: Option<&str>) -> Response {
    state.apply(Command::CommitCheckpoint {
        pipeline: "p".into(),
        epoch: 1,
        position: maria(position),
        processed: processed.map(maria),
    })
}

#[test]
fn a_held_back_checkpoint_is_recorded_with_its_processed_position() {
    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    // no processed: the same as the checkpoint
    assert_eq!(commit_pair(&mut state, "0-1-19", None), Response::Applied);
    assert_eq!(
        state.pipeline("p").unwrap().processed(),
        Some(&maria("0-1-19"))
    );
    // held at 19 while 26 is delivered
    assert_eq!(
        commit_pair(&mut state, "0-1-19", Some("0-1-26")),
        Response::Applied
    );
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.checkpoint(), Some(&maria("0-1-19")));
    assert_eq!(record.processed(), Some(&maria("0-1-26")));
    let before = state.clone();
    // processed behind its own checkpoint
    assert_eq!(
        commit_pair(&mut state, "0-1-30", Some("0-1-29")),
        Response::ProcessedBehindCheckpoint
    );
    // processed going back (the checkpoint alone, or a smaller processed) is a regression
    assert_eq!(
        commit_pair(&mut state, "0-1-19", None),
        Response::CheckpointRegressed
    );
    assert_eq!(
        commit_pair(&mut state, "0-1-19", Some("0-1-24")),
        Response::CheckpointRegressed
    );
    assert_eq!(state, before);
    // a retry is fine; the resolution moves both, and an equal processed is not stored
    assert_eq!(
        commit_pair(&mut state, "0-1-19", Some("0-1-26")),
        Response::Applied
    );
    assert_eq!(
        commit_pair(&mut state, "0-1-30", Some("0-1-30")),
        Response::Applied
    );
    let record = state.pipeline("p").unwrap();
    assert_eq!(record.processed, None);
    assert_eq!(record.processed(), Some(&maria("0-1-30")));
    // a (re-)snapshot and a reset forget it
    assert_eq!(
        commit_pair(&mut state, "0-1-30", Some("0-1-35")),
        Response::Applied
    );
    let begin = Command::BeginSnapshot {
        pipeline: "p".into(),
        epoch: 1,
        position: maria("0-1-31"),
        tables: Vec::new(),
    };
    assert_eq!(state.apply(begin), Response::Applied);
    assert_eq!(
        state.pipeline("p").unwrap().processed(),
        Some(&maria("0-1-31"))
    );
    assert_eq!(
        commit_pair(&mut state, "0-1-31", Some("0-1-35")),
        Response::Applied
    );
    state.apply(Command::SetDesiredState {
        name: "p".into(),
        state: DesiredState::Stopped,
    });
    let reset = Command::ResetOffsets {
        pipeline: "p".into(),
        incarnation: None,
    };
    assert_eq!(state.apply(reset), Response::Applied);
    assert_eq!(state.pipeline("p").unwrap().processed(), None);
}

#[test]
fn state_and_commands_written_before_processed_existed_still_read() {
    // a commit_checkpoint command and a pipeline record as stored before the field
    let old_command = r#"{"command":"commit_checkpoint","pipeline":"p","epoch":1,
        "position":{"flavor":"mariadb","gtids":"0-1-19"}}"#;
    let command: Command = serde_json::from_str(old_command).unwrap();
    assert_eq!(
        command,
        Command::CommitCheckpoint {
            pipeline: "p".into(),
            epoch: 1,
            position: maria("0-1-19"),
            processed: None,
        }
    );
    // and without a processed position it is written as before
    let json = serde_json::to_value(&command).unwrap();
    assert!(json.get("processed").is_none(), "{json}");

    let mut state = ClusterState::new();
    create(&mut state, "p");
    assign(&mut state, "p", 1, 1);
    assert_eq!(state.apply(command), Response::Applied);
    let mut json = serde_json::to_value(&state).unwrap();
    let record = &mut json["pipelines"]["p"];
    assert!(record.get("processed").is_none(), "{record}");
    let old: ClusterState = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(
        old.pipeline("p").unwrap().processed(),
        Some(&maria("0-1-19"))
    );
    // a record with one round-trips
    assert_eq!(
        state.apply(Command::CommitCheckpoint {
            pipeline: "p".into(),
            epoch: 1,
            position: maria("0-1-19"),
            processed: Some(maria("0-1-26")),
        }),
        Response::Applied
    );
    json = serde_json::to_value(&state).unwrap();
    assert_eq!(
        json["pipelines"]["p"]["processed"],
        serde_json::json!({"flavor": "mariadb", "gtids": "0-1-26"})
    );
    assert_eq!(serde_json::from_value::<ClusterState>(json).unwrap(), state);
}

#[test]
fn restart_bumps_the_epoch_on_the_owner_it_finds_when_applied() {
    let mut state = ClusterState::new();
    let restart = |state: &mut ClusterState, name: &str| {
        state.apply(Command::RestartPipeline { name: name.into() })
    };
    assert_eq!(restart(&mut state, "orders"), Response::UnknownPipeline);
    create(&mut state, "orders");
    // nothing runs: nothing changes
    let before = state.clone();
    assert_eq!(
        restart(&mut state, "orders"),
        Response::Restarted {
            owner: None,
            epoch: 0
        }
    );
    assert_eq!(state, before);

    assert_eq!(assign(&mut state, "orders", 2, 4), Response::Applied);
    assert_eq!(
        restart(&mut state, "orders"),
        Response::Restarted {
            owner: Some(2),
            epoch: 5
        }
    );
    let record = state.pipeline("orders").unwrap();
    assert_eq!((record.owner(), record.epoch()), (Some(2), 5));
    assert_eq!(state.max_epoch(), 5);
    // the old incarnation is fenced, the new one writes
    assert_eq!(
        checkpoint(&mut state, "orders", 4, &format!("{UUID}:1-3")),
        Response::StaleEpoch { current: 5 }
    );
    assert_eq!(
        checkpoint(&mut state, "orders", 5, &format!("{UUID}:1-3")),
        Response::Applied
    );
    // an assignment made meanwhile must still exceed the restarted epoch
    assert_eq!(
        assign(&mut state, "orders", 3, 5),
        Response::EpochNotIncreasing { current: 5 }
    );
}

#[test]
fn every_life_of_a_pipeline_has_its_own_incarnation() {
    let mut state = ClusterState::new();
    let created = state.apply(Command::CreatePipeline {
        name: "p".into(),
        spec: SpecJson::default(),
        incarnation: Some("life-1".into()),
    });
    assert_eq!(created, Response::Applied);
    assert_eq!(state.pipeline("p").unwrap().incarnation(), Some("life-1"));
    // a reset starts a new life: Kafka offsets records of the old one are ignored
    let reset = state.apply(Command::ResetOffsets {
        pipeline: "p".into(),
        incarnation: Some("life-2".into()),
    });
    assert_eq!(reset, Response::Applied);
    assert_eq!(state.pipeline("p").unwrap().incarnation(), Some("life-2"));
    // deleted and created again: the proposer's new id
    state.apply(Command::DeletePipeline { name: "p".into() });
    state.apply(Command::CreatePipeline {
        name: "p".into(),
        spec: SpecJson::default(),
        incarnation: Some("life-3".into()),
    });
    assert_eq!(state.pipeline("p").unwrap().incarnation(), Some("life-3"));
    // a command from before the field existed reads without one
    let old: Command =
        serde_json::from_str(r#"{"command":"reset_offsets","pipeline":"p"}"#).unwrap();
    assert_eq!(
        old,
        Command::ResetOffsets {
            pipeline: "p".into(),
            incarnation: None
        }
    );
}
