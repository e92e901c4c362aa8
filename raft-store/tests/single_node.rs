//! A one-node openraft cluster on the RocksDB stores: commands commit and apply, fencing
//! answers travel back to the proposer, and a restarted node recovers its state.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use capstan_raft_store::type_config::Raft;
use capstan_raft_store::{
    Command, DesiredState, NodeId, NodeInfo, Response, RunnerState, SharedClusterState, SpecJson,
    Store, TypeConfig,
};
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::Config;

/// A network with no peers: a one-node cluster never sends an RPC.
struct NoPeers;

fn unreachable<E: std::error::Error>() -> RPCError<NodeId, NodeInfo, E> {
    RPCError::Unreachable(Unreachable::new(&io::Error::other("no peers in this test")))
}

impl RaftNetwork<TypeConfig> for NoPeers {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        Err(unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, NodeInfo, RaftError<NodeId, InstallSnapshotError>>,
    > {
        Err(unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, NodeInfo, RaftError<NodeId>>> {
        Err(unreachable())
    }
}

impl RaftNetworkFactory<TypeConfig> for NoPeers {
    type Network = NoPeers;

    async fn new_client(&mut self, _target: NodeId, _node: &NodeInfo) -> NoPeers {
        NoPeers
    }
}

type TestResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn start(path: &std::path::Path) -> TestResult<(Raft, SharedClusterState)> {
    // After `Raft::shutdown` openraft's state-machine task may drop its store (and the
    // RocksDB lock) a moment later, so a reopen in the same process retries briefly.
    let mut attempts = 0;
    let (log_store, state_machine) = loop {
        match Store::open(path) {
            Ok(halves) => break halves,
            Err(error) if attempts < 50 => {
                attempts += 1;
                eprintln!("reopening: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => return Err(error.into()),
        }
    };
    let state = state_machine.cluster_state();
    let config = Arc::new(Config::default().validate()?);
    let raft = Raft::new(1, config, NoPeers, log_store, state_machine).await?;
    Ok((raft, state))
}

async fn wait_for_leadership(raft: &Raft) -> TestResult<()> {
    raft.wait(Some(Duration::from_secs(10)))
        .current_leader(1, "node 1 leads")
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_commit_apply_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (raft, state) = start(dir.path()).await.unwrap();
    let node = NodeInfo {
        raft_addr: "127.0.0.1:7001".into(),
        api_addr: "127.0.0.1:8001".into(),
    };
    raft.initialize(BTreeMap::from([(1, node)])).await.unwrap();
    wait_for_leadership(&raft).await.unwrap();

    let write = |command: Command| {
        let raft = raft.clone();
        async move { raft.client_write(command).await.unwrap().data }
    };
    let created = write(Command::CreatePipeline {
        name: "orders".into(),
        spec: SpecJson::new(serde_json::json!({"source": "db"})),
        incarnation: None,
    })
    .await;
    assert_eq!(created, Response::Applied);
    let epoch = state.read(|s| s.next_epoch("orders")).unwrap();
    let assigned = write(Command::AssignOwner {
        pipeline: "orders".into(),
        node: 1,
        epoch,
    })
    .await;
    assert_eq!(assigned, Response::Applied);
    let stale = write(Command::ReportStatus {
        pipeline: "orders".into(),
        epoch: epoch - 1,
        state: RunnerState::Streaming,
        reason: None,
        detail: None,
    })
    .await;
    assert_eq!(stale, Response::StaleEpoch { current: epoch });
    assert!(stale.is_fenced());

    raft.trigger().snapshot().await.unwrap();
    raft.wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.snapshot.is_some(), "snapshot built")
        .await
        .unwrap();
    let before = state.snapshot();
    raft.shutdown().await.unwrap();
    drop(raft);

    let (raft, state) = start(dir.path()).await.unwrap();
    wait_for_leadership(&raft).await.unwrap();
    assert_eq!(state.snapshot(), before);
    let desired = raft
        .client_write(Command::SetDesiredState {
            name: "orders".into(),
            state: DesiredState::Running,
        })
        .await
        .unwrap()
        .data;
    assert_eq!(desired, Response::Applied);
    assert_eq!(
        state.read(|s| s.pipeline("orders").map(|p| p.desired_state())),
        Some(DesiredState::Running)
    );
    raft.shutdown().await.unwrap();
}
