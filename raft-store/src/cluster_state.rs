//! The replicated control-plane state and the one function that changes it.
//!
//! [`ClusterState::apply`] is pure: no I/O, no clock, no randomness, no hashing order. Every
//! replica applies the same committed commands in the same order and must reach the same
//! state, so every collection is a `BTreeMap` and every rejection leaves the state untouched.
//!
//! # Fencing
//!
//! A pipeline has at most one owner, and every write an owner makes (checkpoint, snapshot
//! progress, status) carries the owner's *epoch*. The rules:
//!
//! 1. `AssignOwner` must carry an epoch strictly greater than the pipeline's current epoch, so
//!    a pipeline's epoch only ever grows, and each epoch names at most one owner.
//!    `RestartPipeline` grows it by one on the same owner, decided at apply time.
//! 2. An owner write is applied only if the pipeline has an owner and the write's epoch equals
//!    the current epoch. Anything else is answered `StaleEpoch` (or `Unowned`) and changes
//!    nothing. Because Raft orders the reassignment and the old owner's write in one log, a
//!    write the old owner sends after it was replaced is rejected on every replica, however
//!    long the old owner was paused or cut off.
//! 3. Once an epoch is superseded it is dead for good, also across the pipeline's lifetime:
//!    `ResetOffsets` revokes the owner *and* bumps the epoch, and a pipeline that is deleted
//!    and created again starts at the highest epoch ever used in the cluster
//!    ([`ClusterState::max_epoch`]), with no owner, so a zombie owner of the deleted pipeline
//!    can never write into the new one.
//!
//! 4. An operator's move (`MovePipeline`) never forces the owner out: it marks the pipeline,
//!    the owner stops its runner, and only once the runner has ended does the owner give the
//!    pipeline up (`ReleasePipeline`, carrying its epoch). The next owner is assigned with a
//!    greater epoch, as always. An owner that never releases keeps the pipeline, the move
//!    pending, until its lease expires like any dead owner's.
//!
//! The epoch is necessary, not sufficient: an owner that cannot reach a quorum also stops on
//! its own when its lease runs out (self-fencing, in the worker), and in exactly-once mode
//! Kafka's transactional id fences a zombie producer. This module guarantees only that no
//! stale write reaches the replicated state.
//!
//! # Progress rules
//!
//! A checkpoint must cover the previous one (`previous ⊆ new`, same flavour): the processed
//! set only grows, so a smaller one is a bug or a stale reader and is refused with
//! `CheckpointRegressed`. The processed position beside it (what was delivered, ahead of a
//! MariaDB checkpoint held back before a pending XA prepare, ADR-0008; absent = the
//! checkpoint) must cover the checkpoint (`ProcessedBehindCheckpoint`) and the previous
//! processed position (`CheckpointRegressed`). A table whose snapshot is `complete` stays complete; only
//! `ResetOffsets` (which clears checkpoint and snapshot progress) starts over. Repeating an
//! already-applied owner write (a client retry) is answered `Applied` and changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use capstan_core::position::ResumePoint;
use serde::{Deserialize, Serialize};

use crate::command::{Command, DesiredState, Epoch, RunnerState, SnapshotTableStatus};
use crate::pipeline_record::{Ownership, PipelineRecord, ReportedStatus, TableProgress};
use crate::response::Response;
use crate::type_config::NodeId;

/// Everything the cluster agrees on: the pipelines with their ownership and progress.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct ClusterState {
    pipelines: BTreeMap<String, PipelineRecord>,
    max_epoch: Epoch,
    /// Lease renewals committed per worker (a counter the leader watches move).
    #[serde(default)]
    lease_renewals: BTreeMap<NodeId, u64>,
    /// Workers that released their lease on a clean shutdown and have not renewed since.
    #[serde(default)]
    released: BTreeSet<NodeId>,
}

impl ClusterState {
    /// An empty state: no pipelines, no epoch used yet.
    pub fn new() -> Self {
        ClusterState::default()
    }

    /// All pipelines, in name order.
    pub fn pipelines(&self) -> &BTreeMap<String, PipelineRecord> {
        &self.pipelines
    }

    /// One pipeline.
    pub fn pipeline(&self, name: &str) -> Option<&PipelineRecord> {
        self.pipelines.get(name)
    }

    /// The owner and epoch of a pipeline, if it exists and is owned.
    pub fn ownership(&self, name: &str) -> Option<Ownership> {
        self.pipelines.get(name).and_then(PipelineRecord::ownership)
    }

    /// The epoch the next `AssignOwner` for `name` should carry.
    pub fn next_epoch(&self, name: &str) -> Option<Epoch> {
        self.pipelines
            .get(name)
            .map(|record| record.epoch.saturating_add(1))
    }

    /// The highest epoch ever assigned or bumped in the cluster; never decreases.
    pub fn max_epoch(&self) -> Epoch {
        self.max_epoch
    }

    /// Lease renewals committed per worker.
    pub fn lease_renewals(&self) -> &BTreeMap<NodeId, u64> {
        &self.lease_renewals
    }

    /// Workers that released their lease and have not renewed since.
    pub fn released_nodes(&self) -> BTreeSet<NodeId> {
        self.released.clone()
    }

    /// Applies one command. A rejection leaves the state unchanged.
    pub fn apply(&mut self, command: Command) -> Response {
        match command {
            Command::RenewLease { node } => {
                let count = self.lease_renewals.entry(node).or_default();
                *count = count.wrapping_add(1);
                self.released.remove(&node);
                Response::Applied
            }
            Command::ReleaseLease { node } => {
                self.released.insert(node);
                Response::Applied
            }
            Command::CreatePipeline {
                name,
                spec,
                incarnation,
            } => {
                if self.pipelines.contains_key(&name) {
                    return Response::PipelineExists;
                }
                self.pipelines
                    .insert(name, PipelineRecord::new(spec, self.max_epoch, incarnation));
                Response::Applied
            }
            Command::UpdatePipelineConfig { name, spec } => {
                let Some(record) = self.pipelines.get_mut(&name) else {
                    return Response::UnknownPipeline;
                };
                record.spec = spec;
                record.generation = record.generation.saturating_add(1);
                record.halt = None;
                Response::Applied
            }
            Command::DeletePipeline { name } => match self.pipelines.remove(&name) {
                Some(_) => Response::Applied,
                None => Response::UnknownPipeline,
            },
            Command::SetDesiredState { name, state } => {
                let Some(record) = self.pipelines.get_mut(&name) else {
                    return Response::UnknownPipeline;
                };
                record.desired = state;
                Response::Applied
            }
            Command::AssignOwner {
                pipeline,
                node,
                epoch,
            } => {
                let Some(record) = self.pipelines.get_mut(&pipeline) else {
                    return Response::UnknownPipeline;
                };
                if epoch <= record.epoch {
                    return Response::EpochNotIncreasing {
                        current: record.epoch,
                    };
                }
                record.epoch = epoch;
                record.owner = Some(node);
                // placed: a pending move is done (or, its target not live, overtaken)
                record.move_to = None;
                self.max_epoch = self.max_epoch.max(epoch);
                Response::Applied
            }
            Command::MovePipeline { pipeline, to } => {
                let Some(record) = self.pipelines.get_mut(&pipeline) else {
                    return Response::UnknownPipeline;
                };
                if !self.lease_renewals.contains_key(&to) {
                    return Response::UnknownNode { node: to };
                }
                record.move_to = (record.owner != Some(to)).then_some(to);
                Response::Moving {
                    owner: record.owner,
                    move_to: record.move_to,
                    epoch: record.epoch,
                }
            }
            Command::ReleasePipeline {
                pipeline,
                node,
                epoch,
            } => {
                let (record, owner) = match self.owned_record(&pipeline, epoch) {
                    Ok(owned) => owned,
                    Err(rejection) => return rejection,
                };
                if owner != node {
                    return Response::StaleEpoch {
                        current: record.epoch,
                    };
                }
                if record.move_to.is_none() {
                    return Response::NoMovePending;
                }
                record.owner = None;
                Response::Applied
            }
            Command::RestartPipeline { name } => {
                let Some(record) = self.pipelines.get_mut(&name) else {
                    return Response::UnknownPipeline;
                };
                let Some(owner) = record.owner else {
                    return Response::Restarted {
                        owner: None,
                        epoch: record.epoch,
                    };
                };
                record.epoch = record.epoch.saturating_add(1);
                self.max_epoch = self.max_epoch.max(record.epoch);
                record.halt = None;
                Response::Restarted {
                    owner: Some(owner),
                    epoch: record.epoch,
                }
            }
            Command::CommitCheckpoint {
                pipeline,
                epoch,
                position,
                processed,
            } => {
                let (record, _) = match self.owned_record(&pipeline, epoch) {
                    Ok(owned) => owned,
                    Err(rejection) => return rejection,
                };
                // the one rule of a resume point: the processed position covers the
                // checkpoint (stored only when it says more)
                let Ok(point) = ResumePoint::new(position, processed) else {
                    return Response::ProcessedBehindCheckpoint;
                };
                if let Some(previous) = record.resume_point() {
                    if !point.covers(&previous) {
                        return Response::CheckpointRegressed;
                    }
                }
                let (position, processed) = point.into_parts();
                record.checkpoint = Some(position);
                record.processed = processed;
                Response::Applied
            }
            Command::BeginSnapshot {
                pipeline,
                epoch,
                position,
                tables,
            } => {
                let (record, _) = match self.owned_record(&pipeline, epoch) {
                    Ok(owned) => owned,
                    Err(rejection) => return rejection,
                };
                record.checkpoint = Some(position);
                record.processed = None;
                record.snapshot = tables
                    .into_iter()
                    .map(|(table, rows_estimated)| {
                        let progress = TableProgress {
                            rows_estimated,
                            ..TableProgress::pending()
                        };
                        (table, progress)
                    })
                    .collect();
                Response::Applied
            }
            Command::CommitSnapshotProgress {
                pipeline,
                epoch,
                table,
                pk_cursor,
                delivered_pk,
                status,
                rows_done,
                rows_estimated,
            } => {
                let (record, _) = match self.owned_record(&pipeline, epoch) {
                    Ok(owned) => owned,
                    Err(rejection) => return rejection,
                };
                // the kind is the request's: an owner write keeps it
                let kind = record
                    .snapshot
                    .get(&table)
                    .map(|p| p.kind)
                    .unwrap_or_default();
                let progress = TableProgress {
                    pk_cursor,
                    delivered_pk,
                    status,
                    rows_done,
                    rows_estimated,
                    kind,
                };
                if let Some(existing) = record.snapshot.get(&table) {
                    if existing.status == SnapshotTableStatus::Complete {
                        return if *existing == progress {
                            Response::Applied
                        } else {
                            Response::TableAlreadyComplete
                        };
                    }
                }
                record.snapshot.insert(table, progress);
                Response::Applied
            }
            Command::ReviseSnapshotTables {
                pipeline,
                epoch,
                snapshot,
                forget,
            } => {
                let (record, _) = match self.owned_record(&pipeline, epoch) {
                    Ok(owned) => owned,
                    Err(rejection) => return rejection,
                };
                for table in forget {
                    record.snapshot.remove(&table);
                }
                for (table, rows_estimated) in snapshot {
                    let progress = TableProgress {
                        rows_estimated,
                        ..TableProgress::pending()
                    };
                    record.snapshot.insert(table, progress);
                }
                Response::Applied
            }
            Command::RequestSnapshot { pipeline, tables } => {
                self.request_snapshot(&pipeline, tables)
            }
            Command::StopSnapshot { pipeline } => self.stop_snapshot(&pipeline),
            Command::ReportStatus {
                pipeline,
                epoch,
                state,
                reason,
                detail,
            } => {
                let (record, node) = match self.owned_record(&pipeline, epoch) {
                    Ok(owned) => owned,
                    Err(rejection) => return rejection,
                };
                let report = ReportedStatus {
                    node,
                    epoch,
                    state,
                    reason,
                    detail,
                };
                if state == RunnerState::Failed {
                    record.halt = Some(report.clone());
                }
                record.status = Some(report);
                Response::Applied
            }
            Command::ResetOffsets {
                pipeline,
                incarnation,
            } => {
                let Some(record) = self.pipelines.get_mut(&pipeline) else {
                    return Response::UnknownPipeline;
                };
                if record.desired != DesiredState::Stopped {
                    return Response::NotStopped {
                        desired: record.desired,
                    };
                }
                record.checkpoint = None;
                record.processed = None;
                record.snapshot.clear();
                record.owner = None;
                record.epoch = record.epoch.saturating_add(1);
                record.incarnation = incarnation;
                record.halt = None;
                self.max_epoch = self.max_epoch.max(record.epoch);
                Response::Applied
            }
        }
    }

    /// The record an owner write with `epoch` may change and its owner, or the rejection
    /// (rule 2).
    fn owned_record(
        &mut self,
        pipeline: &str,
        epoch: Epoch,
    ) -> Result<(&mut PipelineRecord, NodeId), Response> {
        let record = self
            .pipelines
            .get_mut(pipeline)
            .ok_or(Response::UnknownPipeline)?;
        if epoch != record.epoch {
            return Err(Response::StaleEpoch {
                current: record.epoch,
            });
        }
        match record.owner {
            Some(node) => Ok((record, node)),
            None => Err(Response::Unowned),
        }
    }
}

mod snapshot_requests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod move_tests;

#[cfg(test)]
mod snapshot_request_tests;

#[cfg(test)]
mod proptests;
