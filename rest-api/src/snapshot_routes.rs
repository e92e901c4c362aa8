//! An operator's ad-hoc (incremental) snapshots of a pipeline's tables:
//! `POST|GET|DELETE /pipelines/{name}/snapshots`. Each handler carries its OpenAPI
//! description; `api_doc` collects them.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;

use crate::api_error::ApiError;
use crate::json_body;
use crate::router::Plane;
use crate::snapshot_views::{SnapshotChangeView, SnapshotRequest, SnapshotsView};

/// Starts an incremental snapshot of captured tables, woven into the running stream under
/// the same cursor gate as the initial snapshot (no gap, no duplicate, resumable per chunk
/// across failover); the other tables keep streaming. The owner restarts its runner (the
/// epoch grows by one) and reads the tables chunk by chunk; their records say
/// `source.snapshot: "incremental"`, op `r`.
#[utoipa::path(post, path = "/pipelines/{name}/snapshots", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    request_body = SnapshotRequest,
    responses(
        (status = 202, description = "accepted: the tables are pending", body = SnapshotChangeView),
        (status = 400, description = "malformed json or an invalid field: no tables, a name not `schema.table` or named twice, a `where` filter (not supported yet), a table the pipeline does not capture (`snapshot_table_not_captured`), does not exist (`snapshot_table_not_found`) or cannot be snapshotted (`snapshot_table_no_primary_key`, `snapshot_pk_unsupported_type`); `field` names it", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 409, description = "`snapshot_running`: a snapshot of one of the tables is pending or in progress; `pipeline_not_streamed`: the pipeline has no checkpoint yet", body = ApiError),
        (status = 413, description = "the body is over 2 MiB", body = ApiError),
        (status = 503, description = "no quorum, or the source server could not be reached to check the tables", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn request_snapshot(
    State(p): State<Plane>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let request: SnapshotRequest = json_body::parse(&json_body::read(body)?)?;
    request.check()?;
    let view = p.request_snapshot(&name, request).await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

/// The pipeline's ad-hoc snapshots: each table with its state, rows read and the server's
/// row estimate.
#[utoipa::path(get, path = "/pipelines/{name}/snapshots", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 200, description = "the ad-hoc snapshots", body = SnapshotsView),
        (status = 404, description = "no such pipeline", body = ApiError)))]
pub(crate) async fn snapshots(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline_snapshots(&name).await?))
}

/// Stops the pipeline's ad-hoc snapshots: each table still to read becomes `stopped` and
/// streams on, ungated; what was published stays. The owner restarts its runner.
#[utoipa::path(delete, path = "/pipelines/{name}/snapshots", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 200, description = "stopped", body = SnapshotChangeView),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 409, description = "`no_snapshot_running`: no ad-hoc snapshot is pending or in progress", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn stop_snapshot(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.stop_snapshot(&name).await?))
}
