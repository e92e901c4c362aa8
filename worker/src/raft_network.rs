//! Raft RPC client: openraft's network traits over HTTP + JSON.
//!
//! One [`HttpRaftNetwork`] per target node. Each RPC is a `POST` to the target's Raft address
//! (see [`crate::raft_service`]) whose body is the request and whose reply is
//! `Result<response, RaftError>`. A refused or failed connection is reported as
//! `Unreachable` so openraft backs off instead of hammering a dead peer; a reply that arrives
//! too late is a `Timeout`; a reply that does not decode is a network error.
//!
//! With `[tls]` configured the calls go to `https://` with this worker's client certificate,
//! trusting only the cluster CA ([`crate::raft_tls`]); a failed handshake (a peer whose
//! certificate does not verify, or that refuses ours) is a connect error, so `Unreachable`.

use std::time::Duration;

use capstan_raft_store::{NodeId, NodeInfo, TypeConfig};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::raft_tls::{self, RaftTls};

/// Creates one [`HttpRaftNetwork`] per peer, sharing an HTTP client.
#[derive(Clone, Debug)]
pub struct HttpRaftNetworkFactory {
    client: reqwest::Client,
    source: NodeId,
    scheme: &'static str,
}

impl HttpRaftNetworkFactory {
    /// A factory whose requests give up after `connect_timeout` when a peer does not accept,
    /// speaking mutual TLS when `tls` is given.
    pub fn new(
        source: NodeId,
        connect_timeout: Duration,
        tls: Option<&RaftTls>,
    ) -> Result<Self, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(Duration::from_secs(30));
        let client = raft_tls::client_builder(tls, builder).build()?;
        Ok(HttpRaftNetworkFactory {
            client,
            source,
            scheme: raft_tls::scheme(tls),
        })
    }
}

impl RaftNetworkFactory<TypeConfig> for HttpRaftNetworkFactory {
    type Network = HttpRaftNetwork;

    async fn new_client(&mut self, target: NodeId, node: &NodeInfo) -> Self::Network {
        HttpRaftNetwork {
            client: self.client.clone(),
            source: self.source,
            target,
            base: format!("{}://{}", self.scheme, node.raft_addr),
        }
    }
}

/// Raft RPCs to one peer.
#[derive(Debug)]
pub struct HttpRaftNetwork {
    client: reqwest::Client,
    source: NodeId,
    target: NodeId,
    base: String,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, NodeInfo, RaftError<NodeId, E>>>;

impl HttpRaftNetwork {
    async fn call<Req, Resp, E>(
        &self,
        path: &str,
        req: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let ttl = option.hard_ttl();
        let sent = self
            .client
            .post(format!("{}{path}", self.base))
            .timeout(ttl)
            .json(req)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Err(RPCError::Timeout(Timeout {
                    action: openraft::RPCTypes::AppendEntries,
                    id: self.source,
                    target: self.target,
                    timeout: ttl,
                }))
            }
            Err(e) if e.is_connect() => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        let body: Result<Resp, RaftError<NodeId, E>> = response
            .json()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        body.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for HttpRaftNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.call("/raft/append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call("/raft/snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call("/raft/vote", &rpc, &option).await
    }
}
