//! The Raft log on RocksDB: entries keyed by big-endian index (so key order is index order),
//! and the vote, committed log id and last purged log id beside them.
//!
//! Appends, votes and purges are synced before they are acknowledged: openraft counts a node
//! in a quorum as soon as its log I/O completes, so an acknowledged entry must survive a crash.
//! An append is written unsynced and acknowledged by the [`WalSyncer`] once the write-ahead log
//! is on disk (group commit), so the Raft core never waits on an append's fsync; votes,
//! truncations and purges are rare and sync inline, truncations and purges behind the appends
//! queued before them. The committed log id is written unsynced; losing it only means openraft
//! re-learns it.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, RaftLogReader, StorageIOError};
use rocksdb::{Direction, IteratorMode, WriteBatch};

use crate::command::Command;
use crate::error::RaftStoreError;
use crate::shared_cluster_state::SharedClusterState;
use crate::store::{Store, CF_LOGS, CF_LOG_META};
use crate::type_config::{Entry, LogId, StorageError, TypeConfig, Vote};
use crate::wal_syncer::WalSyncer;

const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_LAST_PURGED: &str = "last_purged";

/// The RocksDB Raft log of one node. Cheap to clone; clones share the database.
#[derive(Clone, Debug)]
pub struct LogStore {
    store: Store,
    /// Where the receipt times of lease renewals are noted (for the lease tracker).
    state: SharedClusterState,
    /// Makes appends durable and acknowledges them.
    syncer: WalSyncer,
}

impl LogStore {
    pub(crate) fn new(store: Store, state: SharedClusterState, syncer: WalSyncer) -> Self {
        LogStore {
            store,
            state,
            syncer,
        }
    }

    fn last_purged(&self) -> Result<Option<LogId>, RaftStoreError> {
        self.store
            .get_json(CF_LOG_META, KEY_LAST_PURGED, "last purged log id")
    }

    fn last_entry_log_id(&self) -> Result<Option<LogId>, RaftStoreError> {
        let cf = self.store.cf(CF_LOGS)?;
        let mut entries = self.store.db().iterator_cf(cf, IteratorMode::End);
        match entries.next() {
            None => Ok(None),
            Some(item) => {
                let (_, value) = item.map_err(|source| RaftStoreError::Read {
                    what: "last log entry",
                    source,
                })?;
                let entry = decode_entry(&value)?;
                Ok(Some(entry.log_id))
            }
        }
    }

    /// Entries with index in `[start, end)`, in order.
    fn entries(&self, start: u64, end: Option<u64>) -> Result<Vec<Entry>, RaftStoreError> {
        let cf = self.store.cf(CF_LOGS)?;
        let from = start.to_be_bytes();
        let iter = self
            .store
            .db()
            .iterator_cf(cf, IteratorMode::From(&from, Direction::Forward));
        let mut out = Vec::new();
        for item in iter {
            let (key, value) = item.map_err(|source| RaftStoreError::Read {
                what: "log entries",
                source,
            })?;
            let index = decode_index(&key)?;
            if end.is_some_and(|end| index >= end) {
                break;
            }
            out.push(decode_entry(&value)?);
        }
        Ok(out)
    }

    fn append_entries(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<(), RaftStoreError> {
        let cf = self.store.cf(CF_LOGS)?;
        let mut batch = WriteBatch::default();
        let received = std::time::Instant::now();
        let mut renewals = Vec::new();
        for entry in entries {
            if let EntryPayload::Normal(Command::RenewLease { .. }) = &entry.payload {
                renewals.push(entry.log_id);
            }
            let bytes =
                serde_json::to_vec(&entry).map_err(|e| RaftStoreError::encode("log entry", &e))?;
            batch.put_cf(cf, entry.log_id.index.to_be_bytes(), bytes);
        }
        // readable at once; durable when the syncer completes the callback
        self.store.write(batch, false, "log entries")?;
        if !renewals.is_empty() {
            let mut receipts = self.state.receipts();
            for log_id in renewals {
                receipts.appended(log_id, received);
            }
        }
        Ok(())
    }

    /// Deletes the entries with index in `[from, to)`, first recording `last_purged` if given.
    fn delete_entries(
        &self,
        from: u64,
        to: u64,
        last_purged: Option<&LogId>,
    ) -> Result<(), RaftStoreError> {
        let mut batch = WriteBatch::default();
        if let Some(log_id) = last_purged {
            self.store.put_json(
                &mut batch,
                CF_LOG_META,
                KEY_LAST_PURGED,
                log_id,
                "last purged log id",
            )?;
        }
        if from < to {
            batch.delete_range_cf(
                self.store.cf(CF_LOGS)?,
                from.to_be_bytes(),
                to.to_be_bytes(),
            );
        }
        self.store.write(batch, true, "log truncation")
    }

    fn put_meta<T: serde::Serialize>(
        &self,
        key: &str,
        value: &T,
        sync: bool,
        what: &'static str,
    ) -> Result<(), RaftStoreError> {
        let mut batch = WriteBatch::default();
        self.store
            .put_json(&mut batch, CF_LOG_META, key, value, what)?;
        self.store.write(batch, sync, what)
    }
}

fn decode_index(key: &[u8]) -> Result<u64, RaftStoreError> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| RaftStoreError::MalformedLogKey { len: key.len() })?;
    Ok(u64::from_be_bytes(bytes))
}

fn decode_entry(bytes: &[u8]) -> Result<Entry, RaftStoreError> {
    serde_json::from_slice(bytes).map_err(|e| RaftStoreError::decode("log entry", &e))
}

fn read_logs_error(error: RaftStoreError) -> StorageError {
    StorageIOError::read_logs(&error).into()
}

fn write_logs_error(error: RaftStoreError) -> StorageError {
    StorageIOError::write_logs(&error).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&n) => n,
            Bound::Excluded(&n) => n.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&n) => n.checked_add(1),
            Bound::Excluded(&n) => Some(n),
            Bound::Unbounded => None,
        };
        self.entries(start, end).map_err(read_logs_error)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.last_purged().map_err(read_logs_error)?;
        let last_log_id = self
            .last_entry_log_id()
            .map_err(read_logs_error)?
            .or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.put_meta(KEY_VOTE, vote, true, "vote")
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.store
            .get_json(CF_LOG_META, KEY_VOTE, "vote")
            .map_err(|e| StorageIOError::read_vote(&e).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.put_meta(KEY_COMMITTED, &committed, false, "committed log id")
            .map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        self.store
            .get_json::<Option<LogId>>(CF_LOG_META, KEY_COMMITTED, "committed log id")
            .map(Option::flatten)
            .map_err(|e| StorageIOError::read(&e).into())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        match self.append_entries(entries) {
            Ok(()) => {
                self.syncer.flushed(callback);
                Ok(())
            }
            Err(error) => {
                callback.log_io_completed(Err(std::io::Error::other(error.to_string())));
                Err(write_logs_error(error))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(index = log_id.index, "truncating raft log");
        self.syncer.barrier().await;
        self.state.receipts().truncated(log_id.index);
        self.delete_entries(log_id.index, u64::MAX, None)
            .map_err(write_logs_error)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(index = log_id.index, "purging raft log");
        self.syncer.barrier().await;
        self.delete_entries(0, log_id.index.saturating_add(1), Some(&log_id))
            .map_err(write_logs_error)
    }
}
