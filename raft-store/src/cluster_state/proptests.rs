//! Properties of `ClusterState::apply` over arbitrary command sequences.

use std::collections::{BTreeMap, BTreeSet};

use capstan_core::position::{Flavor, Position};
use proptest::prelude::*;

use super::*;
use crate::command::{DesiredState, KeyBytes, RunnerState, SpecJson};

const NAMES: [&str; 3] = ["a", "b", "c"];
const UUIDS: [&str; 2] = [
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "4a6f2b8e-0000-11e1-9e33-c80aa9429562",
];

fn name(names: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(names).prop_map(str::to_owned)
}

fn epoch() -> impl Strategy<Value = Epoch> {
    0u64..8
}

fn position() -> impl Strategy<Value = Position> {
    prop_oneof![
        4 => (prop::sample::select(UUIDS.as_slice()), 1u64..30)
            .prop_map(|(uuid, end)| Position::parse(Flavor::Mysql, &format!("{uuid}:1-{end}")).unwrap()),
        1 => (1u64..30).prop_map(|seq| Position::parse(Flavor::Mariadb, &format!("0-1-{seq}")).unwrap()),
    ]
}

fn key() -> impl Strategy<Value = Option<KeyBytes>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..3).prop_map(KeyBytes::new))
}

fn desired() -> impl Strategy<Value = DesiredState> {
    prop_oneof![
        Just(DesiredState::Running),
        Just(DesiredState::Paused),
        Just(DesiredState::Stopped),
    ]
}

fn table_status() -> impl Strategy<Value = SnapshotTableStatus> {
    prop_oneof![
        Just(SnapshotTableStatus::Pending),
        Just(SnapshotTableStatus::InProgress),
        Just(SnapshotTableStatus::Complete),
    ]
}

/// Commands about pipelines named from `names` (one name makes delete-and-recreate likely).
fn command_about(names: &'static [&'static str]) -> impl Strategy<Value = Command> {
    let name = move || name(names);
    prop_oneof![
        2 => (name(), 0u8..3).prop_map(|(name, v)| Command::CreatePipeline {
            name,
            spec: SpecJson::new(serde_json::json!({ "v": v })),
            incarnation: Some(format!("life-{v}")),
        }),
        1 => (name(), 0u8..3).prop_map(|(name, v)| Command::UpdatePipelineConfig {
            name,
            spec: SpecJson::new(serde_json::json!({ "v": v })),
        }),
        1 => name().prop_map(|name| Command::DeletePipeline { name }),
        2 => (name(), desired()).prop_map(|(name, state)| Command::SetDesiredState { name, state }),
        3 => (name(), 1u64..4, epoch()).prop_map(|(pipeline, node, epoch)| Command::AssignOwner {
            pipeline,
            node,
            epoch,
        }),
        5 => (name(), epoch(), position(), prop::option::of(position())).prop_map(
            |(pipeline, epoch, position, processed)| {
                Command::CommitCheckpoint { pipeline, epoch, position, processed }
            }
        ),
        3 => (name(), epoch(), prop::sample::select(vec!["s.t1", "s.t2"]), key(), key(), table_status())
            .prop_map(|(pipeline, epoch, table, pk_cursor, delivered_pk, status)| {
                Command::CommitSnapshotProgress {
                    pipeline,
                    epoch,
                    table: table.to_owned(),
                    pk_cursor,
                    delivered_pk,
                    status,
                    rows_done: 0,
                    rows_estimated: 0,
                }
            }),
        1 => (name(), epoch(), position()).prop_map(|(pipeline, epoch, position)| {
            Command::BeginSnapshot {
                pipeline,
                epoch,
                position,
                tables: vec![("s.t1".to_owned(), 10), ("s.t2".to_owned(), 0)],
            }
        }),
        2 => (name(), epoch()).prop_map(|(pipeline, epoch)| Command::ReportStatus {
            pipeline,
            epoch,
            state: RunnerState::Streaming,
            reason: None,
            detail: None,
        }),
        1 => name().prop_map(|pipeline| Command::ResetOffsets { pipeline, incarnation: None }),
        1 => name().prop_map(|name| Command::RestartPipeline { name }),
        1 => (1u64..4).prop_map(|node| Command::RenewLease { node }),
        2 => (name(), 1u64..4).prop_map(|(pipeline, to)| Command::MovePipeline { pipeline, to }),
        2 => (name(), 1u64..4, epoch()).prop_map(|(pipeline, node, epoch)| {
            Command::ReleasePipeline { pipeline, node, epoch }
        }),
    ]
}

fn command() -> impl Strategy<Value = Command> {
    command_about(NAMES.as_slice())
}

fn commands() -> impl Strategy<Value = Vec<Command>> {
    prop::collection::vec(command(), 0..60)
}

fn commands_about_one_pipeline() -> impl Strategy<Value = Vec<Command>> {
    prop::collection::vec(command_about(&NAMES[..1]), 0..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A rejected command changes nothing (in particular a stale-epoch write).
    #[test]
    fn rejections_never_change_the_state(commands in commands()) {
        let mut state = ClusterState::new();
        for command in commands {
            let before = state.clone();
            let response = state.apply(command);
            if !response.is_applied() {
                prop_assert_eq!(&state, &before, "{} changed the state", response.code());
            }
        }
    }

    /// The cluster's epoch high-water mark and every live pipeline's epoch never decrease.
    #[test]
    fn epochs_never_decrease(commands in commands()) {
        let mut state = ClusterState::new();
        for command in commands {
            let before = state.clone();
            state.apply(command);
            prop_assert!(state.max_epoch() >= before.max_epoch());
            for (name, record) in state.pipelines() {
                prop_assert!(record.epoch() <= state.max_epoch());
                if let Some(old) = before.pipeline(name) {
                    prop_assert!(record.epoch() >= old.epoch());
                }
            }
        }
    }

    /// Once an owner's epoch has been superseded (reassigned, reset or deleted) no write
    /// carrying it is ever applied again, not even to a pipeline recreated under that name.
    #[test]
    fn superseded_epochs_stay_fenced(
        commands in prop_oneof![commands(), commands_about_one_pipeline()],
    ) {
        let mut state = ClusterState::new();
        let mut dead: BTreeMap<String, BTreeSet<Epoch>> = BTreeMap::new();
        for command in commands {
            let before = state.clone();
            let name = command.pipeline().unwrap_or_default().to_owned();
            let write_epoch = command.owner_epoch();
            let response = state.apply(command);
            if let (Some(epoch), true) = (write_epoch, response.is_applied()) {
                let fenced = dead.get(&name).is_some_and(|epochs| epochs.contains(&epoch));
                prop_assert!(!fenced, "dead epoch {} wrote to {}", epoch, name);
            }
            for (name, record) in before.pipelines() {
                if let Some(owned) = record.ownership() {
                    let still = state.ownership(name) == Some(owned);
                    if !still {
                        dead.entry(name.clone()).or_default().insert(owned.epoch);
                    }
                }
            }
        }
    }

    /// A checkpoint changes only through the current owner's `CommitCheckpoint` or
    /// `BeginSnapshot` (or by a reset, delete or create of the pipeline).
    #[test]
    fn checkpoints_change_only_through_the_owner(commands in commands()) {
        let mut state = ClusterState::new();
        for command in commands {
            let before = state.clone();
            let name = command.pipeline().unwrap_or_default().to_owned();
            let owner_epoch = before.ownership(&name).map(|owned| owned.epoch);
            let allowed = match &command {
                Command::CommitCheckpoint { epoch, .. } | Command::BeginSnapshot { epoch, .. } => {
                    owner_epoch == Some(*epoch)
                }
                Command::ResetOffsets { .. }
                | Command::DeletePipeline { .. }
                | Command::CreatePipeline { .. } => true,
                _ => false,
            };
            state.apply(command);
            for (other, record) in before.pipelines() {
                let now = state.pipeline(other).map(PipelineRecord::checkpoint);
                if now != Some(record.checkpoint()) {
                    prop_assert!(allowed && *other == name, "checkpoint of {} changed", other);
                }
            }
        }
    }

    /// The same commands give the same state, which survives a serde round trip and
    /// serializes to the same bytes.
    #[test]
    fn apply_is_deterministic(commands in commands()) {
        let mut left = ClusterState::new();
        let mut right = ClusterState::new();
        for command in commands {
            let a = left.apply(command.clone());
            let b = right.apply(command);
            prop_assert_eq!(a, b);
        }
        prop_assert_eq!(&left, &right);
        let bytes = serde_json::to_vec(&left).unwrap();
        prop_assert_eq!(&bytes, &serde_json::to_vec(&right).unwrap());
        let back: ClusterState = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(&back, &left);
        prop_assert_eq!(serde_json::to_vec(&back).unwrap(), bytes);
    }

    /// Commands and responses survive the Raft log's encoding.
    #[test]
    fn commands_round_trip(command in command()) {
        let bytes = serde_json::to_vec(&command).unwrap();
        prop_assert_eq!(serde_json::from_slice::<Command>(&bytes).unwrap(), command.clone());
        let response = ClusterState::new().apply(command);
        let bytes = serde_json::to_vec(&response).unwrap();
        prop_assert_eq!(serde_json::from_slice::<Response>(&bytes).unwrap(), response);
    }
}
