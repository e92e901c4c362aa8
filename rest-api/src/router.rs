//! The REST API's routes, shaped like Kafka Connect's, behind the bearer-token check for
//! mutating requests.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post, put};
use axum::Router;

use crate::api_error::ApiError;
use crate::api_token::{require_token, ApiAccess};
use crate::cluster_routes as c;
use crate::control_plane::ControlPlane;
use crate::json_body;
use crate::pipeline_routes as p;
use crate::snapshot_routes as s;
use crate::status_page;

/// The control plane handlers talk to.
pub(crate) type Plane = Arc<dyn ControlPlane>;

/// All routes over `plane`. With a write token, POST, PUT and DELETE need
/// `Authorization: Bearer <token>`; with a read token, so do reads outside the open paths
/// (`/health`, `/`, `/openapi.json`).
pub fn router(plane: Arc<dyn ControlPlane>, access: impl Into<ApiAccess>) -> Router {
    let access: ApiAccess = access.into();
    let guarded = access.token.is_some();
    let reads_guarded = access.read_token.is_some();
    Router::new()
        .route("/", get(status_page::status_page))
        .route("/health", get(c::health))
        .route("/cluster", get(c::cluster))
        .route("/cluster/members", post(c::add_member))
        .route(
            "/cluster/members/{id}",
            axum::routing::delete(c::remove_member),
        )
        .route("/cluster/rebalance", post(c::rebalance))
        .route("/metrics", get(c::metrics))
        .route(
            "/openapi.json",
            get(move || c::openapi(guarded, reads_guarded)),
        )
        .route(
            "/pipelines",
            get(p::list_pipelines).post(p::create_pipeline),
        )
        // a static segment wins over `{name}`: the pipeline named `validate` stays readable
        // and deletable on this path
        .route(
            "/pipelines/validate",
            post(p::validate_pipeline)
                .get(p::pipeline_named_validate)
                .delete(p::delete_pipeline_named_validate),
        )
        .route(
            "/pipelines/{name}",
            get(p::pipeline).delete(p::delete_pipeline),
        )
        .route(
            "/pipelines/{name}/config",
            get(p::pipeline_config).put(p::put_pipeline_config),
        )
        .route("/pipelines/{name}/status", get(p::pipeline_status))
        .route("/pipelines/{name}/pause", put(p::pause))
        .route("/pipelines/{name}/resume", put(p::resume))
        .route("/pipelines/{name}/stop", put(p::stop))
        .route("/pipelines/{name}/restart", post(p::restart))
        .route("/pipelines/{name}/move", post(p::move_pipeline))
        .route(
            "/pipelines/{name}/offsets",
            get(p::offsets).delete(p::reset_offsets),
        )
        .route(
            "/pipelines/{name}/snapshots",
            get(s::snapshots)
                .post(s::request_snapshot)
                .delete(s::stop_snapshot),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(plane)
        .layer(middleware::from_fn_with_state(access, require_token))
        .layer(DefaultBodyLimit::max(json_body::BODY_LIMIT))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no_such_route", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}
