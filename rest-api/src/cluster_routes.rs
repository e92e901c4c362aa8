//! The cluster, health, metrics and API-description endpoints.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use utoipa::OpenApi;

use crate::api_doc::ApiDoc;
use crate::api_error::ApiError;
use crate::api_token::OPEN_PATHS;
use crate::cluster_views::{AddMember, ClusterView, Health, RebalanceRequest, RebalanceView};
use crate::json_body;
use crate::router::Plane;

/// The content type of the OpenMetrics text format.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// This node's health: 200 `ok` with a leader and a valid lease, 503 `degraded` otherwise.
#[utoipa::path(get, path = "/health", tag = "cluster",
    responses(
        (status = 200, description = "ok", body = Health),
        (status = 503, description = "degraded", body = Health)))]
pub(crate) async fn health(State(p): State<Plane>) -> impl IntoResponse {
    let h = p.health().await;
    let code = if h.status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(h))
}

/// Members, leader, term and per-node health as this node sees them.
#[utoipa::path(get, path = "/cluster", tag = "cluster",
    responses((status = 200, description = "the cluster", body = ClusterView)))]
pub(crate) async fn cluster(State(p): State<Plane>) -> impl IntoResponse {
    Json(p.cluster().await)
}

/// Adds a worker: first a learner that catches up, then a voter.
#[utoipa::path(post, path = "/cluster/members", tag = "cluster",
    request_body = AddMember,
    responses(
        (status = 201, description = "added"),
        (status = 400, description = "an invalid field", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 409, description = "the id or raft address is another member's, or the raft address does not answer (`member_id_in_use`, `member_address_in_use`, `member_unreachable`)", body = ApiError),
        (status = 413, description = "the body is over 2 MiB", body = ApiError),
        (status = 503, description = "no quorum, or the new member is a learner still catching up (`member_catching_up`)", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn add_member(
    State(p): State<Plane>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    p.add_member(json_body::parse(&json_body::read(body)?)?)
        .await?;
    Ok(StatusCode::CREATED)
}

/// Removes a worker from the cluster.
#[utoipa::path(delete, path = "/cluster/members/{id}", tag = "cluster",
    params(("id" = u64, Path, description = "node id")),
    responses(
        (status = 204, description = "removed"),
        (status = 400, description = "the id is not a number", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 404, description = "no such member", body = ApiError),
        (status = 409, description = "the member is the Raft leader (`member_is_leader`), or removing it would leave no live quorum (`would_lose_quorum`)", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn remove_member(
    State(p): State<Plane>,
    id: Result<Path<u64>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(id) = id.map_err(|_| {
        ApiError::invalid_field("invalid_request", "id", "must be a positive integer")
    })?;
    p.remove_member(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Plans (and with `{"dry_run": false}` starts) the fewest pipeline moves that leave the live
/// workers' loads within one of each other. Nothing moves by itself: this is the operator's
/// lever after a worker joins or comes back.
#[utoipa::path(post, path = "/cluster/rebalance", tag = "cluster",
    request_body(content = Option<RebalanceRequest>, description = "optional; an empty body is a dry run"),
    responses(
        (status = 200, description = "the plan (dry run): nothing was started", body = RebalanceView),
        (status = 202, description = "the planned moves were started", body = RebalanceView),
        (status = 400, description = "malformed json or an invalid field", body = ApiError),
        (status = 401, description = "missing or wrong bearer token", body = ApiError),
        (status = 413, description = "the body is over 2 MiB", body = ApiError),
        (status = 503, description = "no quorum", body = ApiError)),
    security(("bearer" = [])))]
pub(crate) async fn rebalance(
    State(p): State<Plane>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let bytes = json_body::read(body)?;
    // no body, or `null`: a dry run
    let request = if bytes.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        json_body::parse::<Option<RebalanceRequest>>(&bytes)?
    };
    let request = request.unwrap_or_else(RebalanceRequest::default_dry_run);
    let view: RebalanceView = p.rebalance(request.dry_run).await?;
    let status = if view.dry_run {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(view)))
}

/// Prometheus metrics (OpenMetrics text).
#[utoipa::path(get, path = "/metrics", tag = "cluster",
    responses((status = 200, description = "metrics in the OpenMetrics text format",
        content_type = "application/openmetrics-text", body = String)))]
pub(crate) async fn metrics(State(p): State<Plane>) -> Result<impl IntoResponse, ApiError> {
    let text = p.metrics().await?;
    Ok(([(header::CONTENT_TYPE, OPENMETRICS)], text))
}

/// This API's OpenAPI 3.1 description.
#[utoipa::path(get, path = "/openapi.json", tag = "cluster",
    responses((status = 200, description = "the OpenAPI document", body = Object)))]
pub(crate) async fn openapi(
    guarded: bool,
    reads_guarded: bool,
) -> Result<impl IntoResponse, ApiError> {
    let mut doc = ApiDoc::openapi();
    if !guarded {
        without_security(&mut doc);
    } else if reads_guarded {
        with_read_security(&mut doc);
    }
    let text = doc.to_pretty_json().map_err(|_| {
        ApiError::internal(
            "openapi_failed",
            "the openapi document could not be rendered",
        )
    })?;
    Ok(([(header::CONTENT_TYPE, "application/json")], text))
}

/// With a read token, every read outside the open paths needs the bearer token too and may
/// answer 401: each such `GET` gets the security requirement and the 401 answer the mutating
/// operations already declare.
fn with_read_security(doc: &mut utoipa::openapi::OpenApi) {
    let declared = doc.paths.paths.values().find_map(|item| {
        let op = item.post.as_ref()?;
        Some((
            op.security.clone()?,
            op.responses.responses.get("401")?.clone(),
        ))
    });
    let Some((security, unauthorized)) = declared else {
        return;
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        if OPEN_PATHS.contains(&path.as_str()) {
            continue;
        }
        if let Some(op) = item.get.as_mut() {
            op.security = Some(security.clone());
            op.responses
                .responses
                .insert("401".to_string(), unauthorized.clone());
        }
    }
}

/// Without a configured token nothing asks for one: the document says so (no `bearer` scheme,
/// no operation requiring it), so a client generated from it sends none.
fn without_security(doc: &mut utoipa::openapi::OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            op.security = None;
        }
    }
    if let Some(components) = doc.components.as_mut() {
        components.security_schemes.remove("bearer");
    }
}
