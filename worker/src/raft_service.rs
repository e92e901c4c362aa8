//! Raft RPC server: the HTTP side of [`crate::raft_network`], served by
//! [`crate::http_server::serve`] over plain HTTP or, with `[tls]` configured, over rustls
//! requiring a client certificate chained to the cluster CA.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use capstan_raft_store::{NodeId, TypeConfig, MAX_COMMAND_BYTES};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use std::sync::Arc;
use std::time::Instant;

use crate::leader_contact::LeaderContact;
use crate::node::Raft;
use crate::raft_network::APPEND_BYTES;
use crate::snapshot_chunk::SnapshotChunk;

/// The state a snapshot chunk carries (openraft's `snapshot_max_chunk_size`): 4 MiB, about
/// 5.4 MiB as base64 on the wire ([`SnapshotChunk`]).
pub const SNAPSHOT_CHUNK_BYTES: u64 = 4 << 20;

/// The largest request body the Raft port accepts: 16 MiB. An append carries at most
/// [`APPEND_BYTES`] of entries or one entry of at most [`MAX_COMMAND_BYTES`]; a snapshot chunk
/// is [`SNAPSHOT_CHUNK_BYTES`] as base64; a forwarded write one command.
pub const BODY_LIMIT: usize = 16 << 20;

const _: () = assert!(MAX_COMMAND_BYTES + APPEND_BYTES + (1 << 20) < BODY_LIMIT);
const _: () = assert!(SNAPSHOT_CHUNK_BYTES as usize / 3 * 4 + (1 << 20) < BODY_LIMIT);

/// The routes peers call: `POST /raft/append`, `/raft/vote`, `/raft/snapshot`. An append this
/// node accepts is noted in `contact`.
pub fn router(raft: Raft, contact: Arc<LeaderContact>) -> Router {
    Router::new()
        .route("/raft/append", post(append))
        .with_state((raft.clone(), contact))
        .merge(
            Router::new()
                .route("/raft/vote", post(vote))
                .route("/raft/snapshot", post(snapshot))
                .with_state(raft),
        )
}

async fn append(
    State((raft, contact)): State<(Raft, Arc<LeaderContact>)>,
    Json(req): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> {
    let answer = raft.append_entries(req).await;
    // a higher vote refuses the sender's leadership; anything else accepted it
    if matches!(&answer, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_))) {
        contact.heard(Instant::now());
    }
    Json(answer)
}

async fn vote(
    State(raft): State<Raft>,
    Json(req): Json<VoteRequest<NodeId>>,
) -> Json<Result<VoteResponse<NodeId>, RaftError<NodeId>>> {
    Json(raft.vote(req).await)
}

async fn snapshot(
    State(raft): State<Raft>,
    Json(chunk): Json<SnapshotChunk>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    let req: InstallSnapshotRequest<TypeConfig> = chunk.into();
    Json(raft.install_snapshot(req).await)
}
