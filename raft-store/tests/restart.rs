//! A store reopened from disk has the log, the vote, the applied cluster state and the
//! current snapshot it had before.

use std::collections::BTreeMap;

use capstan_core::position::{Flavor, Position};
use capstan_raft_store::type_config::{Entry, LogId, Vote};
use capstan_raft_store::{Command, DesiredState, NodeInfo, Response, SpecJson, Store};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, Membership, RaftLogReader, RaftSnapshotBuilder};

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn entry(term: u64, index: u64, payload: EntryPayload<capstan_raft_store::TypeConfig>) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload,
    }
}

fn commands(processed: Position, stale: Position) -> Vec<Command> {
    vec![
        Command::CreatePipeline {
            name: "orders".into(),
            spec: SpecJson::new(serde_json::json!({"source": "db"})),
            incarnation: None,
        },
        Command::SetDesiredState {
            name: "orders".into(),
            state: DesiredState::Running,
        },
        Command::AssignOwner {
            pipeline: "orders".into(),
            node: 1,
            epoch: 1,
        },
        Command::CommitCheckpoint {
            pipeline: "orders".into(),
            epoch: 1,
            position: processed,
            processed: None,
        },
        Command::CommitCheckpoint {
            pipeline: "orders".into(),
            epoch: 0,
            position: stale,
            processed: None,
        },
    ]
}

#[tokio::test]
async fn reopened_store_recovers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = BTreeMap::from([(
        1,
        NodeInfo {
            raft_addr: "127.0.0.1:7001".into(),
            api_addr: "127.0.0.1:8001".into(),
        },
    )]);
    let membership = Membership::new(vec![[1].into()], nodes);
    let gtids = |text: &str| Position::parse(Flavor::Mysql, text).unwrap();
    let commands = commands(
        gtids("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42"),
        gtids("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-99"),
    );

    let mut entries = vec![
        entry(1, 1, EntryPayload::Blank),
        entry(1, 2, EntryPayload::Membership(membership.clone())),
    ];
    for (offset, command) in commands.iter().cloned().enumerate() {
        entries.push(entry(1, 3 + offset as u64, EntryPayload::Normal(command)));
    }
    let last = log_id(1, 2 + commands.len() as u64);

    let (state_before, snapshot_meta) = {
        let (mut log_store, mut sm) = Store::open(dir.path()).unwrap();
        log_store.save_vote(&Vote::new(1, 1)).await.unwrap();
        log_store.blocking_append(entries.clone()).await.unwrap();
        log_store.save_committed(Some(last)).await.unwrap();

        let responses = sm.apply(entries.clone()).await.unwrap();
        assert_eq!(responses.len(), entries.len());
        assert_eq!(
            responses.last(),
            Some(&Response::StaleEpoch { current: 1 }),
            "the stale write is rejected"
        );
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert_eq!(snapshot.meta.last_log_id, Some(last));
        (sm.cluster_state().snapshot(), snapshot.meta)
    };

    let (mut log_store, mut sm) = Store::open(dir.path()).unwrap();
    assert_eq!(log_store.read_vote().await.unwrap(), Some(Vote::new(1, 1)));
    assert_eq!(log_store.read_committed().await.unwrap(), Some(last));
    let state = log_store.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(last));
    let reread = log_store.try_get_log_entries(..).await.unwrap();
    assert_eq!(reread.len(), entries.len());
    assert_eq!(format!("{reread:?}"), format!("{entries:?}"));

    let (applied, stored_membership) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(last));
    assert_eq!(stored_membership.membership(), &membership);
    assert_eq!(sm.cluster_state().snapshot(), state_before);
    let record = state_before.pipeline("orders").unwrap();
    assert_eq!(record.ownership().map(|owned| owned.epoch), Some(1));
    assert_eq!(
        record.checkpoint().map(ToString::to_string).as_deref(),
        Some("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42")
    );

    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snapshot_meta);

    // a follower installing that snapshot ends up with the same state
    let other = tempfile::tempdir().unwrap();
    let (_, mut follower) = Store::open(other.path()).unwrap();
    follower
        .install_snapshot(&current.meta, current.snapshot)
        .await
        .unwrap();
    assert_eq!(follower.cluster_state().snapshot(), state_before);
    assert_eq!(follower.applied_state().await.unwrap().0, Some(last));
    drop(follower);
    let (_, follower) = Store::open(other.path()).unwrap();
    assert_eq!(follower.cluster_state().snapshot(), state_before);
}
