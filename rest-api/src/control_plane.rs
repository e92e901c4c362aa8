//! The seam between the REST API and a worker: everything the API can ask or tell.
//!
//! The worker implements [`ControlPlane`]; the API's own tests use a fake. Every method is
//! value-free: no row values and no secrets cross this boundary in either direction.

use crate::api_error::ApiError;
use crate::cluster_views::{AddMember, ClusterView, Health, RebalanceView};
use crate::pipeline_views::{
    MoveView, PipelineOffsets, PipelineStatus, PipelineValidation, PipelineView, RestartView,
};
use crate::snapshot_views::{SnapshotChangeView, SnapshotRequest, SnapshotsView};

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
    /// Checks a definition exactly as [`ControlPlane::create_pipeline`] does (the same errors),
    /// without any I/O and writing nothing. Whether the name is taken is not checked: a valid
    /// definition may be for a create or for an update.
    async fn validate_pipeline(
        &self,
        definition: serde_json::Value,
    ) -> Result<PipelineValidation, ApiError>;
    /// Replaces a pipeline's definition (validated like a create); its runner restarts. The
    /// body's `name`, when present, equals `name`.
    async fn update_pipeline_config(
        &self,
        name: &str,
        definition: serde_json::Value,
    ) -> Result<PipelineView, ApiError>;
    /// One pipeline's definition.
    async fn pipeline(&self, name: &str) -> Result<PipelineView, ApiError>;
    /// One pipeline's status.
    async fn pipeline_status(&self, name: &str) -> Result<PipelineStatus, ApiError>;
    /// Sets the desired state: `running`, `paused` or `stopped`.
    async fn set_desired_state(&self, name: &str, state: &str) -> Result<(), ApiError>;
    /// Starts a new incarnation of the pipeline on its owner (clearing a failure).
    async fn restart_pipeline(&self, name: &str) -> Result<RestartView, ApiError>;
    /// Moves a pipeline to worker `to` (a live member): its owner stops the runner and gives
    /// it up, then `to` takes it with the next epoch. `to` = the owner cancels a pending move.
    async fn move_pipeline(&self, name: &str, to: u64) -> Result<MoveView, ApiError>;
    /// The moves that balance the pipelines over the live workers; started unless `dry_run`.
    async fn rebalance(&self, dry_run: bool) -> Result<RebalanceView, ApiError>;
    /// The committed position and snapshot progress.
    async fn pipeline_offsets(&self, name: &str) -> Result<PipelineOffsets, ApiError>;
    /// Starts an ad-hoc (incremental) snapshot of captured tables; `request` passed
    /// [`SnapshotRequest::check`]. The worker checks each table is captured, exists and has a
    /// usable key (400 naming it), then writes the request (404, 409 `snapshot_running`,
    /// `pipeline_not_streamed`).
    async fn request_snapshot(
        &self,
        name: &str,
        request: SnapshotRequest,
    ) -> Result<SnapshotChangeView, ApiError>;
    /// The pipeline's ad-hoc snapshots with their progress.
    async fn pipeline_snapshots(&self, name: &str) -> Result<SnapshotsView, ApiError>;
    /// Stops the pipeline's ad-hoc snapshots (409 `no_snapshot_running` when none runs).
    async fn stop_snapshot(&self, name: &str) -> Result<SnapshotChangeView, ApiError>;
    /// Forgets the committed position and snapshot progress; only while stopped.
    async fn reset_offsets(&self, name: &str) -> Result<(), ApiError>;
    /// Deletes a pipeline.
    async fn delete_pipeline(&self, name: &str) -> Result<(), ApiError>;
    /// The node's metrics in the OpenMetrics text format (which Prometheus reads).
    async fn metrics(&self) -> Result<String, ApiError>;
}
