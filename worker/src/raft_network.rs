//! Raft RPC client: openraft's network traits over HTTP + JSON.
//!
//! One [`HttpRaftNetwork`] per target node. Each RPC is a `POST` to the target's Raft address
//! (see [`crate::raft_service`]) whose body is the request and whose reply is
//! `Result<response, RaftError>`. A refused or failed connection is reported as
//! `Unreachable` so openraft backs off instead of hammering a dead peer; a reply that arrives
//! too late is a `Timeout`; a reply that does not decode is a network error.
//!
//! Snapshot chunks travel with their bytes as base64 ([`SnapshotChunk`]).
//!
//! With `[tls]` configured the calls go to `https://` with this worker's client certificate,
//! trusting only the cluster CA ([`crate::raft_tls`]); a failed handshake (a peer whose
//! certificate does not verify, or that refuses ours) is a connect error, so `Unreachable`.

use std::time::Duration;

use capstan_raft_store::{json_len, NodeId, NodeInfo, TypeConfig};
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
use crate::snapshot_chunk::SnapshotChunk;

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

/// The most entry bytes (as JSON) one append carries, unless its first entry alone is larger
/// (a command is at most [`capstan_raft_store::MAX_COMMAND_BYTES`]). openraft 0.9 waits one
/// heartbeat interval for an append's answer, then retries it: an append of many large
/// entries (pipeline definitions listing thousands of tables) that cannot be encoded, sent,
/// decoded and written in that time would be retried for ever while the follower, hearing
/// nothing, calls elections.
pub const APPEND_BYTES: usize = 256 << 10;

/// `rpc` cut to the entries that fit in `budget` bytes (the first always does), with the log
/// id of the last entry kept when some were cut: the answer to the cut request is then a
/// partial success up to it. The leader's commit index sent is clamped to that entry, as
/// the follower has nothing beyond it from this request.
fn bounded_append(
    mut rpc: AppendEntriesRequest<TypeConfig>,
    budget: usize,
) -> (
    AppendEntriesRequest<TypeConfig>,
    Option<openraft::LogId<NodeId>>,
) {
    let mut bytes = 0;
    let mut keep = 0;
    for entry in &rpc.entries {
        bytes += json_len(entry);
        if keep > 0 && bytes > budget {
            break;
        }
        keep += 1;
    }
    if keep == rpc.entries.len() {
        return (rpc, None);
    }
    rpc.entries.truncate(keep);
    let last = rpc.entries.last().map(|e| e.log_id);
    if let (Some(last), Some(commit)) = (last, rpc.leader_commit) {
        if commit.index > last.index {
            rpc.leader_commit = Some(last);
        }
    }
    (rpc, last)
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, NodeInfo, RaftError<NodeId, E>>>;

impl HttpRaftNetwork {
    async fn call<Req, Resp, E>(
        &self,
        action: openraft::RPCTypes,
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
                    action,
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
        // openraft gives an append one heartbeat interval: send a prefix of at most
        // APPEND_BYTES (one entry at least) and report how far it got
        let (rpc, cut_at) = bounded_append(rpc, APPEND_BYTES);
        let answer = self
            .call(
                openraft::RPCTypes::AppendEntries,
                "/raft/append",
                &rpc,
                &option,
            )
            .await?;
        Ok(match (answer, cut_at) {
            (AppendEntriesResponse::Success, Some(last)) => {
                AppendEntriesResponse::PartialSuccess(Some(last))
            }
            (other, _) => other,
        })
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call(
            openraft::RPCTypes::InstallSnapshot,
            "/raft/snapshot",
            &SnapshotChunk::from(rpc),
            &option,
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call(openraft::RPCTypes::Vote, "/raft/vote", &rpc, &option)
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use capstan_raft_store::{Command, SpecJson};
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

    fn log_id(index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(2, 1), index)
    }

    /// Entries 1..=n, each a pipeline definition of about `bytes` bytes.
    fn request(n: u64, bytes: usize, commit: u64) -> AppendEntriesRequest<TypeConfig> {
        let entries = (1..=n)
            .map(|i| Entry {
                log_id: log_id(i),
                payload: EntryPayload::Normal(Command::CreatePipeline {
                    name: format!("p{i}"),
                    spec: SpecJson::new(serde_json::json!({"pad": "x".repeat(bytes)})),
                    incarnation: None,
                }),
            })
            .collect();
        AppendEntriesRequest {
            vote: Vote::new_committed(2, 1),
            prev_log_id: None,
            leader_commit: Some(log_id(commit)),
            entries,
        }
    }

    #[test]
    fn small_appends_go_whole() {
        let (rpc, cut) = bounded_append(request(64, 300, 60), APPEND_BYTES);
        assert_eq!(cut, None);
        assert_eq!(rpc.entries.len(), 64);
        assert_eq!(rpc.leader_commit, Some(log_id(60)));
    }

    #[test]
    fn large_entries_go_a_few_at_a_time_and_commit_only_what_went() {
        // 100 KiB each: two fit in 256 KiB
        let (rpc, cut) = bounded_append(request(10, 100 << 10, 9), APPEND_BYTES);
        assert_eq!(rpc.entries.len(), 2);
        assert_eq!(cut, Some(log_id(2)));
        assert_eq!(rpc.leader_commit, Some(log_id(2)));
        assert!(json_len(&rpc) < APPEND_BYTES + 1024);
        // a commit index below the cut is kept
        let (rpc, _) = bounded_append(request(10, 100 << 10, 1), APPEND_BYTES);
        assert_eq!(rpc.leader_commit, Some(log_id(1)));
    }

    #[test]
    fn an_entry_over_the_budget_goes_alone() {
        let (rpc, cut) = bounded_append(request(3, 600 << 10, 0), APPEND_BYTES);
        assert_eq!(rpc.entries.len(), 1);
        assert_eq!(cut, Some(log_id(1)));
        let (rpc, cut) = bounded_append(request(1, 600 << 10, 0), APPEND_BYTES);
        assert_eq!((rpc.entries.len(), cut), (1, None));
    }
}
