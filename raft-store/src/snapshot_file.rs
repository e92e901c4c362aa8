//! The current snapshot as one file in the store's directory, beside RocksDB's own files.
//!
//! A snapshot is the whole cluster state (tens of MB with hundreds of wide pipelines). Written
//! into RocksDB it went through the write-ahead log shared with the Raft log: a synced write of
//! 20 MB held every log append behind it for hundreds of milliseconds, the Raft core waited on
//! that append, and followers missed heartbeats and called elections. As a file it is written
//! and synced on a blocking thread while the log goes on.
//!
//! Layout: the magic `CAPSNAP1`, the metadata's JSON length (8 bytes, big-endian), the
//! metadata's JSON (openraft's last log id, membership and snapshot id), then the data (the
//! cluster state's JSON). It is written to a temporary file, synced, renamed over the current
//! one and the directory synced, so a crash leaves either the old snapshot or the new one.
//! RocksDB leaves the file alone: it only removes files whose names it gave.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::RaftStoreError;
use crate::type_config::SnapshotMeta;

const MAGIC: &[u8; 8] = b"CAPSNAP1";
const NAME: &str = "snapshot.capstan";
const TEMPORARY: &str = "snapshot.capstan.tmp";
/// Bytes written between two syncs of the file.
const SYNC_EVERY: usize = 1 << 20;

/// The current snapshot's file in a store directory.
#[derive(Clone, Debug)]
pub(crate) struct SnapshotFile {
    dir: PathBuf,
}

impl SnapshotFile {
    /// The snapshot file of the store at `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        SnapshotFile {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(NAME)
    }

    fn io_error(&self, op: &'static str, source: std::io::Error) -> RaftStoreError {
        RaftStoreError::SnapshotFile {
            op,
            path: self.path().display().to_string(),
            source,
        }
    }

    /// Makes `meta` and `data` the current snapshot, durably.
    pub(crate) fn write(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<(), RaftStoreError> {
        let meta_json = serde_json::to_vec(meta)
            .map_err(|e| RaftStoreError::encode("snapshot metadata", &e))?;
        let temporary = self.dir.join(TEMPORARY);
        let mut file = File::create(&temporary).map_err(|e| self.io_error("create", e))?;
        let meta_len = u64::try_from(meta_json.len()).unwrap_or(u64::MAX);
        file.write_all(MAGIC)
            .and_then(|()| file.write_all(&meta_len.to_be_bytes()))
            .and_then(|()| file.write_all(&meta_json))
            .map_err(|e| self.io_error("write", e))?;
        // synced as it goes: on a journaling file system (ext4's ordered mode) the Raft log's
        // next fsync would otherwise have to flush all of the file's dirty pages first
        for chunk in data.chunks(SYNC_EVERY) {
            file.write_all(chunk)
                .map_err(|e| self.io_error("write", e))?;
            file.sync_data().map_err(|e| self.io_error("sync", e))?;
        }
        file.sync_all().map_err(|e| self.io_error("sync", e))?;
        drop(file);
        std::fs::rename(&temporary, self.path()).map_err(|e| self.io_error("rename", e))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io_error("sync directory", e))
    }

    /// The current snapshot, if one was written.
    pub(crate) fn read(&self) -> Result<Option<(SnapshotMeta, Vec<u8>)>, RaftStoreError> {
        let mut file = match File::open(self.path()) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error("open", e)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| self.io_error("read", e))?;
        let malformed = || RaftStoreError::MalformedSnapshotFile {
            path: self.path().display().to_string(),
        };
        let rest = bytes.strip_prefix(MAGIC).ok_or_else(malformed)?;
        let (len, rest) = rest.split_first_chunk::<8>().ok_or_else(malformed)?;
        let meta_len = usize::try_from(u64::from_be_bytes(*len)).map_err(|_| malformed())?;
        if rest.len() < meta_len {
            return Err(malformed());
        }
        let meta: SnapshotMeta = serde_json::from_slice(&rest[..meta_len])
            .map_err(|e| RaftStoreError::decode("snapshot metadata", &e))?;
        let start = bytes.len() - (rest.len() - meta_len);
        Ok(Some((meta, bytes.split_off(start))))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::type_config::StoredMembership;

    fn meta(id: &str) -> SnapshotMeta {
        SnapshotMeta {
            last_log_id: None,
            last_membership: StoredMembership::default(),
            snapshot_id: id.to_owned(),
        }
    }

    #[test]
    fn a_written_snapshot_reads_back_and_a_newer_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = SnapshotFile::new(dir.path());
        assert!(file.read().unwrap().is_none());
        file.write(&meta("a"), b"{\"first\":1}").unwrap();
        file.write(&meta("b"), b"{\"second\":2}").unwrap();
        let (read_meta, data) = file.read().unwrap().unwrap();
        assert_eq!(read_meta, meta("b"));
        assert_eq!(data, b"{\"second\":2}");
        assert!(!dir.path().join(TEMPORARY).exists());
    }

    #[test]
    fn a_truncated_file_is_a_clear_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = SnapshotFile::new(dir.path());
        file.write(&meta("a"), b"data").unwrap();
        let whole = std::fs::read(dir.path().join(NAME)).unwrap();
        for cut in [0, 5, 12, 20] {
            std::fs::write(dir.path().join(NAME), &whole[..cut]).unwrap();
            let err = file.read().unwrap_err();
            assert!(
                matches!(
                    err.code(),
                    "raft_store_malformed_snapshot_file" | "raft_store_decode_failed"
                ),
                "{cut}: {err}"
            );
        }
    }
}
