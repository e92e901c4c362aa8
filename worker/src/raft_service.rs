//! Raft RPC server: the HTTP side of [`crate::raft_network`], over plain HTTP or, with `[tls]`
//! configured, over rustls requiring a client certificate chained to the cluster CA.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use capstan_raft_store::{NodeId, TypeConfig};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::warn;

use crate::node::Raft;

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
    Json(req): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>> {
    Json(raft.install_snapshot(req).await)
}
