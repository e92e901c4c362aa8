//! Raft RPC server: the HTTP side of [`crate::raft_network`].

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use capstan_raft_store::{NodeId, TypeConfig};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::node::Raft;

/// The routes peers call: `POST /raft/append`, `/raft/vote`, `/raft/snapshot`.
pub fn router(raft: Raft) -> Router {
    Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .with_state(raft)
}

async fn append(
    State(raft): State<Raft>,
    Json(req): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> {
    Json(raft.append_entries(req).await)
}

async fn vote(
    State(raft): State<Raft>,
    Json(req): Json<VoteRequest<NodeId>>,
) -> Json<Result<VoteResponse<NodeId>, RaftError<NodeId>>> {
    Json(raft.vote(req).await)
}

async fn snapshot(
    State(raft): State<Raft>,
    Json(req): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    Json(raft.install_snapshot(req).await)
}
