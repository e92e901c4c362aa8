//! The seam between the REST API and a worker: everything the API can ask or tell.
//!
//! The worker implements [`ControlPlane`]; the API's own tests use a fake. Every method is
//! value-free: no row values and no secrets cross this boundary in either direction.

use serde::{Deserialize, Serialize};

use crate::api_error::ApiError;

/// What a node reports about the cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterView {
    /// The node that answered.
    pub node_id: u64,
    /// The current Raft leader, if known.
    pub leader: Option<u64>,
    /// The current Raft term.
    pub term: u64,
    /// Index of the last applied log entry.
    pub last_applied: Option<u64>,
    /// Every member, voters and learners.
    pub members: Vec<MemberView>,
}

/// One member of the cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberView {
    /// Node id.
    pub id: u64,
    /// Raft address.
    pub raft_addr: String,
    /// REST API address.
    pub api_addr: String,
    /// True for a voter, false for a learner.
    pub voter: bool,
    /// Liveness as the leader sees it (`live`, `expired`, `released`), or `unknown` when the
    /// answering node is not the leader.
    pub health: String,
    /// Pipelines this member owns.
    pub owned_pipelines: Vec<String>,
}

/// A request to add a member.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    /// The new node's id (positive, unused).
    pub id: u64,
    /// Its Raft address (`host:port`).
    pub raft_addr: String,
    /// Its REST API address (`host:port`).
    pub api_addr: String,
}

/// The answering node's own health.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
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

/// A pipeline as the API shows it. The definition never includes the source password.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PipelineView {
    /// Pipeline name.
    pub name: String,
    /// The definition as stored, secrets removed.
    pub config: serde_json::Value,
}

/// A pipeline's status.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PipelineStatus {
    /// Pipeline name.
    pub name: String,
    /// What the operator asked for: `running`, `paused` or `stopped`.
    pub desired_state: String,
    /// The owner, if assigned.
    pub owner: Option<u64>,
    /// The ownership epoch (fencing token).
    pub epoch: u64,
    /// What the owner reports: `starting`, `snapshotting`, `streaming`, `paused`, `stopped`,
    /// `failed`; `unassigned` before any report.
    pub state: String,
    /// Why, for failures (value-free).
    pub reason: Option<String>,
    /// The committed processed position, in the server's text form.
    pub position: Option<String>,
}

/// Everything the REST API needs from a worker.
#[async_trait::async_trait]
pub trait ControlPlane: Send + Sync + 'static {
    /// The cluster as this node sees it.
    async fn cluster(&self) -> ClusterView;
    /// This node's health.
    async fn health(&self) -> Health;
    /// Adds a member (learner, then voter).
    async fn add_member(&self, member: AddMember) -> Result<(), ApiError>;
    /// Removes a member.
    async fn remove_member(&self, id: u64) -> Result<(), ApiError>;
    /// Names of all pipelines.
    async fn list_pipelines(&self) -> Result<Vec<String>, ApiError>;
    /// Creates a pipeline from its JSON definition.
    async fn create_pipeline(
        &self,
        definition: serde_json::Value,
    ) -> Result<PipelineView, ApiError>;
    /// One pipeline's definition.
    async fn pipeline(&self, name: &str) -> Result<PipelineView, ApiError>;
    /// One pipeline's status.
    async fn pipeline_status(&self, name: &str) -> Result<PipelineStatus, ApiError>;
    /// Sets the desired state: `running`, `paused` or `stopped`.
    async fn set_desired_state(&self, name: &str, state: &str) -> Result<(), ApiError>;
    /// Deletes a pipeline.
    async fn delete_pipeline(&self, name: &str) -> Result<(), ApiError>;
}
