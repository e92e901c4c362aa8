//! The Raft state machine on RocksDB: applies committed entries to the pure [`ClusterState`]
//! in memory; what is persisted is the current snapshot (the JSON of the cluster state with
//! openraft's metadata: last log id and membership), taken every `raft_snapshot_logs` entries.
//!
//! A restarted node loads the snapshot and openraft applies the log after it again (the log is
//! durable and never purged past the snapshot), so applying persists nothing: writing the
//! whole state per apply batch cost a write of every pipeline definition per checkpoint
//! commit, tens of MB with hundreds of wide pipelines, and held the state's lock meanwhile.
//! Data directories of versions that did write it keep their last write
//! (`KEY_CLUSTER_STATE`), loaded only while it is ahead of the snapshot.
//!
//! The current snapshot is persisted, so a restarted node can still serve it to a lagging
//! follower after its log has been purged.

use std::io::Cursor;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, StorageIOError};
use rocksdb::WriteBatch;

use crate::cluster_state::ClusterState;
use crate::error::RaftStoreError;
use crate::response::Response;
use crate::shared_cluster_state::SharedClusterState;
use crate::snapshot_builder::ClusterSnapshotBuilder;
use crate::store::{Store, CF_SNAPSHOT, CF_STATE_MACHINE};
use crate::type_config::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

const KEY_LAST_APPLIED: &str = "last_applied";
const KEY_MEMBERSHIP: &str = "membership";
const KEY_CLUSTER_STATE: &str = "cluster_state";
pub(crate) const KEY_SNAPSHOT_META: &str = "current_meta";
pub(crate) const KEY_SNAPSHOT_DATA: &str = "current_data";

/// The RocksDB-backed state machine of one node.
#[derive(Debug)]
pub struct StateMachineStore {
    store: Store,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: SharedClusterState,
    snapshot_seq: u64,
}

impl StateMachineStore {
    /// Loads the persisted state machine, or the current snapshot if it is ahead of it.
    pub(crate) fn load(store: Store) -> Result<Self, RaftStoreError> {
        let mut last_applied: Option<LogId> =
            store.get_json(CF_STATE_MACHINE, KEY_LAST_APPLIED, "last applied log id")?;
        let mut membership: StoredMembership = store
            .get_json(CF_STATE_MACHINE, KEY_MEMBERSHIP, "membership")?
            .unwrap_or_default();
        let mut state: ClusterState = store
            .get_json(CF_STATE_MACHINE, KEY_CLUSTER_STATE, "cluster state")?
            .unwrap_or_default();
        if let Some((meta, data)) = read_current_snapshot(&store)? {
            if meta.last_log_id > last_applied {
                state = decode_state(&data)?;
                last_applied = meta.last_log_id;
                membership = meta.last_membership;
            }
        }
        Ok(StateMachineStore {
            store,
            last_applied,
            membership,
            state: SharedClusterState::new(state),
            snapshot_seq: 0,
        })
    }

    /// A handle for reading the applied cluster state.
    pub fn cluster_state(&self) -> SharedClusterState {
        self.state.clone()
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId> {
        self.last_applied
    }

    fn put_applied(&self, batch: &mut WriteBatch, data: &[u8]) -> Result<(), RaftStoreError> {
        self.store.put_json(
            batch,
            CF_STATE_MACHINE,
            KEY_LAST_APPLIED,
            &self.last_applied,
            "last applied log id",
        )?;
        self.store.put_json(
            batch,
            CF_STATE_MACHINE,
            KEY_MEMBERSHIP,
            &self.membership,
            "membership",
        )?;
        batch.put_cf(self.store.cf(CF_STATE_MACHINE)?, KEY_CLUSTER_STATE, data);
        Ok(())
    }

    fn install(&mut self, meta: &SnapshotMeta, data: Vec<u8>) -> Result<(), RaftStoreError> {
        let state = decode_state(&data)?;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        let mut batch = WriteBatch::default();
        self.put_applied(&mut batch, &data)?;
        self.store.put_json(
            &mut batch,
            CF_SNAPSHOT,
            KEY_SNAPSHOT_META,
            meta,
            "snapshot metadata",
        )?;
        batch.put_cf(self.store.cf(CF_SNAPSHOT)?, KEY_SNAPSHOT_DATA, &data);
        self.store.write(batch, true, "installed snapshot")?;
        *self.state.write() = state;
        Ok(())
    }
}

pub(crate) fn encode_state(state: &ClusterState) -> Result<Vec<u8>, RaftStoreError> {
    serde_json::to_vec(state).map_err(|e| RaftStoreError::encode("cluster state", &e))
}

fn decode_state(data: &[u8]) -> Result<ClusterState, RaftStoreError> {
    serde_json::from_slice(data).map_err(|e| RaftStoreError::decode("cluster state", &e))
}

fn read_current_snapshot(store: &Store) -> Result<Option<(SnapshotMeta, Vec<u8>)>, RaftStoreError> {
    let meta: Option<SnapshotMeta> =
        store.get_json(CF_SNAPSHOT, KEY_SNAPSHOT_META, "snapshot metadata")?;
    let Some(meta) = meta else {
        return Ok(None);
    };
    let data = store
        .db()
        .get_cf(store.cf(CF_SNAPSHOT)?, KEY_SNAPSHOT_DATA)
        .map_err(|source| RaftStoreError::Read {
            what: "snapshot data",
            source,
        })?
        .unwrap_or_default();
    Ok(Some((meta, data)))
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = ClusterSnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let state = self.state.clone();
        let mut state = state.write();
        let mut responses = Vec::new();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            let response = match entry.payload {
                EntryPayload::Blank => Response::Applied,
                EntryPayload::Normal(command) => {
                    let kind = command.kind();
                    let pipeline = command.pipeline().unwrap_or("-").to_owned();
                    let response = state.apply(command);
                    if !response.is_applied() {
                        tracing::debug!(
                            %pipeline,
                            command = kind,
                            outcome = response.code(),
                            index = entry.log_id.index,
                            "command rejected"
                        );
                    }
                    response
                }
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Response::Applied
                }
            };
            responses.push(response);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_seq = self.snapshot_seq.wrapping_add(1);
        ClusterSnapshotBuilder::new(
            self.store.clone(),
            self.last_applied,
            self.membership.clone(),
            self.state.snapshot(),
            self.snapshot_seq,
        )
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        tracing::info!(snapshot_id = %meta.snapshot_id, "installing snapshot");
        self.install(meta, snapshot.into_inner())
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e).into())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let current = read_current_snapshot(&self.store)
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(current.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
