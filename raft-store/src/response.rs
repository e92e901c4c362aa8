//! The outcome of applying one [`Command`](crate::Command).
//!
//! A rejection is not an error of the store: it is a deterministic, replicated outcome that
//! every replica computes identically, and the state is left untouched by it.

use serde::{Deserialize, Serialize};

use crate::command::{DesiredState, Epoch};
use crate::type_config::NodeId;

/// What applying a command did.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Response {
    /// The command was applied (or was a no-op repeat of an applied one).
    Applied,
    /// `RestartPipeline` was applied: the owner it restarted on (if any) and the pipeline's
    /// epoch after it (unchanged when there is no owner).
    Restarted {
        /// The owner, `None` when nothing runs (the state is left unchanged).
        owner: Option<NodeId>,
        /// The pipeline's epoch after the command.
        epoch: Epoch,
    },
    /// `MovePipeline` was applied: the pipeline's owner and epoch, and the worker it is moving
    /// to (`None` when the move was to the current owner: nothing is pending).
    Moving {
        /// The current owner, `None` while unowned.
        owner: Option<NodeId>,
        /// The pending move's target.
        move_to: Option<NodeId>,
        /// The pipeline's epoch.
        epoch: Epoch,
    },
    /// `RequestSnapshot` was applied: the tables are pending; the owner (if any) restarts its
    /// runner at `epoch` to snapshot them.
    SnapshotRequested {
        /// The owner, `None` while unowned (the snapshot runs when the pipeline next starts).
        owner: Option<NodeId>,
        /// The pipeline's epoch after the command.
        epoch: Epoch,
    },
    /// `StopSnapshot` was applied: the tables stopped, in name order; the owner (if any)
    /// restarts its runner at `epoch` without them.
    SnapshotStopped {
        /// The tables whose incremental snapshot stopped (`schema.table`).
        tables: Vec<String>,
        /// The owner, `None` while unowned.
        owner: Option<NodeId>,
        /// The pipeline's epoch after the command.
        epoch: Epoch,
    },
    /// `RequestSnapshot` named a table whose snapshot is pending or in progress: nothing was
    /// changed.
    SnapshotRunning {
        /// The first such table (`schema.table`).
        table: String,
    },
    /// `RequestSnapshot` before the pipeline's first checkpoint: an incremental snapshot is
    /// woven into a stream that has a position (its initial snapshot, if any, covers the rest).
    NotStreamed,
    /// `StopSnapshot` while no incremental snapshot is pending or in progress.
    NoSnapshotRunning,
    /// No pipeline has that name.
    UnknownPipeline,
    /// `MovePipeline` named a worker that never renewed a lease (not a worker of this
    /// cluster, or one that has not started yet).
    UnknownNode {
        /// The node named.
        node: NodeId,
    },
    /// `ReleasePipeline` for a pipeline with no pending move (it was cancelled meanwhile):
    /// the owner keeps it.
    NoMovePending,
    /// A pipeline of that name already exists.
    PipelineExists,
    /// An owner write carried an epoch other than the pipeline's current one: the writer has
    /// been fenced and must stop.
    StaleEpoch {
        /// The pipeline's current epoch.
        current: Epoch,
    },
    /// An owner write reached a pipeline that has no owner (never assigned, or revoked by a
    /// reset): the writer must stop.
    Unowned,
    /// `AssignOwner` carried an epoch not greater than the current one.
    EpochNotIncreasing {
        /// The pipeline's current epoch.
        current: Epoch,
    },
    /// `ResetOffsets` while the desired state is not `stopped`.
    NotStopped {
        /// The pipeline's desired state.
        desired: DesiredState,
    },
    /// A checkpoint that does not cover the previous one (or is of another flavour), or a
    /// processed position that does not cover the previous processed position.
    CheckpointRegressed,
    /// A processed position that does not cover its own checkpoint (or is of another flavour).
    ProcessedBehindCheckpoint,
    /// Snapshot progress for a table whose snapshot is already complete.
    TableAlreadyComplete,
}

impl Response {
    /// True when the command changed (or confirmed) the state.
    pub fn is_applied(&self) -> bool {
        matches!(
            self,
            Response::Applied
                | Response::Restarted { .. }
                | Response::Moving { .. }
                | Response::SnapshotRequested { .. }
                | Response::SnapshotStopped { .. }
        )
    }

    /// True when the writer is no longer the pipeline's owner and must stop publishing.
    pub fn is_fenced(&self) -> bool {
        matches!(
            self,
            Response::StaleEpoch { .. } | Response::Unowned | Response::UnknownPipeline
        )
    }

    /// A stable snake_case code for the REST API and pipeline status.
    pub fn code(&self) -> &'static str {
        match self {
            Response::Applied
            | Response::Restarted { .. }
            | Response::Moving { .. }
            | Response::SnapshotRequested { .. }
            | Response::SnapshotStopped { .. } => "applied",
            Response::SnapshotRunning { .. } => "snapshot_running",
            Response::NotStreamed => "pipeline_not_streamed",
            Response::NoSnapshotRunning => "no_snapshot_running",
            Response::UnknownPipeline => "unknown_pipeline",
            Response::UnknownNode { .. } => "member_not_live",
            Response::NoMovePending => "no_move_pending",
            Response::PipelineExists => "pipeline_exists",
            Response::StaleEpoch { .. } => "stale_epoch",
            Response::Unowned => "pipeline_unowned",
            Response::EpochNotIncreasing { .. } => "epoch_not_increasing",
            Response::NotStopped { .. } => "pipeline_not_stopped",
            Response::CheckpointRegressed => "checkpoint_regressed",
            Response::ProcessedBehindCheckpoint => "processed_behind_checkpoint",
            Response::TableAlreadyComplete => "snapshot_table_already_complete",
        }
    }
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Response::Applied => f.write_str("applied"),
            Response::Restarted {
                owner: Some(owner),
                epoch,
            } => {
                write!(f, "restarted on node {owner} at epoch {epoch}")
            }
            Response::Restarted { owner: None, .. } => f.write_str("no owner, nothing to restart"),
            Response::Moving {
                owner,
                move_to: Some(to),
                ..
            } => match owner {
                Some(owner) => write!(f, "moving from node {owner} to node {to}"),
                None => write!(f, "unowned; node {to} takes it when it is placed"),
            },
            Response::Moving { move_to: None, .. } => f.write_str("no move pending"),
            Response::SnapshotRequested { owner, epoch } => match owner {
                Some(owner) => write!(f, "snapshot requested; node {owner} runs it at epoch {epoch}"),
                None => f.write_str("snapshot requested; it runs when the pipeline next starts"),
            },
            Response::SnapshotStopped { tables, .. } => {
                write!(f, "incremental snapshot stopped for {} tables", tables.len())
            }
            Response::SnapshotRunning { table } => {
                write!(f, "a snapshot of `{table}` is already pending or in progress")
            }
            Response::NotStreamed => f.write_str(
                "the pipeline has no checkpoint yet: start it first (an initial snapshot covers existing rows)",
            ),
            Response::NoSnapshotRunning => f.write_str("no incremental snapshot is running"),
            Response::UnknownPipeline => f.write_str("unknown pipeline"),
            Response::UnknownNode { node } => {
                write!(f, "node {node} has never renewed a lease in this cluster")
            }
            Response::NoMovePending => f.write_str("no move is pending"),
            Response::PipelineExists => f.write_str("pipeline already exists"),
            Response::StaleEpoch { current } => {
                write!(f, "stale epoch, the current epoch is {current}")
            }
            Response::Unowned => f.write_str("pipeline has no owner"),
            Response::EpochNotIncreasing { current } => {
                write!(f, "epoch must exceed the current epoch {current}")
            }
            Response::NotStopped { desired } => {
                write!(
                    f,
                    "pipeline must be stopped, its desired state is {desired}"
                )
            }
            Response::CheckpointRegressed => {
                f.write_str("checkpoint does not cover the previous checkpoint")
            }
            Response::ProcessedBehindCheckpoint => {
                f.write_str("processed position does not cover its checkpoint")
            }
            Response::TableAlreadyComplete => f.write_str("table snapshot is already complete"),
        }
    }
}
