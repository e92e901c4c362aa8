//! `RequestSnapshot` and `StopSnapshot`: asserted on the responses and the state they leave.

use capstan_core::position::{Flavor, Position};

use super::*;
use crate::command::{KeyBytes, SnapshotKind, SpecJson};

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn gtids(text: &str) -> Position {
    Position::parse(Flavor::Mysql, &format!("{UUID}:{text}")).unwrap()
}

/// A pipeline `p` owned by node 1 at epoch 1, its initial snapshot begun at 1-5 over
/// `shop.a` (complete, 7 rows) and `shop.b` (in progress), the checkpoint at 1-20.
fn streaming() -> ClusterState {
    let mut state = ClusterState::new();
    let create = Command::CreatePipeline {
        name: "p".into(),
        spec: SpecJson::new(serde_json::json!({"source": "db"})),
        incarnation: None,
    };
    assert_eq!(state.apply(create), Response::Applied);
    let assign = Command::AssignOwner {
        pipeline: "p".into(),
        node: 1,
        epoch: 1,
    };
    assert_eq!(state.apply(assign), Response::Applied);
    let begin = Command::BeginSnapshot {
        pipeline: "p".into(),
        epoch: 1,
        position: gtids("1-5"),
        tables: vec![("shop.a".into(), 7), ("shop.b".into(), 3)],
    };
    assert_eq!(state.apply(begin), Response::Applied);
    for (table, status) in [
        ("shop.a", SnapshotTableStatus::Complete),
        ("shop.b", SnapshotTableStatus::InProgress),
    ] {
        assert_eq!(
            state.apply(progress(1, table, status, 9)),
            Response::Applied
        );
    }
    let commit = Command::CommitCheckpoint {
        pipeline: "p".into(),
        epoch: 1,
        position: gtids("1-20"),
        processed: None,
    };
    assert_eq!(state.apply(commit), Response::Applied);
    state
}

fn progress(epoch: u64, table: &str, status: SnapshotTableStatus, cursor: u8) -> Command {
    Command::CommitSnapshotProgress {
        pipeline: "p".into(),
        epoch,
        table: table.into(),
        pk_cursor: Some(KeyBytes::new(vec![cursor])),
        delivered_pk: Some(KeyBytes::new(vec![cursor])),
        status,
        rows_done: u64::from(cursor),
        rows_estimated: 7,
    }
}

fn request(tables: &[(&str, u64)]) -> Command {
    Command::RequestSnapshot {
        pipeline: "p".into(),
        tables: tables.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
    }
}

fn table(state: &ClusterState, name: &str) -> TableProgress {
    state
        .pipeline("p")
        .unwrap()
        .table_progress(name)
        .unwrap()
        .clone()
}

#[test]
fn a_request_marks_the_tables_pending_incremental_and_fences_the_running_incarnation() {
    let mut state = streaming();
    let before = state.clone();
    // what the API asks before it checks the tables on the server, as apply decides
    assert_eq!(
        state.snapshot_request_refusal("p", ["shop.a", "shop.b"]),
        Some(Response::SnapshotRunning {
            table: "shop.b".into()
        })
    );
    assert_eq!(state.snapshot_request_refusal("p", ["shop.a"]), None);
    assert_eq!(
        state.snapshot_request_refusal("q", ["shop.a"]),
        Some(Response::UnknownPipeline)
    );
    // refused as a whole while one of the tables is still being read: nothing changes
    assert_eq!(
        state.apply(request(&[("shop.a", 8), ("shop.b", 3)])),
        Response::SnapshotRunning {
            table: "shop.b".into()
        }
    );
    assert_eq!(state, before);

    assert_eq!(
        state.apply(request(&[("shop.a", 8)])),
        Response::SnapshotRequested {
            owner: Some(1),
            epoch: 2
        }
    );
    let record = state.pipeline("p").unwrap();
    assert_eq!((record.owner(), record.epoch()), (Some(1), 2));
    assert_eq!(state.max_epoch(), 2);
    // the stream goes on from where it was; the table is read again from its first key
    assert_eq!(record.checkpoint(), Some(&gtids("1-20")));
    assert_eq!(
        table(&state, "shop.a"),
        TableProgress {
            rows_estimated: 8,
            kind: SnapshotKind::Incremental,
            ..TableProgress::pending()
        }
    );
    // the other table's initial snapshot is untouched
    assert_eq!(table(&state, "shop.b"), table(&before, "shop.b"));

    // the incarnation that gated by the old progress cannot write any more
    assert!(state
        .apply(progress(1, "shop.b", SnapshotTableStatus::Complete, 9))
        .is_fenced());
    let commit = Command::CommitCheckpoint {
        pipeline: "p".into(),
        epoch: 1,
        position: gtids("1-30"),
        processed: None,
    };
    assert!(state.apply(commit).is_fenced());

    // the new one's progress keeps the kind, and a second request waits for it
    assert_eq!(
        state.apply(progress(2, "shop.a", SnapshotTableStatus::InProgress, 4)),
        Response::Applied
    );
    let a = table(&state, "shop.a");
    assert_eq!(
        (a.status, a.kind, a.rows_done),
        (
            SnapshotTableStatus::InProgress,
            SnapshotKind::Incremental,
            4
        )
    );
    assert_eq!(
        state.apply(request(&[("shop.a", 8)])),
        Response::SnapshotRunning {
            table: "shop.a".into()
        }
    );
    assert_eq!(
        state.apply(progress(2, "shop.a", SnapshotTableStatus::Complete, 8)),
        Response::Applied
    );
    assert_eq!(table(&state, "shop.a").kind, SnapshotKind::Incremental);
    // complete, it may be requested again (a table not in the progress at all too)
    assert_eq!(
        state.apply(request(&[("shop.a", 8), ("shop.c", 0)])),
        Response::SnapshotRequested {
            owner: Some(1),
            epoch: 3
        }
    );
    assert_eq!(table(&state, "shop.c").kind, SnapshotKind::Incremental);
}

#[test]
fn a_request_needs_a_pipeline_that_streamed() {
    let mut state = ClusterState::new();
    assert_eq!(
        state.apply(request(&[("shop.a", 1)])),
        Response::UnknownPipeline
    );
    let create = Command::CreatePipeline {
        name: "p".into(),
        spec: SpecJson::default(),
        incarnation: None,
    };
    state.apply(create);
    let before = state.clone();
    assert_eq!(
        state.snapshot_request_refusal("p", ["shop.a"]),
        Some(Response::NotStreamed)
    );
    assert_eq!(
        state.apply(request(&[("shop.a", 1)])),
        Response::NotStreamed
    );
    assert_eq!(state, before);
}

#[test]
fn an_unowned_pipeline_keeps_its_epoch_and_snapshots_when_it_next_starts() {
    let mut state = streaming();
    // release the pipeline through a pending move to another node
    state.apply(Command::RenewLease { node: 2 });
    state.apply(Command::MovePipeline {
        pipeline: "p".into(),
        to: 2,
    });
    let release = Command::ReleasePipeline {
        pipeline: "p".into(),
        node: 1,
        epoch: 1,
    };
    assert_eq!(state.apply(release), Response::Applied);
    assert_eq!(
        state.apply(request(&[("shop.a", 8)])),
        Response::SnapshotRequested {
            owner: None,
            epoch: 1
        }
    );
    assert_eq!(table(&state, "shop.a").status, SnapshotTableStatus::Pending);
}

#[test]
fn stop_leaves_the_incremental_tables_streaming_and_only_them() {
    let mut state = streaming();
    assert_eq!(
        state.apply(Command::StopSnapshot {
            pipeline: "x".into()
        }),
        Response::UnknownPipeline
    );
    // the initial snapshot's table in progress is not an incremental one
    let before = state.clone();
    assert_eq!(
        state.apply(Command::StopSnapshot {
            pipeline: "p".into()
        }),
        Response::NoSnapshotRunning
    );
    assert_eq!(state, before);

    state.apply(request(&[("shop.a", 8), ("shop.c", 5)]));
    assert_eq!(
        state.apply(progress(2, "shop.c", SnapshotTableStatus::Complete, 5)),
        Response::Applied
    );
    assert_eq!(
        state.apply(progress(2, "shop.a", SnapshotTableStatus::InProgress, 3)),
        Response::Applied
    );
    assert_eq!(
        state.apply(Command::StopSnapshot {
            pipeline: "p".into()
        }),
        Response::SnapshotStopped {
            tables: vec!["shop.a".into()],
            owner: Some(1),
            epoch: 3
        }
    );
    let a = table(&state, "shop.a");
    assert_eq!(
        (a.status, a.kind, a.rows_done),
        (SnapshotTableStatus::Stopped, SnapshotKind::Incremental, 3)
    );
    assert!(a.status.is_done());
    assert_eq!(
        table(&state, "shop.c").status,
        SnapshotTableStatus::Complete
    );
    assert_eq!(
        table(&state, "shop.b").status,
        SnapshotTableStatus::InProgress
    );
    // the stopped incarnation's cursor write is fenced; a new request starts it again
    assert!(state
        .apply(progress(2, "shop.a", SnapshotTableStatus::InProgress, 4))
        .is_fenced());
    assert_eq!(
        state.apply(request(&[("shop.a", 8)])),
        Response::SnapshotRequested {
            owner: Some(1),
            epoch: 4
        }
    );
    assert_eq!(table(&state, "shop.a").status, SnapshotTableStatus::Pending);
}

#[test]
fn progress_written_before_the_kind_existed_reads_as_initial_and_initial_is_not_written() {
    let old = r#"{"pk_cursor":null,"delivered_pk":null,"status":"complete","rows_done":3,"rows_estimated":3}"#;
    let progress: TableProgress = serde_json::from_str(old).unwrap();
    assert_eq!(progress.kind, SnapshotKind::Initial);
    assert_eq!(serde_json::to_string(&progress).unwrap(), old);
    let incremental = TableProgress {
        kind: SnapshotKind::Incremental,
        ..progress
    };
    assert!(serde_json::to_string(&incremental)
        .unwrap()
        .ends_with(r#","kind":"incremental"}"#));
}
