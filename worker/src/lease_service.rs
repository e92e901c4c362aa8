//! Lease renewals held in memory (ADR-0004, decision 1): the routes peers call on the Raft
//! port, a worker's renewal loop, and the leader's question about suspected expiries. Wiring;
//! the rules live in [`crate::lease_quorum`], [`crate::lease_tracker`],
//! [`crate::owner_lease`] and [`crate::leader_contact`].
//!
//! - `POST /raft/lease/renew {node}` (to the leader): the leader notes the renewal, relays it
//!   to every other voter and answers `confirmed` once a quorum of the voters noted it.
//! - `POST /raft/lease/note {node, direct}`: a voter notes a renewal relayed by the leader; a
//!   *direct* renewal (sent while the worker can reach no leader) only when this node is a
//!   follower that heard from no leader within the election timeout — so a worker that cannot
//!   reach a leader the others still hear loses its lease, as it cannot commit either.
//! - `POST /raft/lease/expired {nodes}`: which of `nodes` this voter sees expired.
//!
//! Nothing here is written to the Raft log, so a slow disk no longer delays renewals: a
//! renewal costs two network round trips. A worker still writes one `RenewLease` command when
//! it joins and after it released its lease (the replicated state knows it as a member that
//! renewed), and falls back to writing them when the leader does not know these routes (an
//! older version, during a rolling upgrade).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use capstan_raft_store::{Command, NodeId, NodeInfo};
use futures::stream::{FuturesUnordered, StreamExt};
use openraft::ServerState;
use serde::{Deserialize, Serialize};
use tracing::debug;

use crate::lease_quorum::{expired_on_quorum, is_quorum};
use crate::node::Node;

/// A renewal, as the worker sends it to the leader.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Renewal {
    node: NodeId,
}

/// A renewal a voter is asked to note.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Note {
    node: NodeId,
    /// Sent by the worker itself (no leader reachable), not relayed by the leader.
    direct: bool,
}

/// The leader's answer to a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RenewReply {
    /// A quorum of the voters noted it.
    Confirmed,
    /// The node asked is not the leader.
    NotLeader,
    /// No quorum noted it in time.
    NoQuorum,
    /// Too few voters know these routes (older versions): renew through the Raft log.
    Unsupported,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpiryQuestion {
    nodes: BTreeSet<NodeId>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpiryAnswer {
    expired: BTreeSet<NodeId>,
}

/// What a call to a peer came to.
enum Reached<T> {
    Answered(T),
    /// The peer does not serve the route (an older version).
    Unknown,
    Failed,
}

/// The routes of this module.
pub fn router(node: Arc<Node>) -> Router {
    Router::new()
        .route("/raft/lease/renew", post(renew_route))
        .route("/raft/lease/note", post(note_route))
        .route("/raft/lease/expired", post(expired_route))
        .with_state(node)
}

async fn renew_route(State(node): State<Arc<Node>>, Json(r): Json<Renewal>) -> Json<RenewReply> {
    Json(relay(&node, r.node).await)
}

async fn note_route(State(node): State<Arc<Node>>, Json(n): Json<Note>) -> Json<bool> {
    Json(note(&node, n.node, n.direct))
}

async fn expired_route(
    State(node): State<Arc<Node>>,
    Json(q): Json<ExpiryQuestion>,
) -> Json<ExpiryAnswer> {
    Json(ExpiryAnswer {
        expired: node.expired_among(&q.nodes, Instant::now()),
    })
}

/// Notes a renewal of `worker` on this node, if it may: always when relayed by a leader; when
/// `direct`, only on a follower that heard from no leader within the election timeout.
fn note(node: &Node, worker: NodeId, direct: bool) -> bool {
    let now = Instant::now();
    if direct {
        let leading = node.raft.metrics().borrow().state == ServerState::Leader;
        let quiet = node
            .leader_contact()
            .quiet_for(node.config.election_timeout.0, now);
        if leading || !quiet {
            return false;
        }
    }
    node.record_renewal(worker, now);
    true
}

/// The voter sets (two during a joint membership change) and every member's addresses.
fn voters(node: &Node) -> (Vec<BTreeSet<NodeId>>, BTreeMap<NodeId, NodeInfo>) {
    let metrics = node.raft.metrics().borrow().clone();
    let membership = metrics.membership_config.membership();
    let configs = membership.get_joint_config().clone();
    let infos = membership
        .nodes()
        .map(|(id, info)| (*id, info.clone()))
        .collect();
    (configs, infos)
}

/// How long one call of a renewal may take: the RPC timeout, but at most a third of the lease,
/// so that a renewal sent to a leader that froze falls back to the voters while the lease
/// still runs.
fn hop_timeout(node: &Node) -> std::time::Duration {
    node.config.rpc_timeout.min(node.config.lease / 3)
}

/// Sends `body` to `path` on every voter in `to`, each bounded by [`hop_timeout`].
fn call_all<B, T>(
    node: &Node,
    to: impl IntoIterator<Item = (NodeId, NodeInfo)>,
    path: &'static str,
    body: &B,
) -> FuturesUnordered<impl std::future::Future<Output = (NodeId, Reached<T>)>>
where
    B: Serialize,
    T: serde::de::DeserializeOwned,
{
    to.into_iter()
        .map(|(id, info)| {
            let request = node
                .raft_client()
                .post(node.raft_url(&info, path))
                .timeout(hop_timeout(node))
                .json(body);
            async move {
                let reached = match request.send().await {
                    Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => Reached::Unknown,
                    Ok(r) => match r.json::<T>().await {
                        Ok(t) => Reached::Answered(t),
                        Err(_) => Reached::Failed,
                    },
                    Err(_) => Reached::Failed,
                };
                (id, reached)
            }
        })
        .collect()
}

/// On the leader: notes `worker`'s renewal and relays it to the other voters, until a quorum
/// noted it.
async fn relay(node: &Arc<Node>, worker: NodeId) -> RenewReply {
    if node.raft.metrics().borrow().state != ServerState::Leader {
        return RenewReply::NotLeader;
    }
    node.record_renewal(worker, Instant::now());
    let (configs, infos) = voters(node);
    let acked = BTreeSet::from([node.id]);
    if is_quorum(&configs, &acked) {
        return RenewReply::Confirmed;
    }
    let peers = voter_peers(node, &configs, &infos, None);
    let note = Note {
        node: worker,
        direct: false,
    };
    match gather_notes(node, &configs, acked, peers, &note).await {
        (true, _) => RenewReply::Confirmed,
        (false, 0) => RenewReply::NoQuorum,
        (false, _) => RenewReply::Unsupported,
    }
}

/// Asks `peers` to note `note`, adding each that did to `acked`, until `acked` is a quorum
/// of `configs`. Whether it became one, and how many peers did not know the route.
async fn gather_notes(
    node: &Node,
    configs: &[BTreeSet<NodeId>],
    mut acked: BTreeSet<NodeId>,
    peers: Vec<(NodeId, NodeInfo)>,
    note: &Note,
) -> (bool, usize) {
    let mut calls = call_all::<_, bool>(node, peers, "/raft/lease/note", note);
    let mut unknown = 0;
    while let Some((peer, reached)) = calls.next().await {
        match reached {
            Reached::Answered(true) => {
                acked.insert(peer);
                if is_quorum(configs, &acked) {
                    return (true, unknown);
                }
            }
            Reached::Unknown => unknown += 1,
            Reached::Answered(false) | Reached::Failed => {}
        }
    }
    (false, unknown)
}

/// The other voters of `configs` with their addresses, `except` one.
fn voter_peers(
    node: &Node,
    configs: &[BTreeSet<NodeId>],
    infos: &BTreeMap<NodeId, NodeInfo>,
    except: Option<NodeId>,
) -> Vec<(NodeId, NodeInfo)> {
    let ids: BTreeSet<NodeId> = configs.iter().flatten().copied().collect();
    ids.into_iter()
        .filter(|&id| id != node.id && Some(id) != except)
        .filter_map(|id| infos.get(&id).map(|i| (id, i.clone())))
        .collect()
}

/// A worker's renewal while it can reach no leader: noted by itself and sent to every other
/// voter but `unreachable`, each of which notes it only if it hears no leader either.
async fn direct(node: &Arc<Node>, unreachable: Option<NodeId>) -> bool {
    let (configs, infos) = voters(node);
    let mut acked = BTreeSet::new();
    if note(node, node.id, true) {
        acked.insert(node.id);
    }
    if is_quorum(&configs, &acked) {
        return true;
    }
    let peers = voter_peers(node, &configs, &infos, unreachable);
    let note = Note {
        node: node.id,
        direct: true,
    };
    gather_notes(node, &configs, acked, peers, &note).await.0
}

/// One renewal of this worker's lease: through the leader; directly to the voters when no
/// leader is known or the known one cannot be reached or is no longer leader; through the Raft
/// log when the leader is of a version without these routes. True once confirmed.
pub async fn renew(node: &Arc<Node>) -> bool {
    let leader = node.raft.metrics().borrow().current_leader;
    let Some(leader) = leader else {
        return direct(node, None).await;
    };
    if leader == node.id {
        return match relay(node, node.id).await {
            RenewReply::Confirmed => true,
            RenewReply::Unsupported => through_log(node).await,
            RenewReply::NotLeader => direct(node, None).await,
            RenewReply::NoQuorum => false,
        };
    }
    let Some(info) = node.members().remove(&leader) else {
        return direct(node, None).await;
    };
    let mut call = call_all::<_, RenewReply>(
        node,
        [(leader, info)],
        "/raft/lease/renew",
        &Renewal { node: node.id },
    );
    let reached = match call.next().await {
        Some((_, reached)) => reached,
        None => Reached::Failed,
    };
    match reached {
        Reached::Answered(RenewReply::Confirmed) => true,
        Reached::Answered(RenewReply::NoQuorum) => false,
        Reached::Answered(RenewReply::NotLeader) => direct(node, None).await,
        Reached::Answered(RenewReply::Unsupported) | Reached::Unknown => through_log(node).await,
        Reached::Failed => direct(node, Some(leader)).await,
    }
}

/// A renewal written to the Raft log (`RenewLease`): committed, it was noted by a quorum.
pub async fn through_log(node: &Node) -> bool {
    match node.write(Command::RenewLease { node: node.id }).await {
        Ok(_) => true,
        Err(e) => {
            debug!(node = node.id, error = %e, "lease renewal through the log failed");
            false
        }
    }
}

/// On the leader: which of `suspects` (expired on this node's clock) a quorum of the voters
/// sees expired. Stops asking once every suspect is decided; a voter that does not answer
/// within [`hop_timeout`] counts as disagreeing.
pub async fn expired_on_a_quorum(
    node: &Arc<Node>,
    suspects: &BTreeSet<NodeId>,
) -> BTreeSet<NodeId> {
    let (configs, infos) = voters(node);
    let mut reports = BTreeMap::from([(node.id, suspects.clone())]);
    let decided = expired_on_quorum(suspects, &configs, &reports);
    if decided == *suspects {
        return decided;
    }
    let peers = voter_peers(node, &configs, &infos, None);
    let mut calls = call_all::<_, ExpiryAnswer>(
        node,
        peers,
        "/raft/lease/expired",
        &ExpiryQuestion {
            nodes: suspects.clone(),
        },
    );
    while let Some((peer, reached)) = calls.next().await {
        if let Reached::Answered(answer) = reached {
            reports.insert(peer, answer.expired);
            if expired_on_quorum(suspects, &configs, &reports) == *suspects {
                break;
            }
        }
    }
    expired_on_quorum(suspects, &configs, &reports)
}
