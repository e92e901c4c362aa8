//! The pipeline endpoints, shaped like Kafka Connect's `/connectors`. Each handler carries its
//! OpenAPI description; `api_doc` collects them.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;

use crate::api_error::ApiError;
use crate::json_body;
use crate::pipeline_views::{
    MoveRequest, MoveView, PipelineOffsets, PipelineStatus, PipelineValidation, PipelineView,
    RestartView,
};
use crate::router::Plane;

/// All pipeline names, sorted.
#[utoipa::path(get, path = "/pipelines", tag = "pipelines",
    responses((status = 200, description = "pipeline names", body = Vec<String>)))]
pub(crate) async fn list_pipelines(State(p): State<Plane>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.list_pipelines().await?))
}

/// Creates a pipeline (desired state `stopped`; resume it to run).
#[utoipa::path(post, path = "/pipelines", tag = "pipelines",
    request_body(content = Object, description = "the pipeline definition (see docs/rest-api.md)"),
    responses(
        (status = 201, description = "created", body = PipelineView),
        (status = 400, description = "malformed json or an invalid field", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 409, description = "a pipeline of that name exists", body = ApiError),
        (status = 413, description = "the body is over 2 MiB, or the definition over the 1 MiB raft entry limit", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn create_pipeline(
    State(p): State<Plane>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let view = p
        .create_pipeline(json_body::parse_value(&json_body::read(body)?)?)
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// A dry run of a create: the definition is parsed and validated exactly as `POST /pipelines`
/// does, with the same errors, and nothing is written. Whether the name is taken is not
/// checked (a valid definition may be for a create or for `PUT …/config`).
#[utoipa::path(post, path = "/pipelines/validate", tag = "pipelines",
    request_body(content = Object, description = "the pipeline definition (see docs/rest-api.md)"),
    responses(
        (status = 200, description = "valid: a create would accept it", body = PipelineValidation),
        (status = 400, description = "malformed json or an invalid field", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 413, description = "the body is over 2 MiB, or the definition over the 1 MiB raft entry limit", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn validate_pipeline(
    State(p): State<Plane>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let validation = p
        .validate_pipeline(json_body::parse_value(&json_body::read(body)?)?)
        .await?;
    Ok(Json(validation))
}

/// The name `POST /pipelines/validate` shares its path with.
const VALIDATE: &str = "validate";

/// The pipeline named `validate`, whose path `POST /pipelines/validate` shares: the same
/// answer as `GET /pipelines/{name}`.
#[utoipa::path(get, path = "/pipelines/validate", tag = "pipelines",
    responses(
        (status = 200, description = "the pipeline named `validate`", body = PipelineView),
        (status = 404, description = "no pipeline named `validate`", body = ApiError)))]
pub(crate) async fn pipeline_named_validate(
    state: State<Plane>,
) -> Result<impl IntoResponse, ApiError> {
    pipeline(state, Path(VALIDATE.to_string())).await
}

/// Deletes the pipeline named `validate`, whose path `POST /pipelines/validate` shares: the
/// same as `DELETE /pipelines/{name}`.
#[utoipa::path(delete, path = "/pipelines/validate", tag = "pipelines",
    responses(
        (status = 204, description = "deleted"),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no pipeline named `validate`", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn delete_pipeline_named_validate(
    state: State<Plane>,
) -> Result<StatusCode, ApiError> {
    delete_pipeline(state, Path(VALIDATE.to_string())).await
}

/// One pipeline: its name and definition (secrets redacted).
#[utoipa::path(get, path = "/pipelines/{name}", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 200, description = "the pipeline", body = PipelineView),
        (status = 404, description = "no such pipeline", body = ApiError)))]
pub(crate) async fn pipeline(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline(&name).await?))
}

/// The definition alone (secrets redacted).
#[utoipa::path(get, path = "/pipelines/{name}/config", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 200, description = "the definition", body = Object),
        (status = 404, description = "no such pipeline", body = ApiError)))]
pub(crate) async fn pipeline_config(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline(&name).await?.config))
}

/// Replaces the definition, validated like a create; the runner restarts with it.
#[utoipa::path(put, path = "/pipelines/{name}/config", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    request_body(content = Object, description = "the full definition; `name` absent or equal"),
    responses(
        (status = 200, description = "replaced", body = PipelineView),
        (status = 400, description = "malformed json, an invalid field or another name", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 413, description = "the body is over 2 MiB, or the definition over the 1 MiB raft entry limit", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn put_pipeline_config(
    State(p): State<Plane>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let mut definition = json_body::parse_value(&json_body::read(body)?)?;
    if let Some(fields) = definition.as_object_mut() {
        match fields.get("name") {
            None => {
                fields.insert("name".into(), serde_json::Value::String(name.clone()));
            }
            Some(given) if given.as_str() == Some(name.as_str()) => {}
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "invalid_pipeline",
                    "name",
                    "must equal the pipeline name in the path, or be absent (a pipeline cannot be renamed)",
                ))
            }
        }
    }
    Ok(Json(p.update_pipeline_config(&name, definition).await?))
}

/// Owner, epoch, state, failure reason and committed position.
#[utoipa::path(get, path = "/pipelines/{name}/status", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 200, description = "the status", body = PipelineStatus),
        (status = 404, description = "no such pipeline", body = ApiError)))]
pub(crate) async fn pipeline_status(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline_status(&name).await?))
}

async fn set_state(p: &Plane, name: &str, state: &str) -> Result<StatusCode, ApiError> {
    p.set_desired_state(name, state).await?;
    Ok(StatusCode::ACCEPTED)
}

/// Desired state `paused`: the owner keeps the pipeline and publishes nothing.
#[utoipa::path(put, path = "/pipelines/{name}/pause", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 202, description = "accepted; the owner acts within a second"),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn pause(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_state(&p, &name, "paused").await
}

/// Desired state `running`.
#[utoipa::path(put, path = "/pipelines/{name}/resume", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 202, description = "accepted; an owner is assigned and starts"),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn resume(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_state(&p, &name, "running").await
}

/// Desired state `stopped`: nothing runs; offsets may then be reset.
#[utoipa::path(put, path = "/pipelines/{name}/stop", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 202, description = "accepted; the runner stops within a second"),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn stop(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_state(&p, &name, "stopped").await
}

/// A new incarnation on the current owner (the epoch is bumped), which clears a failure.
#[utoipa::path(post, path = "/pipelines/{name}/restart", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 202, description = "accepted", body = RestartView),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 409, description = "ownership changed meanwhile; retry", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn restart(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let view = p.restart_pipeline(&name).await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

/// Moves the pipeline to another worker, cooperatively: its owner stops the runner and, once
/// it has ended, gives the pipeline up; the scheduler then assigns it to `to` with the next
/// epoch. Nothing is forced: while the owner has not released it, the move stays pending
/// (`move_to` in the status). `to` = the current owner cancels a pending move.
#[utoipa::path(post, path = "/pipelines/{name}/move", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    request_body = MoveRequest,
    responses(
        (status = 200, description = "nothing pending: the pipeline is already owned by `to` (a pending move is cancelled)", body = MoveView),
        (status = 202, description = "the move is pending", body = MoveView),
        (status = 400, description = "malformed json or an invalid field", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline (`unknown_pipeline`), or no member with the id `to` (`unknown_member`)", body = ApiError),
        (status = 409, description = "`member_not_live`: `to` is a member whose lease is not live", body = ApiError),
        (status = 413, description = "the body is over 2 MiB", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn move_pipeline(
    State(p): State<Plane>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let request: MoveRequest = json_body::parse(&json_body::read(body)?)?;
    let view = p.move_pipeline(&name, request.to).await?;
    let status = if view.move_to.is_some() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

/// The committed position and snapshot progress.
#[utoipa::path(get, path = "/pipelines/{name}/offsets", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 200, description = "the offsets", body = PipelineOffsets),
        (status = 404, description = "no such pipeline", body = ApiError)))]
pub(crate) async fn offsets(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline_offsets(&name).await?))
}

/// Forgets the position and snapshot progress; the pipeline must be stopped.
#[utoipa::path(delete, path = "/pipelines/{name}/offsets", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 204, description = "reset"),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 409, description = "`pipeline_not_stopped`: stop it first", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn reset_offsets(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    p.reset_offsets(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes the pipeline with its offsets and status.
#[utoipa::path(delete, path = "/pipelines/{name}", tag = "pipelines",
    params(("name" = String, Path, description = "pipeline name")),
    responses(
        (status = 204, description = "deleted"),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such pipeline", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn delete_pipeline(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    p.delete_pipeline(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}
