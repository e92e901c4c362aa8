//! Builds a snapshot from a copy of the state taken when openraft asked for the builder, so
//! the state machine keeps applying while the snapshot is written.

use std::io::Cursor;

use openraft::{RaftSnapshotBuilder, StorageIOError};

use crate::cluster_state::ClusterState;
use crate::error::RaftStoreError;
use crate::state_machine::{encode_state, forget_older_versions_keys};
use crate::store::Store;
use crate::type_config::{
    LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

/// Writes a snapshot of the cluster state as of one applied log id and makes it the current
/// one.
#[derive(Debug)]
pub struct ClusterSnapshotBuilder {
    store: Store,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: ClusterState,
    seq: u64,
}

impl ClusterSnapshotBuilder {
    pub(crate) fn new(
        store: Store,
        last_applied: Option<LogId>,
        membership: StoredMembership,
        state: ClusterState,
        seq: u64,
    ) -> Self {
        ClusterSnapshotBuilder {
            store,
            last_applied,
            membership,
            state,
            seq,
        }
    }

    fn build(&self) -> Result<Snapshot, RaftStoreError> {
        let started = std::time::Instant::now();
        let data = encode_state(&self.state)?;
        let encoded_ms = started.elapsed().as_millis() as u64;
        let snapshot_id = match &self.last_applied {
            Some(log_id) => format!("{}-{}-{}", log_id.leader_id, log_id.index, self.seq),
            None => format!("none-{}", self.seq),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        self.store.snapshot_file().write(&meta, &data)?;
        forget_older_versions_keys(&self.store)?;
        tracing::info!(
            snapshot_id = %meta.snapshot_id,
            bytes = data.len(),
            encoded_ms,
            took_ms = started.elapsed().as_millis() as u64,
            "built snapshot"
        );
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for ClusterSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        // encoding and writing a large state takes a while (tens of MB): off the runtime's
        // worker threads, which answer the raft rpcs meanwhile
        let builder = ClusterSnapshotBuilder {
            store: self.store.clone(),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            state: std::mem::take(&mut self.state),
            seq: self.seq,
        };
        let built = tokio::task::spawn_blocking(move || builder.build())
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        built.map_err(|e| StorageIOError::write_snapshot(None, &e).into())
    }
}
