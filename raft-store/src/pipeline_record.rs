//! What the cluster knows about one pipeline: definition, desired state, ownership, progress.

use std::collections::BTreeMap;

use capstan_core::position::{Position, ResumePoint};
use serde::{Deserialize, Serialize};

use crate::command::{
    DesiredState, Epoch, KeyBytes, RunnerState, SnapshotKind, SnapshotTableStatus, SpecJson,
};
use crate::type_config::NodeId;

/// One pipeline's replicated record. Read it through [`ClusterState`](crate::ClusterState);
/// only [`ClusterState::apply`](crate::ClusterState::apply) changes it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PipelineRecord {
    #[serde(deserialize_with = "SpecJson::deserialize_text")]
    pub(crate) spec: SpecJson,
    pub(crate) generation: u64,
    pub(crate) desired: DesiredState,
    pub(crate) epoch: Epoch,
    pub(crate) owner: Option<NodeId>,
    pub(crate) checkpoint: Option<Position>,
    /// Set only when it covers more than `checkpoint` (absent in records written before it
    /// existed: the same as the checkpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) processed: Option<Position>,
    pub(crate) snapshot: BTreeMap<String, TableProgress>,
    pub(crate) status: Option<ReportedStatus>,
    /// The id of this life of the pipeline (its creation or last offsets reset): a Kafka
    /// offsets record carrying another one is from an earlier life and is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) incarnation: Option<String>,
    /// The `failed` report that halted the pipeline, kept across moves and worker restarts
    /// (the epoch changes, the halt stays) until `RestartPipeline`, `UpdatePipelineConfig` or
    /// `ResetOffsets` clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) halt: Option<ReportedStatus>,
    /// The worker an operator asked to move the pipeline to (`MovePipeline`): the owner stops
    /// its runner and releases the pipeline, and the scheduler assigns it there. Cleared by
    /// the `AssignOwner` that places the pipeline, or by a move to the current owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) move_to: Option<NodeId>,
}

impl PipelineRecord {
    pub(crate) fn new(spec: SpecJson, epoch_floor: Epoch, incarnation: Option<String>) -> Self {
        PipelineRecord {
            spec,
            generation: 1,
            desired: DesiredState::Stopped,
            epoch: epoch_floor,
            owner: None,
            checkpoint: None,
            processed: None,
            snapshot: BTreeMap::new(),
            status: None,
            incarnation,
            halt: None,
            move_to: None,
        }
    }

    /// The pipeline definition.
    pub fn spec(&self) -> &SpecJson {
        &self.spec
    }

    /// Starts at 1 and grows by one with every `UpdatePipelineConfig`; a runner restarts when
    /// the generation it runs differs.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What the operator wants.
    pub fn desired_state(&self) -> DesiredState {
        self.desired
    }

    /// The current epoch: owner writes must carry exactly this value.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The owning node, if any.
    pub fn owner(&self) -> Option<NodeId> {
        self.owner
    }

    /// The owner and its epoch, if the pipeline is owned.
    pub fn ownership(&self) -> Option<Ownership> {
        self.owner.map(|node| Ownership {
            node,
            epoch: self.epoch,
        })
    }

    /// The id of this life of the pipeline (set at its creation and at every offsets reset):
    /// a Kafka offsets record carrying another one belongs to an earlier life.
    pub fn incarnation(&self) -> Option<&str> {
        self.incarnation.as_deref()
    }

    /// The last committed checkpoint: where a restart resumes.
    pub fn checkpoint(&self) -> Option<&Position> {
        self.checkpoint.as_ref()
    }

    /// Everything delivered as of the last committed checkpoint: the checkpoint itself unless
    /// a MariaDB checkpoint was held back before a pending XA prepare (ADR-0008). A restart
    /// resumes from the checkpoint and skips what this covers.
    pub fn processed(&self) -> Option<&Position> {
        self.processed.as_ref().or(self.checkpoint.as_ref())
    }

    /// The last committed checkpoint with the processed position beside it, as one point
    /// (`None` before the first commit).
    pub fn resume_point(&self) -> Option<ResumePoint> {
        let checkpoint = self.checkpoint.clone()?;
        // apply accepts no pair that breaks the rule; one in an old state would have been
        // refused, so it is read as a plain checkpoint
        Some(
            ResumePoint::new(checkpoint.clone(), self.processed.clone())
                .unwrap_or_else(|_| ResumePoint::at(checkpoint)),
        )
    }

    /// Snapshot progress per table (`schema.table`), in table order.
    pub fn snapshot_progress(&self) -> &BTreeMap<String, TableProgress> {
        &self.snapshot
    }

    /// Snapshot progress of one table.
    pub fn table_progress(&self, table: &str) -> Option<&TableProgress> {
        self.snapshot.get(table)
    }

    /// The last status the owner reported.
    pub fn status(&self) -> Option<&ReportedStatus> {
        self.status.as_ref()
    }

    /// The worker an operator's move is taking the pipeline to, while the move is pending:
    /// the owner gives the pipeline up once its runner has ended, and the scheduler then
    /// assigns it there (elsewhere if that worker is not live by then).
    pub fn move_to(&self) -> Option<NodeId> {
        self.move_to
    }

    /// The halt in force, if the pipeline halted (fail-closed) and nobody restarted or
    /// reconfigured it since: no owner starts it, whichever node owns it now.
    pub fn halt(&self) -> Option<&ReportedStatus> {
        self.halt.as_ref()
    }
}

/// A pipeline's owner with the epoch that fences its writes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Ownership {
    /// The owning node.
    pub node: NodeId,
    /// Its epoch.
    pub epoch: Epoch,
}

/// The snapshot progress of one table.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TableProgress {
    /// Encoded primary key of the last row read.
    pub pk_cursor: Option<KeyBytes>,
    /// Encoded primary key of the last row delivered.
    pub delivered_pk: Option<KeyBytes>,
    /// Where the table stands.
    pub status: SnapshotTableStatus,
    /// Rows published so far.
    #[serde(default)]
    pub rows_done: u64,
    /// The server's estimate of the table's row count (information_schema).
    #[serde(default)]
    pub rows_estimated: u64,
    /// Why the table is snapshotted; set by `RequestSnapshot` (incremental) and kept by the
    /// owner's progress writes. Absent in records written before it existed: initial.
    #[serde(default, skip_serializing_if = "SnapshotKind::is_initial")]
    pub kind: SnapshotKind,
}

impl TableProgress {
    /// A table whose snapshot has not started.
    pub fn pending() -> Self {
        TableProgress {
            pk_cursor: None,
            delivered_pk: None,
            status: SnapshotTableStatus::Pending,
            rows_done: 0,
            rows_estimated: 0,
            kind: SnapshotKind::Initial,
        }
    }
}

/// A status report of a pipeline's owner.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ReportedStatus {
    /// The reporting node (the owner at the time).
    pub node: NodeId,
    /// The epoch it reported under.
    pub epoch: Epoch,
    /// What the runner was doing.
    pub state: RunnerState,
    /// Why, for failures and pauses: a stable code.
    pub reason: Option<String>,
    /// The value-free detail beside the code (Kafka error name, topic, table, sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
