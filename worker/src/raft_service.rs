//! Raft RPC server: the HTTP side of [`crate::raft_network`], over plain HTTP or, with `[tls]`
//! configured, over rustls requiring a client certificate chained to the cluster CA.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};
use capstan_raft_store::{NodeId, TypeConfig, MAX_COMMAND_BYTES};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::warn;

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

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long open connections may finish their requests once the node stops.
const DRAIN: Duration = Duration::from_secs(1);

/// The routes peers call: `POST /raft/append`, `/raft/vote`, `/raft/snapshot`.
pub fn router(raft: Raft) -> Router {
    Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .with_state(raft)
}

/// Serves `app` on `listener` until `stop` turns true: plain HTTP without `tls`, otherwise TLS
/// with `tls` (whose client verifier refuses peers without a valid certificate; each refused
/// handshake is logged with the peer's address).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app = app.layer(DefaultBodyLimit::max(BODY_LIMIT));
    let Some(config) = tls else {
        return axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    };
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        let _ = stop.wait_for(|s| *s).await;
        stopper.graceful_shutdown(Some(DRAIN));
    });
    let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(
        axum_server::tls_rustls::RustlsConfig::from_config(config),
    )
    .handshake_timeout(HANDSHAKE_TIMEOUT);
    axum_server::from_tcp(listener.into_std()?)?
        .acceptor(acceptor)
        .handle(handle)
        .accept_error_handler(|peer, e| {
            warn!(peer = ?peer, error = %e, "raft rpc connection dropped before a request (accept or tls handshake failed)");
        })
        .serve(app.into_make_service())
        .await
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
    Json(chunk): Json<SnapshotChunk>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    let req: InstallSnapshotRequest<TypeConfig> = chunk.into();
    Json(raft.install_snapshot(req).await)
}
