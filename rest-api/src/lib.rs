//! capstan's REST API: an axum router over a [`ControlPlane`] that the worker implements.
//! Errors are JSON `{error_code, message}` (plus `field` for bad input) with 400/401/404/409/503
//! statuses; a configured [`ApiToken`] guards the mutating endpoints; `GET /openapi.json`
//! describes it all.

mod api_doc;
mod api_error;
mod api_token;
mod cluster_routes;
mod cluster_views;
mod control_plane;
mod json_body;
mod pipeline_routes;
mod pipeline_views;
mod router;
mod snapshot_routes;
mod snapshot_views;
mod status_page;

#[cfg(test)]
mod tests;

pub use api_doc::ApiDoc;
pub use api_error::ApiError;
pub use api_token::{ApiAccess, ApiToken, ApiTokenError};
pub use cluster_views::{
    AddMember, ClusterView, Health, MemberView, PlannedMove, RebalanceRequest, RebalanceView,
    WorkerLoad,
};
pub use control_plane::ControlPlane;
pub use json_body::redact as redact_serde_message;
pub use pipeline_views::{
    MoveRequest, MoveView, PipelineOffsets, PipelineStatus, PipelineValidation, PipelineView,
    RestartView, TableOffset,
};
pub use router::router;
pub use snapshot_views::{SnapshotChangeView, SnapshotRequest, SnapshotsView, MAX_SNAPSHOT_TABLES};
