//! What the API shows about the cluster and the answering node.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a node reports about the cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct ClusterView {
    /// The node that answered.
    pub node_id: u64,
    /// The current Raft leader, if known.
    pub leader: Option<u64>,
    /// The current Raft term.
    pub term: u64,
    /// Index of the last applied log entry.
    pub last_applied: Option<u64>,
    /// Index of the last entry this node's latest snapshot of the state covers.
    pub snapshot_index: Option<u64>,
    /// Index of the last entry purged from this node's log (a follower further behind is
    /// sent the snapshot).
    pub purged_index: Option<u64>,
    /// Every member, voters and learners.
    pub members: Vec<MemberView>,
}

/// One member of the cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct MemberView {
    /// Node id.
    pub id: u64,
    /// Raft address.
    pub raft_addr: String,
    /// REST API address.
    pub api_addr: String,
    /// True for a voter, false for a learner.
    pub voter: bool,
    /// Liveness as the answering node sees it (every node follows the lease renewals):
    /// `live`, `expired` (no renewal within the lease and its margin), or `released` (shut
    /// down cleanly).
    pub health: String,
    /// Pipelines this member owns.
    pub owned_pipelines: Vec<String>,
}

/// A request to add a member.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    /// The new node's id (positive, unused).
    #[schema(minimum = 1)]
    pub id: u64,
    /// Its Raft address (`host:port`).
    #[schema(
        pattern = r"^.+:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
    )]
    pub raft_addr: String,
    /// Its REST API address (`host:port`).
    #[schema(
        pattern = r"^.+:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
    )]
    pub api_addr: String,
}

/// The answering node's own health.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Health {
    /// `ok` when the node knows a leader and holds its lease, `degraded` otherwise.
    pub status: String,
    /// The node that answered.
    pub node_id: u64,
    /// The current Raft leader, if known.
    pub leader: Option<u64>,
    /// True while the node has reached a quorum within its lease (it may own pipelines).
    pub lease_valid: bool,
}

/// A rebalance request (`POST /cluster/rebalance`); an empty body is a dry run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RebalanceRequest {
    /// `true` (the default) only plans; `false` also starts the planned moves.
    #[serde(default = "dry_run_default")]
    #[schema(default = true)]
    pub dry_run: bool,
}

fn dry_run_default() -> bool {
    true
}

impl RebalanceRequest {
    /// The request an empty body stands for.
    pub fn default_dry_run() -> Self {
        RebalanceRequest { dry_run: true }
    }
}

/// A rebalance plan: the fewest moves that leave the live workers' loads within one of each
/// other.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct RebalanceView {
    /// True when nothing was started (a dry run).
    pub dry_run: bool,
    /// The moves, in the order they are (or would be) started.
    pub moves: Vec<PlannedMove>,
    /// Every live worker's load before and after the moves.
    pub workers: Vec<WorkerLoad>,
}

/// One move of a rebalance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PlannedMove {
    /// The pipeline.
    pub pipeline: String,
    /// Its owner.
    pub from: u64,
    /// The worker it moves to.
    pub to: u64,
}

/// A live worker's load: the pipelines it owns that are `running` or `paused` (a pipeline
/// being moved counts on the worker it is moving to).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct WorkerLoad {
    /// Node id.
    pub node: u64,
    /// Its load now.
    pub before: u64,
    /// Its load once the moves are done.
    pub after: u64,
}
