//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` attributes and the
//! views' `ToSchema` derives (`GET /openapi.json`).

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::api_error::ApiError;
use crate::cluster_routes;
use crate::cluster_views::{
    AddMember, ClusterView, Health, MemberView, PlannedMove, RebalanceRequest, RebalanceView,
    WorkerLoad,
};
use crate::pipeline_routes;
use crate::pipeline_views::{
    MoveRequest, MoveView, PipelineOffsets, PipelineStatus, PipelineValidation, PipelineView,
    RestartView, TableOffset,
};
use crate::snapshot_routes;
use crate::snapshot_views::{SnapshotChangeView, SnapshotRequest, SnapshotsView};
use crate::status_page;

/// capstan's REST API.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "capstan", description = "change data capture from MySQL and MariaDB to Kafka: the worker REST API"),
    paths(
        status_page::status_page,
        cluster_routes::health,
        cluster_routes::cluster,
        cluster_routes::add_member,
        cluster_routes::remove_member,
        cluster_routes::rebalance,
        cluster_routes::metrics,
        cluster_routes::openapi,
        pipeline_routes::list_pipelines,
        pipeline_routes::create_pipeline,
        pipeline_routes::validate_pipeline,
        pipeline_routes::pipeline_named_validate,
        pipeline_routes::delete_pipeline_named_validate,
        pipeline_routes::pipeline,
        pipeline_routes::delete_pipeline,
        pipeline_routes::pipeline_config,
        pipeline_routes::put_pipeline_config,
        pipeline_routes::pipeline_status,
        pipeline_routes::pause,
        pipeline_routes::resume,
        pipeline_routes::stop,
        pipeline_routes::restart,
        pipeline_routes::move_pipeline,
        pipeline_routes::offsets,
        pipeline_routes::reset_offsets,
        snapshot_routes::request_snapshot,
        snapshot_routes::snapshots,
        snapshot_routes::stop_snapshot,
    ),
    components(schemas(
        ApiError, AddMember, ClusterView, Health, MemberView, MoveRequest, MoveView,
        PipelineOffsets, PipelineStatus, PipelineValidation, PipelineView, PlannedMove,
        RebalanceRequest, RebalanceView, RestartView, SnapshotChangeView, SnapshotRequest,
        SnapshotsView, TableOffset, WorkerLoad
    )),
    modifiers(&BearerScheme),
    tags(
        (name = "pipelines", description = "pipeline definitions, state and offsets"),
        (name = "cluster", description = "membership, health, metrics")
    )
)]
pub struct ApiDoc;

/// Declares the `bearer` security scheme the mutating endpoints name.
#[derive(Debug)]
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}
