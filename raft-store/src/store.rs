//! One RocksDB database holding both halves of a node's Raft storage.
//!
//! Column families:
//!
//! | family          | keys                                                              |
//! |-----------------|-------------------------------------------------------------------|
//! | `logs`          | log index, 8 bytes big-endian → entry ([`LogStore`])              |
//! | `log_meta`      | `vote`, `committed`, `last_purged` ([`LogStore`])                 |
//! | `state_machine` | `last_applied`, `membership`, `cluster_state`: older versions'    |
//! | `snapshot`      | `current_meta`, `current_data`: older versions'                   |
//!
//! Older versions persisted the applied state and the snapshot in the database; such keys are
//! still read and are removed once a newer snapshot is written. The current snapshot is now a
//! file beside RocksDB's ([`SnapshotFile`]): written into the database it went through the
//! write-ahead log and held the Raft log's appends behind it. Applying persists nothing
//! ([`StateMachineStore`]): openraft applies the durable log after the snapshot again on
//! restart.
//!
//! Values are JSON.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, Options, WriteBatch, WriteOptions, DB};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::RaftStoreError;
use crate::log_store::LogStore;
use crate::snapshot_file::SnapshotFile;
use crate::state_machine::StateMachineStore;
use crate::wal_syncer::WalSyncer;

pub(crate) const CF_LOGS: &str = "logs";
pub(crate) const CF_LOG_META: &str = "log_meta";
pub(crate) const CF_STATE_MACHINE: &str = "state_machine";
pub(crate) const CF_SNAPSHOT: &str = "snapshot";

/// A write or log sync taking longer than this is logged: the raft core waits on votes,
/// truncations and (through the syncer) on appends being durable, so a slow disk shows as
/// missed heartbeats and elections.
pub(crate) const SLOW_WRITE: std::time::Duration = std::time::Duration::from_millis(100);

const COLUMN_FAMILIES: [&str; 4] = [CF_LOGS, CF_LOG_META, CF_STATE_MACHINE, CF_SNAPSHOT];

/// A shared handle on the node's Raft database; the log store and the state machine each
/// hold one.
#[derive(Clone, Debug)]
pub struct Store {
    db: Arc<DB>,
    snapshot: SnapshotFile,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and returns the two halves openraft
    /// needs: the log store and the state machine (loaded with the persisted cluster state).
    pub fn open(path: impl AsRef<Path>) -> Result<(LogStore, StateMachineStore), RaftStoreError> {
        let path = path.as_ref();
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        // table files written by flushes and compactions are synced every MiB as they are
        // written: on a journaling file system a synced log append otherwise waits for all of
        // a fresh table file's dirty pages (hundreds of ms for 64 MB)
        options.set_bytes_per_sync(1 << 20);
        options.set_wal_bytes_per_sync(1 << 20);
        let families = COLUMN_FAMILIES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, Options::default()));
        let db = DB::open_cf_descriptors(&options, path, families).map_err(|source| {
            RaftStoreError::Open {
                path: path.display().to_string(),
                source,
            }
        })?;
        let store = Store {
            db: Arc::new(db),
            snapshot: SnapshotFile::new(path),
        };
        for name in COLUMN_FAMILIES {
            store.cf(name)?;
        }
        let state_machine = StateMachineStore::load(store.clone())?;
        let state = state_machine.cluster_state();
        let syncer = WalSyncer::start(store.db.clone())
            .map_err(|source| RaftStoreError::Syncer { source })?;
        Ok((LogStore::new(store, state, syncer), state_machine))
    }

    pub(crate) fn db(&self) -> &DB {
        &self.db
    }

    /// The current snapshot's file.
    pub(crate) fn snapshot_file(&self) -> &SnapshotFile {
        &self.snapshot
    }

    pub(crate) fn cf(&self, name: &'static str) -> Result<&ColumnFamily, RaftStoreError> {
        self.db
            .cf_handle(name)
            .ok_or(RaftStoreError::MissingColumnFamily { name })
    }

    /// Reads and decodes the JSON value at `key` of family `cf`.
    pub(crate) fn get_json<T: DeserializeOwned>(
        &self,
        cf: &'static str,
        key: &str,
        what: &'static str,
    ) -> Result<Option<T>, RaftStoreError> {
        let bytes = self
            .db
            .get_cf(self.cf(cf)?, key)
            .map_err(|source| RaftStoreError::Read { what, source })?;
        bytes
            .map(|bytes| {
                serde_json::from_slice(&bytes).map_err(|e| RaftStoreError::decode(what, &e))
            })
            .transpose()
    }

    /// Adds the JSON encoding of `value` at `key` of family `cf` to `batch`.
    pub(crate) fn put_json<T: Serialize>(
        &self,
        batch: &mut WriteBatch,
        cf: &'static str,
        key: &str,
        value: &T,
        what: &'static str,
    ) -> Result<(), RaftStoreError> {
        let bytes = serde_json::to_vec(value).map_err(|e| RaftStoreError::encode(what, &e))?;
        batch.put_cf(self.cf(cf)?, key, bytes);
        Ok(())
    }

    /// Writes `batch` atomically; `sync` waits for the write-ahead log to reach the disk.
    pub(crate) fn write(
        &self,
        batch: WriteBatch,
        sync: bool,
        what: &'static str,
    ) -> Result<(), RaftStoreError> {
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        let bytes = batch.size_in_bytes();
        let started = std::time::Instant::now();
        let written = self
            .db
            .write_opt(batch, &options)
            .map_err(|source| RaftStoreError::Write { what, source });
        let took = started.elapsed();
        if took > SLOW_WRITE {
            tracing::warn!(
                what,
                bytes,
                sync,
                took_ms = took.as_millis() as u64,
                "slow raft storage write; the raft core waits on it (see heartbeat_interval_ms)"
            );
        }
        written
    }
}
