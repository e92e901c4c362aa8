//! capstan's REST API: an axum router over a [`ControlPlane`] that the worker implements.
//! Errors are JSON `{error_code, message}` with 400/404/409/503 statuses.

mod api_error;
mod control_plane;
mod router;

pub use api_error::ApiError;
pub use control_plane::{
    AddMember, ClusterView, ControlPlane, Health, MemberView, PipelineStatus, PipelineView,
};
pub use router::router;
