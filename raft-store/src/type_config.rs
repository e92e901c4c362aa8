//! The openraft type configuration of capstan's control plane, and aliases for the openraft
//! types the worker uses.

use std::fmt;
// `declare_raft_types!` names `Cursor<Vec<u8>>` as the default snapshot data type.
use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::command::Command;
use crate::response::Response;

/// A worker's Raft node id.
pub type NodeId = u64;

/// How to reach a worker: its Raft RPC address and its REST API address.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Where the worker serves Raft RPCs (`host:port`).
    pub raft_addr: String,
    /// Where the worker serves the REST API (`host:port`).
    pub api_addr: String,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft {} api {}", self.raft_addr, self.api_addr)
    }
}

openraft::declare_raft_types!(
    /// capstan's Raft types: commands in, responses out, snapshots as in-memory bytes.
    pub TypeConfig:
        D = Command,
        R = Response,
        NodeId = NodeId,
        Node = NodeInfo,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A running Raft node.
pub type Raft = openraft::Raft<TypeConfig>;
/// A Raft log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A Raft log id (leader id and index).
pub type LogId = openraft::LogId<NodeId>;
/// A Raft vote.
pub type Vote = openraft::Vote<NodeId>;
/// A membership with the log id that introduced it.
pub type StoredMembership = openraft::StoredMembership<NodeId, NodeInfo>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, NodeInfo>;
/// A snapshot: metadata and data.
pub type Snapshot = openraft::Snapshot<TypeConfig>;
/// openraft's storage error for this configuration.
pub type StorageError = openraft::StorageError<NodeId>;
