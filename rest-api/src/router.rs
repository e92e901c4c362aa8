//! The REST API routes, shaped like Kafka Connect's.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, put};
use axum::{Json, Router};

use crate::api_error::ApiError;
use crate::control_plane::{AddMember, ControlPlane};

type Plane = Arc<dyn ControlPlane>;

/// All routes over `plane`.
pub fn router(plane: Plane) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/cluster", get(cluster))
        .route("/cluster/members", axum::routing::post(add_member))
        .route(
            "/cluster/members/{id}",
            axum::routing::delete(remove_member),
        )
        .route("/pipelines", get(list_pipelines).post(create_pipeline))
        .route("/pipelines/{name}", get(pipeline).delete(delete_pipeline))
        .route("/pipelines/{name}/config", get(pipeline_config))
        .route("/pipelines/{name}/status", get(pipeline_status))
        .route("/pipelines/{name}/pause", put(pause))
        .route("/pipelines/{name}/resume", put(resume))
        .route("/pipelines/{name}/stop", put(stop))
        .fallback(not_found)
        .with_state(plane)
}

/// A JSON body that failed to parse becomes a 400 naming the problem.
fn body<T>(parsed: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    parsed
        .map(|Json(v)| v)
        .map_err(|e| ApiError::bad_request("invalid_json", e.body_text()))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no_such_route", "no such route")
}

async fn health(State(p): State<Plane>) -> impl IntoResponse {
    let h = p.health().await;
    let code = if h.status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(h))
}

async fn cluster(State(p): State<Plane>) -> impl IntoResponse {
    Json(p.cluster().await)
}

async fn add_member(
    State(p): State<Plane>,
    parsed: Result<Json<AddMember>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    p.add_member(body(parsed)?).await?;
    Ok(StatusCode::CREATED)
}

async fn remove_member(
    State(p): State<Plane>,
    Path(id): Path<u64>,
) -> Result<StatusCode, ApiError> {
    p.remove_member(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_pipelines(State(p): State<Plane>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.list_pipelines().await?))
}

async fn create_pipeline(
    State(p): State<Plane>,
    parsed: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let view = p.create_pipeline(body(parsed)?).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

async fn pipeline(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline(&name).await?))
}

async fn pipeline_config(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline(&name).await?.config))
}

async fn pipeline_status(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(p.pipeline_status(&name).await?))
}

async fn set_state(p: &Plane, name: &str, state: &str) -> Result<StatusCode, ApiError> {
    p.set_desired_state(name, state).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn pause(State(p): State<Plane>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    set_state(&p, &name, "paused").await
}

async fn resume(State(p): State<Plane>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    set_state(&p, &name, "running").await
}

async fn stop(State(p): State<Plane>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    set_state(&p, &name, "stopped").await
}

async fn delete_pipeline(
    State(p): State<Plane>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    p.delete_pipeline(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}
