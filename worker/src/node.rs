//! One worker node: its Raft instance over RocksDB, the Raft RPC server, the leader's
//! scheduler loop and the lease renewal loop. Wiring only; the decisions live in
//! [`crate::scheduler`], [`crate::lease_tracker`], [`crate::lease_quorum`] and
//! [`crate::owner_lease`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};
use capstan_raft_store::{
    Command, NodeId, NodeInfo, Response, SharedClusterState, Store, MAX_COMMAND_BYTES,
};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::http_server;
use crate::leader_contact::LeaderContact;
use crate::lease_quorum::ExpiryQuorum;
use crate::lease_service;
use crate::lease_tracker::LeaseTracker;
use crate::owner_lease::OwnerLease;
use crate::raft_network::HttpRaftNetworkFactory;
use crate::raft_service;
use crate::raft_tls::{self, RaftTls, TlsSetupError};
use crate::scheduler;
use crate::worker_config::CheckedWorkerConfig;

/// The Raft handle of a worker.
pub type Raft = capstan_raft_store::type_config::Raft;

/// Scheduling rounds closer together than this are coalesced: a burst of applied entries
/// (checkpoint commits) costs one round, and a renewal is observed at most this late.
const MIN_ROUND_GAP: Duration = Duration::from_millis(20);

/// A scheduling round runs at least this often even when nothing is applied and no lease is
/// about to run out.
const MAX_ROUND_GAP: Duration = Duration::from_millis(200);

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The data directory or the RocksDB store could not be opened.
    #[error("cannot open the store: {0}")]
    Store(String),
    /// openraft refused the configuration or failed to start.
    #[error("raft failed to start: {0}")]
    Raft(String),
    /// The `[tls]` files could not be loaded.
    #[error("{0}")]
    Tls(#[from] TlsSetupError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {reason}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        reason: String,
    },
}

impl NodeError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            NodeError::Store(_) => "store_open_failed",
            NodeError::Raft(_) => "raft_start_failed",
            NodeError::Tls(e) => e.code(),
            NodeError::Bind { .. } => "listen_failed",
        }
    }
}

/// Why a replicated write did not happen.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "error_code", content = "message", rename_all = "snake_case")]
pub enum WriteError {
    /// No leader is known (an election is running, or there is no quorum).
    #[error("no raft leader is known; the cluster may lack a quorum")]
    NoLeader,
    /// The leader is known but could not be reached.
    #[error("the raft leader could not be reached: {0}")]
    LeaderUnreachable(String),
    /// The node that was asked is not the leader (a forwarded write raced an election).
    #[error("this node is not the raft leader")]
    NotLeader,
    /// The write did not commit in time: no quorum acknowledged it (it may still commit
    /// later, so a retry must be idempotent, as every capstan command is).
    #[error("the write was not committed in time; the cluster may lack a quorum")]
    NoQuorum,
    /// A new member was added as a learner but has not caught up in time; it is not a voter
    /// yet.
    #[error("{0}")]
    MemberCatchingUp(String),
    /// The command is larger than a Raft entry may be ([`MAX_COMMAND_BYTES`]); the message
    /// gives both sizes. Refused before it reaches the log, so replication never carries an
    /// entry a peer would refuse.
    #[error("{0}")]
    CommandTooLarge(String),
    /// Raft failed for another reason.
    #[error("raft write failed: {0}")]
    Raft(String),
}

impl WriteError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            WriteError::NoLeader => "no_leader",
            WriteError::LeaderUnreachable(_) => "leader_unreachable",
            WriteError::NotLeader => "not_leader",
            WriteError::NoQuorum => "no_quorum",
            WriteError::CommandTooLarge(_) => "command_too_large",
            WriteError::MemberCatchingUp(_) => "member_catching_up",
            WriteError::Raft(_) => "raft_error",
        }
    }

    /// True when the write may succeed if retried later (no quorum now, leader changing).
    pub fn is_retriable(&self) -> bool {
        !matches!(self, WriteError::Raft(_) | WriteError::CommandTooLarge(_))
    }

    /// True when the write reached no leader: none was known, or the node it was forwarded to
    /// had just lost the leadership. openraft appended it nowhere, so sending it again cannot
    /// apply it twice.
    pub fn reached_no_leader(&self) -> bool {
        matches!(self, WriteError::NoLeader | WriteError::NotLeader)
    }
}

/// How often an operator's write that reached no leader is sent again.
const LEADER_WAIT: Duration = Duration::from_millis(50);

/// How long adding a member waits for its Raft port to answer.
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// A running worker node.
pub struct Node {
    /// This node's id.
    pub id: NodeId,
    /// The Raft instance.
    pub raft: Raft,
    /// The applied cluster state (read-only view).
    pub state: SharedClusterState,
    /// The node's configuration.
    pub config: CheckedWorkerConfig,
    http: reqwest::Client,
    raft_scheme: &'static str,
    lease: Mutex<OwnerLease>,
    /// When this node received each worker's latest renewal.
    tracker: Mutex<LeaseTracker>,
    leader_contact: Arc<LeaderContact>,
    /// Held (shared) by every renewal in flight; taken exclusively by [`Node::shutdown`] so
    /// that no renewal commits after the lease is released.
    renewals: Arc<tokio::sync::RwLock<()>>,
    live_members: Mutex<BTreeSet<NodeId>>,
    membership_changes: tokio::sync::Mutex<()>,
    shutdown: watch::Sender<bool>,
    removed: watch::Sender<bool>,
}

impl Node {
    /// Opens the store, starts Raft and the RPC server, initialises a fresh cluster when this
    /// node is the lowest-id initial member, and starts the lease and scheduler loops.
    pub async fn start(config: CheckedWorkerConfig) -> Result<Arc<Node>, NodeError> {
        let tls = config.tls.as_ref().map(RaftTls::load).transpose()?;
        std::fs::create_dir_all(&config.data_dir).map_err(|e| NodeError::Store(e.to_string()))?;
        let (log_store, state_machine) = Store::open(config.data_dir.join("raft"))
            .map_err(|e| NodeError::Store(e.to_string()))?;
        let state = state_machine.cluster_state();
        let raft_config = openraft::Config {
            cluster_name: "capstan".into(),
            heartbeat_interval: millis(config.heartbeat_interval),
            election_timeout_min: millis(config.election_timeout.0),
            election_timeout_max: millis(config.election_timeout.1),
            install_snapshot_timeout: millis(config.rpc_timeout) * 10,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(config.raft_snapshot_logs),
            max_in_snapshot_log_to_keep: config.raft_logs_kept,
            // entries read for one append; the network sends as many as fit in
            // raft_network::APPEND_BYTES
            max_payload_entries: 64,
            snapshot_max_chunk_size: raft_service::SNAPSHOT_CHUNK_BYTES,
            ..Default::default()
        }
        .validate()
        .map_err(|e| NodeError::Raft(e.to_string()))?;
        let network = HttpRaftNetworkFactory::new(config.node_id, config.rpc_timeout, tls.as_ref())
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let raft = Raft::new(
            config.node_id,
            Arc::new(raft_config),
            network,
            log_store,
            state_machine,
        )
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;
        let http = raft_tls::client_builder(tls.as_ref(), reqwest::Client::builder())
            .connect_timeout(config.rpc_timeout)
            .timeout(config.rpc_timeout * 3)
            .build()
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let (shutdown, _) = watch::channel(false);
        let (removed, _) = watch::channel(false);
        let node = Arc::new(Node {
            id: config.node_id,
            raft: raft.clone(),
            state,
            lease: Mutex::new(OwnerLease::new(config.lease)),
            tracker: Mutex::new(LeaseTracker::new(config.lease_expiry(), Instant::now())),
            leader_contact: Arc::new(LeaderContact::default()),
            renewals: Arc::new(tokio::sync::RwLock::new(())),
            live_members: Mutex::new(BTreeSet::new()),
            membership_changes: tokio::sync::Mutex::new(()),
            config,
            http,
            raft_scheme: raft_tls::scheme(tls.as_ref()),
            shutdown,
            removed,
        });

        let listener = TcpListener::bind(node.config.raft_listen)
            .await
            .map_err(|e| NodeError::Bind {
                addr: node.config.raft_listen.to_string(),
                reason: e.to_string(),
            })?;
        let app = raft_service::router(raft, node.leader_contact.clone())
            .merge(lease_service::router(node.clone()))
            .merge(
                Router::new()
                    .route("/raft/write", post(forwarded_write))
                    .route("/raft/removed", post(removed_notice))
                    .with_state(node.clone()),
            );
        let stop = node.shutdown.subscribe();
        let server_tls = tls.as_ref().map(RaftTls::server_config);
        tokio::spawn(async move {
            let app = app.layer(DefaultBodyLimit::max(raft_service::BODY_LIMIT));
            let served = http_server::serve(listener, app, server_tls, stop, "raft").await;
            if let Err(e) = served {
                warn!(error = %e, "raft rpc server stopped");
            }
        });

        node.initialize_if_first().await?;
        tokio::spawn(crate::lease_renewal::renew_leases(node.clone()));
        tokio::spawn(schedule(node.clone()));
        info!(
            node = node.id,
            raft = %node.config.raft_listen,
            tls = node.config.tls.is_some(),
            "worker node started"
        );
        Ok(node)
    }

    async fn initialize_if_first(&self) -> Result<(), NodeError> {
        let members = &self.config.initial_members;
        if members.first().is_none_or(|m| m.id != self.id) {
            return Ok(());
        }
        let initialized = self
            .raft
            .is_initialized()
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        if initialized {
            return Ok(());
        }
        let map: BTreeMap<NodeId, NodeInfo> = members
            .iter()
            .map(|m| {
                (
                    m.id,
                    NodeInfo {
                        raft_addr: m.raft.clone(),
                        api_addr: m.api.clone(),
                    },
                )
            })
            .collect();
        info!(
            node = self.id,
            members = map.len(),
            "initialising a new cluster"
        );
        match self.raft.initialize(map).await {
            Ok(()) => Ok(()),
            // another start already initialised it
            Err(RaftError::APIError(_)) => Ok(()),
            Err(e) => Err(NodeError::Raft(e.to_string())),
        }
    }

    /// Applies `command` through Raft, forwarding it to the leader when this node is not.
    pub async fn write(&self, command: Command) -> Result<Response, WriteError> {
        // write_local refuses an oversized command before anything else, leader or not
        match self.write_local(command.clone()).await {
            Err(WriteError::NotLeader) => {}
            other => return other,
        }
        let leader = self.leader_info().ok_or(WriteError::NoLeader)?;
        let reply = self
            .http
            .post(format!(
                "{}://{}/raft/write",
                self.raft_scheme, leader.raft_addr
            ))
            .json(&command)
            .send()
            .await
            .map_err(|e| WriteError::LeaderUnreachable(e.without_url().to_string()))?;
        let result: Result<Response, WriteError> = reply
            .json()
            .await
            .map_err(|e| WriteError::LeaderUnreachable(e.without_url().to_string()))?;
        result
    }

    /// [`Node::write`] for an operator's request (the REST API): a write that reached no leader
    /// ([`WriteError::reached_no_leader`]) is sent again every 50 ms for up to the bound of a
    /// commit (`CheckedWorkerConfig::commit_bound`), so a request that lands in an election
    /// waits for the new leader instead of answering 503. The workers' own writes (lease renewals, checkpoints) keep
    /// failing fast: their loops retry on their own schedules.
    pub async fn write_through_election(&self, command: Command) -> Result<Response, WriteError> {
        let deadline = Instant::now() + self.config.commit_bound();
        loop {
            match self.write(command.clone()).await {
                Err(e) if e.reached_no_leader() && Instant::now() + LEADER_WAIT < deadline => {
                    debug!(code = e.code(), "write reached no leader; sending it again");
                    tokio::time::sleep(LEADER_WAIT).await;
                }
                other => return other,
            }
        }
    }

    /// Applies `command` if this node is the leader; `NotLeader` otherwise.
    pub async fn write_local(&self, command: Command) -> Result<Response, WriteError> {
        check_size(&command)?;
        // a leader cut off from its followers would wait forever for the commit
        let write = self.raft.client_write(command);
        let Ok(result) = tokio::time::timeout(self.config.commit_bound(), write).await else {
            return Err(WriteError::NoQuorum);
        };
        match result {
            Ok(r) => Ok(r.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                Err(WriteError::NotLeader)
            }
            Err(e) => Err(WriteError::Raft(e.to_string())),
        }
    }

    /// The current leader's id and addresses, if known.
    pub fn leader_info(&self) -> Option<NodeInfo> {
        let leader = self.raft.metrics().borrow().current_leader?;
        self.members().remove(&leader)
    }

    /// Every member (voters and learners) with its addresses, as this node knows them.
    pub fn members(&self) -> BTreeMap<NodeId, NodeInfo> {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .nodes()
            .map(|(id, info)| (*id, info.clone()))
            .collect()
    }

    /// The voters, as this node knows them.
    pub fn voters(&self) -> BTreeSet<NodeId> {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }

    /// True while this node has reached a quorum within its lease: the condition for acting
    /// as a pipeline owner.
    pub fn holds_lease(&self) -> bool {
        self.lease_term().is_some()
    }

    /// The term of the lease this node holds, if it holds one (see [`OwnerLease`]).
    pub fn lease_term(&self) -> Option<u64> {
        self.lease.lock().ok().and_then(|l| l.term(Instant::now()))
    }

    /// True while this node holds its lease without a break since `term` began.
    pub fn holds_lease_term(&self, term: u64) -> bool {
        self.lease
            .lock()
            .map(|l| l.holds_term(term, Instant::now()))
            .unwrap_or(false)
    }

    /// The members whose lease this node currently sees as live (every node follows the
    /// renewals; see ADR-0004).
    pub fn live_members(&self) -> BTreeSet<NodeId> {
        self.live_members
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Notes a renewal of `worker` received at `at` (ADR-0004, decision 1).
    pub(crate) fn record_renewal(&self, worker: NodeId, at: Instant) {
        if let Ok(mut t) = self.tracker.lock() {
            t.record(worker, at);
        }
    }

    /// Which of `nodes` this node sees expired at `now` (released or not).
    pub(crate) fn expired_among(&self, nodes: &BTreeSet<NodeId>, now: Instant) -> BTreeSet<NodeId> {
        let live = self
            .tracker
            .lock()
            .map(|t| t.live(nodes.iter().copied(), &BTreeSet::new(), now))
            .unwrap_or_default();
        nodes.difference(&live).copied().collect()
    }

    /// When this node last heard from a leader.
    pub(crate) fn leader_contact(&self) -> &LeaderContact {
        &self.leader_contact
    }

    /// The client for calls to peers' Raft ports.
    pub(crate) fn raft_client(&self) -> &reqwest::Client {
        &self.http
    }

    /// The URL of `path` on a peer's Raft port.
    pub(crate) fn raft_url(&self, peer: &NodeInfo, path: &str) -> String {
        format!("{}://{}{path}", self.raft_scheme, peer.raft_addr)
    }

    /// The guard every renewal holds while in flight (see [`Node::shutdown`]); `None` while
    /// shutdown releases the lease.
    pub(crate) fn renewal_guard(&self) -> Option<tokio::sync::OwnedRwLockReadGuard<()>> {
        self.renewals.clone().try_read_owned().ok()
    }

    /// A renewal sent at `sent` was confirmed.
    pub(crate) fn lease_confirmed(&self, sent: Instant) {
        if let Ok(mut l) = self.lease.lock() {
            l.confirmed(sent, Instant::now());
        }
        crate::fault_point::lease_confirmed();
    }

    /// Adds a worker: first as a learner, then, once replication to it has caught up with the
    /// change that added it (within `catch_up`), as a voter. A learner that has not caught up
    /// in time stays a learner (`MemberCatchingUp`); asking again promotes it once it has.
    pub async fn add_member(
        &self,
        id: NodeId,
        info: NodeInfo,
        catch_up: Duration,
    ) -> Result<(), WriteError> {
        let added = self
            .raft
            .add_learner(id, info, false)
            .await
            .map_err(membership_error)?;
        let target = added.log_id.index;
        let caught_up = self
            .raft
            .wait(Some(catch_up))
            .metrics(
                |m| {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id).copied().flatten())
                        .is_some_and(|l| l.index >= target)
                },
                "new learner caught up",
            )
            .await;
        if caught_up.is_err() {
            return Err(WriteError::MemberCatchingUp(format!(
                "member {id} was added as a learner and has not caught up within {} s; ask again to make it a voter once it has",
                catch_up.as_secs()
            )));
        }
        self.raft
            .change_membership(ChangeMembers::AddVoterIds([id].into()), false)
            .await
            .map_err(membership_error)?;
        Ok(())
    }

    /// Serialises membership changes on this node (the leader): held from the checks to the
    /// change's commit.
    pub async fn membership_change(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.membership_changes.lock().await
    }

    /// Whether the Raft port at `raft_addr` answers within [`PROBE_WAIT`] (a worker just
    /// started may take a moment to listen): any HTTP answer does; with `[tls]` the handshake
    /// must succeed both ways. The error is the innermost cause, value-free.
    pub async fn probe_raft(&self, raft_addr: &str) -> Result<(), String> {
        let deadline = Instant::now() + PROBE_WAIT;
        loop {
            let sent = self
                .http
                .get(format!("{}://{raft_addr}/raft/vote", self.raft_scheme))
                .timeout(self.config.rpc_timeout * 4)
                .send()
                .await;
            let e = match sent {
                Ok(_) => return Ok(()),
                Err(e) => e.without_url(),
            };
            if Instant::now() >= deadline {
                let mut cause: &dyn std::error::Error = &e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                return Err(cause.to_string());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Removes a worker from the voters and from the cluster.
    pub async fn remove_member(&self, id: NodeId) -> Result<(), WriteError> {
        let removed = self.members().remove(&id);
        let ids: BTreeSet<NodeId> = [id].into();
        self.raft
            .change_membership(ChangeMembers::RemoveVoters(ids.clone()), false)
            .await
            .map_err(membership_error)?;
        self.raft
            .change_membership(ChangeMembers::RemoveNodes(ids), false)
            .await
            .map_err(membership_error)?;
        // a removed worker never hears of its removal through Raft (nothing is replicated to
        // it any more): tell it, so that it stops instead of calling elections for ever
        if let Some(info) = removed {
            let notice = self
                .http
                .post(format!(
                    "{}://{}/raft/removed",
                    self.raft_scheme, info.raft_addr
                ))
                .timeout(self.config.rpc_timeout * 4)
                .json(&RemovedNotice { id })
                .send()
                .await;
            if let Err(e) = notice {
                warn!(node = id, error = %e.without_url(), "could not tell the removed worker; it stops when it learns otherwise");
            }
        }
        Ok(())
    }

    /// Resolves, with openraft's reason, once this node's Raft core stopped on its own (a
    /// storage error such as a full disk, a panic). The node can then no longer renew its
    /// lease, commit or learn anything: serving on would be a zombie answering stale reads, so
    /// the worker exits and its supervisor restarts it.
    pub async fn raft_core_stopped(&self) -> String {
        let mut metrics = self.raft.metrics();
        loop {
            if let Err(fatal) = &metrics.borrow_and_update().running_state {
                return fatal.to_string();
            }
            if metrics.changed().await.is_err() {
                return "the raft core ended".to_string();
            }
        }
    }

    /// Resolves once this worker was told it is no longer a member.
    pub async fn removed(&self) {
        let mut removed = self.removed.subscribe();
        let _ = removed.wait_for(|r| *r).await;
    }

    /// Releases this worker's lease so the leader moves its pipelines at once, then stops the
    /// node's servers and Raft.
    ///
    /// Without a quorum the release cannot commit; it is abandoned after one lease (the
    /// leader then expires this worker's lease the ordinary way).
    pub async fn shutdown(&self) {
        let deadline = tokio::time::Instant::now() + self.config.lease;
        // no new renewal starts, and the ones in flight finish first: a renewal committed
        // after the release would make this worker look live again until its lease expired
        let no_renewals =
            tokio::time::timeout_at(deadline, self.renewals.clone().write_owned()).await;
        if no_renewals.is_err() {
            warn!(
                node = self.id,
                "lease renewals still in flight at shutdown (no quorum?)"
            );
        }
        let release = self.write(Command::ReleaseLease { node: self.id });
        match tokio::time::timeout_at(deadline, release).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                warn!(node = self.id, error = %e, "could not release the lease before shutdown")
            }
            Err(_) => warn!(node = self.id, "lease release timed out (no quorum?)"),
        }
        let _ = self.shutdown.send(true);
        drop(no_renewals);
        if let Err(e) = self.raft.shutdown().await {
            warn!(node = self.id, error = %e, "raft shutdown failed");
        }
    }

    /// True once shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        *self.shutdown.borrow()
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn membership_error(e: RaftError<NodeId, ClientWriteError<NodeId, NodeInfo>>) -> WriteError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => WriteError::NotLeader,
        other => WriteError::Raft(other.to_string()),
    }
}

/// Refuses a command too large for one Raft entry, naming its kind and both sizes.
pub(crate) fn check_size(command: &Command) -> Result<(), WriteError> {
    let bytes = command.encoded_len();
    if bytes <= MAX_COMMAND_BYTES {
        return Ok(());
    }
    let kind = command.kind();
    Err(WriteError::CommandTooLarge(format!(
        "the {kind} command is {bytes} bytes as json, over the limit of {MAX_COMMAND_BYTES} bytes for one raft entry"
    )))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The leader's notice to a worker it removed from the cluster.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemovedNotice {
    /// The removed worker's id.
    id: NodeId,
}

/// A notice naming this worker makes it stop (the worker's main loop waits on
/// [`Node::removed`]); one naming another is ignored.
async fn removed_notice(
    State(node): State<Arc<Node>>,
    Json(notice): Json<RemovedNotice>,
) -> axum::http::StatusCode {
    if notice.id != node.id {
        return axum::http::StatusCode::CONFLICT;
    }
    warn!(
        node = node.id,
        "this worker was removed from the cluster; stopping"
    );
    let _ = node.removed.send(true);
    axum::http::StatusCode::NO_CONTENT
}

async fn forwarded_write(
    State(node): State<Arc<Node>>,
    Json(command): Json<Command>,
) -> Json<Result<Response, WriteError>> {
    Json(node.write_local(command).await)
}

/// On every node: follow the lease renewals; on the leader: propose the scheduler's plan.
///
/// Event-driven rather than polled: a round runs when this node applies an entry (or its
/// Raft role changes), and when the oldest live lease is due to run out, so a renewal is
/// observed within [`MIN_ROUND_GAP`] of being applied and an expired owner is acted on at
/// once; at least every [`MAX_ROUND_GAP`] otherwise.
async fn schedule(node: Arc<Node>) {
    // a voter may receive a relayed renewal a moment after the leader did, so a first
    // question can come too early: ask again soon
    let mut expiries = ExpiryQuorum::new(MIN_ROUND_GAP);
    let mut changes = node.raft.metrics();
    let mut last_seen = None;
    let mut unsettled = false;
    let mut last_round = Instant::now();
    while !node.is_stopping() {
        let next = node
            .tracker
            .lock()
            .ok()
            .and_then(|t| t.next_change(Instant::now()));
        let wake = round_deadline(last_round, unsettled, next);
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break; // raft stopped
                }
                // the leader's metrics also move on every heartbeat acknowledgement: those
                // changes neither run a round nor postpone the next one
                let key = round_key(&changes.borrow_and_update());
                if last_seen.as_ref() == Some(&key) {
                    continue;
                }
                last_seen = Some(key);
            }
            () = tokio::time::sleep_until(wake.into()) => {}
        }
        unsettled = schedule_round(&node, &mut expiries).await;
        last_round = Instant::now();
        tokio::time::sleep(MIN_ROUND_GAP).await;
    }
}

/// When the next scheduling round runs at the latest: when the oldest live lease may run out
/// (`next_change`), and otherwise a fixed gap after the last round — [`MIN_ROUND_GAP`] while
/// an expiry waits for a quorum's agreement, else [`MAX_ROUND_GAP`]. Measured from the last
/// round, not from the latest wake-up: a change that does not warrant a round (a heartbeat
/// acknowledgement, every few milliseconds on a leader) must not postpone it, or a quiet log
/// would never see its expiries acted on.
fn round_deadline(last_round: Instant, unsettled: bool, next_change: Option<Instant>) -> Instant {
    let gap = if unsettled {
        MIN_ROUND_GAP
    } else {
        MAX_ROUND_GAP
    };
    let idle_until = last_round + gap;
    next_change.map_or(idle_until, |t| t.min(idle_until))
}

/// What a scheduling round depends on in the Raft metrics.
type RoundKey = (Option<u64>, ServerState, u64, Option<NodeId>, Option<u64>);

fn round_key(m: &openraft::RaftMetrics<NodeId, NodeInfo>) -> RoundKey {
    (
        m.last_applied.map(|l| l.index),
        m.state,
        m.current_term,
        m.current_leader,
        m.membership_config.log_id().as_ref().map(|l| l.index),
    )
}

/// One round: observe the renewals written to the log, publish the live view, and on a
/// caught-up leader propose the plan, moving pipelines only from workers a quorum of the
/// voters sees expired. True when a worker this node sees expired is not confirmed yet.
async fn schedule_round(node: &Arc<Node>, expiries: &mut ExpiryQuorum) -> bool {
    let metrics = node.raft.metrics().borrow().clone();
    let is_leader = metrics.state == ServerState::Leader;
    // the clock is read under the state's lock, so every renewal observed was applied before
    // its observation time (and so sent before it)
    let (released, now) = node.state.read(|state| {
        let now = Instant::now();
        let released = state.released_nodes();
        if let Ok(mut tracker) = node.tracker.lock() {
            tracker.observe(
                state.lease_renewals(),
                &node.state.renewals_received(),
                &released,
                now,
            );
        }
        (released, now)
    });
    // a new leader plans only once it has applied an entry of its own term: by then it has
    // applied every committed renewal, so no worker looks older than it is
    let caught_up = metrics
        .last_applied
        .is_some_and(|l| l.leader_id.term == metrics.current_term);
    let members = metrics
        .membership_config
        .membership()
        .nodes()
        .map(|(id, _)| *id)
        .collect::<Vec<_>>();
    let mut live = node
        .tracker
        .lock()
        .map(|t| t.live(members.iter().copied(), &released, now))
        .unwrap_or_default();
    if let Ok(mut view) = node.live_members.lock() {
        view.clone_from(&live);
    }
    if !is_leader || !caught_up {
        return false;
    }
    // a worker this node saw go quiet may have renewed through voters this node did not hear
    // from (under another leader, or over a link this node lost): it counts as live until a
    // quorum agrees it expired
    let local_expired: BTreeSet<NodeId> = members
        .iter()
        .copied()
        .filter(|n| !live.contains(n) && !released.contains(n))
        .collect();
    let plan = expiries.plan(metrics.current_term, &local_expired, now);
    let mut expired = plan.confirmed;
    if let Some(ask) = plan.ask {
        let agreed = lease_service::expired_on_a_quorum(node, &ask).await;
        if !agreed.is_empty() {
            info!(workers = ?agreed, "a quorum of the voters sees these workers' leases expired");
        }
        expiries.settle(metrics.current_term, &agreed);
        expired.extend(agreed);
    }
    let unsettled = expired != local_expired;
    live.extend(local_expired.difference(&expired).copied());
    // plan under the read lock (pure and quick), propose after releasing it
    let commands = node.state.read(|state| scheduler::plan(state, &live));
    // all at once: openraft batches entries that arrive together, so the pipelines of a dead
    // worker are placed in about one commit, not one commit each (67 × 15–50 ms measured)
    let mut proposals = tokio::task::JoinSet::new();
    for command in commands {
        if let Command::AssignOwner {
            pipeline,
            node: owner,
            epoch,
        } = &command
        {
            info!(pipeline = %pipeline, owner = *owner, epoch = *epoch, "assigning pipeline");
        }
        let node = node.clone();
        proposals.spawn(async move { node.write_local(command).await });
    }
    while let Some(done) = proposals.join_next().await {
        if let Ok(Err(e)) = done {
            debug!(error = %e, "scheduler proposal failed");
        }
    }
    unsettled
}

#[cfg(test)]
mod tests {
    use super::{round_deadline, WriteError, MAX_ROUND_GAP, MIN_ROUND_GAP};
    use std::time::{Duration, Instant};

    #[test]
    fn the_next_round_is_due_a_gap_after_the_last_one_whatever_woke_the_loop_since() {
        let last = Instant::now();
        // the same deadline however often the loop is woken in between
        assert_eq!(round_deadline(last, false, None), last + MAX_ROUND_GAP);
        assert_eq!(round_deadline(last, true, None), last + MIN_ROUND_GAP);
        // an expiry due earlier comes first, a later one waits for the gap
        let soon = last + Duration::from_millis(5);
        assert_eq!(round_deadline(last, false, Some(soon)), soon);
        let late = last + Duration::from_secs(5);
        assert_eq!(round_deadline(last, true, Some(late)), last + MIN_ROUND_GAP);
    }

    #[test]
    fn only_a_write_that_reached_no_leader_is_sent_again() {
        assert!(WriteError::NoLeader.reached_no_leader());
        assert!(WriteError::NotLeader.reached_no_leader());
        // these may have reached the log, or never can
        for e in [
            WriteError::NoQuorum,
            WriteError::LeaderUnreachable("reset".into()),
            WriteError::Raft("x".into()),
            WriteError::CommandTooLarge("x".into()),
            WriteError::MemberCatchingUp("x".into()),
        ] {
            assert!(!e.reached_no_leader(), "{}", e.code());
        }
    }
}
