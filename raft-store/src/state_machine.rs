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
//! The current snapshot is persisted ([`SnapshotFile`](crate::snapshot_file::SnapshotFile)),
//! so a restarted node can still serve it to a lagging follower after its log has been purged.
//! Encoding, decoding and writing it (tens of MB) happen on blocking threads.

use std::io::Cursor;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, StorageIOError};
use rocksdb::WriteBatch;

use crate::cluster_state::ClusterState;
use crate::command::Command;
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
const KEY_SNAPSHOT_META: &str = "current_meta";
const KEY_SNAPSHOT_DATA: &str = "current_data";

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

    /// Makes the snapshot of `meta` and `data` the current one and its state the applied one.
    async fn install(&mut self, meta: &SnapshotMeta, data: Vec<u8>) -> Result<(), StorageError> {
        let store = self.store.clone();
        let written = meta.clone();
        let started = std::time::Instant::now();
        let state = tokio::task::spawn_blocking(move || {
            let state = decode_state(&data)?;
            store.snapshot_file().write(&written, &data)?;
            forget_older_versions_keys(&store)?;
            Ok::<_, RaftStoreError>(state)
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        *self.state.write() = state;
        tracing::info!(
            snapshot_id = %meta.snapshot_id,
            took_ms = started.elapsed().as_millis() as u64,
            "installed snapshot"
        );
        Ok(())
    }
}

/// Removes the applied state and snapshot older versions kept in the database, once a newer
/// snapshot file covers them.
pub(crate) fn forget_older_versions_keys(store: &Store) -> Result<(), RaftStoreError> {
    let mut batch = WriteBatch::default();
    for key in [KEY_LAST_APPLIED, KEY_MEMBERSHIP, KEY_CLUSTER_STATE] {
        batch.delete_cf(store.cf(CF_STATE_MACHINE)?, key);
    }
    for key in [KEY_SNAPSHOT_META, KEY_SNAPSHOT_DATA] {
        batch.delete_cf(store.cf(CF_SNAPSHOT)?, key);
    }
    store.write(batch, false, "removal of older versions' keys")
}

pub(crate) fn encode_state(state: &ClusterState) -> Result<Vec<u8>, RaftStoreError> {
    serde_json::to_vec(state).map_err(|e| RaftStoreError::encode("cluster state", &e))
}

fn decode_state(data: &[u8]) -> Result<ClusterState, RaftStoreError> {
    serde_json::from_slice(data).map_err(|e| RaftStoreError::decode("cluster state", &e))
}

fn read_current_snapshot(store: &Store) -> Result<Option<(SnapshotMeta, Vec<u8>)>, RaftStoreError> {
    if let Some(current) = store.snapshot_file().read()? {
        return Ok(Some(current));
    }
    // a data directory of an older version keeps its snapshot in the database
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
                    if let Command::RenewLease { node } = &command {
                        let now = std::time::Instant::now();
                        self.state.receipts().applied(entry.log_id, *node, now);
                    }
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
        let started = std::time::Instant::now();
        let state = self.state.snapshot();
        tracing::debug!(
            took_ms = started.elapsed().as_millis() as u64,
            "copied the state for a snapshot"
        );
        ClusterSnapshotBuilder::new(
            self.store.clone(),
            self.last_applied,
            self.membership.clone(),
            state,
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
        self.install(meta, snapshot.into_inner()).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let store = self.store.clone();
        let current = tokio::task::spawn_blocking(move || read_current_snapshot(&store))
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(current.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::command::{Command, SpecJson};
    use openraft::RaftSnapshotBuilder;

    fn a_state() -> ClusterState {
        let mut state = ClusterState::default();
        state.apply(Command::CreatePipeline {
            name: "orders".into(),
            spec: SpecJson::new(serde_json::json!({"tables": {"include": ["shop.orders"]}})),
            incarnation: None,
        });
        state
    }

    /// A data directory of a version that kept the snapshot in RocksDB: it is loaded, and the
    /// first snapshot file written removes the old keys.
    #[tokio::test]
    async fn an_older_versions_snapshot_in_the_database_is_read_then_replaced_by_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = a_state();
        let meta = SnapshotMeta {
            last_log_id: Some(LogId::new(openraft::CommittedLeaderId::new(1, 1), 7)),
            last_membership: StoredMembership::default(),
            snapshot_id: "older".into(),
        };
        {
            let (_, sm) = Store::open(dir.path()).unwrap();
            let mut batch = WriteBatch::default();
            sm.store
                .put_json(&mut batch, CF_SNAPSHOT, KEY_SNAPSHOT_META, &meta, "meta")
                .unwrap();
            batch.put_cf(
                sm.store.cf(CF_SNAPSHOT).unwrap(),
                KEY_SNAPSHOT_DATA,
                encode_state(&state).unwrap(),
            );
            sm.store.write(batch, true, "older snapshot").unwrap();
        }
        let (_, mut sm) = Store::open(dir.path()).unwrap();
        assert_eq!(sm.cluster_state().snapshot(), state);
        assert_eq!(sm.last_applied(), meta.last_log_id);
        let current = sm.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, meta);
        assert!(!dir.path().join("snapshot.capstan").exists());

        let built = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        assert!(dir.path().join("snapshot.capstan").exists());
        let old: Option<SnapshotMeta> = sm
            .store
            .get_json(CF_SNAPSHOT, KEY_SNAPSHOT_META, "meta")
            .unwrap();
        assert!(
            old.is_none(),
            "the older version's snapshot keys are removed"
        );
        drop(sm);
        let (_, mut sm) = Store::open(dir.path()).unwrap();
        assert_eq!(sm.cluster_state().snapshot(), state);
        let current = sm.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, built.meta);
    }
}
