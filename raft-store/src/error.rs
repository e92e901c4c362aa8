//! The crate's error type: storage failures, each with a stable code.
//!
//! Messages never quote stored bytes: a decoding failure reports where it happened, not what
//! it read, because the stored state holds pipeline definitions (credentials) and primary-key
//! cursors (row values).

/// A failure of the RocksDB-backed Raft store.
#[derive(Debug, thiserror::Error)]
pub enum RaftStoreError {
    /// RocksDB refused to open the store.
    #[error("cannot open the raft store at {path}: {source}")]
    Open {
        /// The store directory.
        path: String,
        /// RocksDB's reason.
        source: rocksdb::Error,
    },
    /// A column family the store needs is absent.
    #[error("column family {name} is missing from the raft store")]
    MissingColumnFamily {
        /// The column family.
        name: &'static str,
    },
    /// A read failed.
    #[error("cannot read {what} from the raft store: {source}")]
    Read {
        /// What was being read.
        what: &'static str,
        /// RocksDB's reason.
        source: rocksdb::Error,
    },
    /// A write failed.
    #[error("cannot write {what} to the raft store: {source}")]
    Write {
        /// What was being written.
        what: &'static str,
        /// RocksDB's reason.
        source: rocksdb::Error,
    },
    /// A value could not be serialized.
    #[error("cannot encode {what}: {category} error")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The kind of failure (io, syntax, data, eof).
        category: &'static str,
    },
    /// A stored value could not be deserialized.
    #[error("cannot decode {what}: {category} error at line {line} column {column}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// The kind of failure (io, syntax, data, eof).
        category: &'static str,
        /// Line of the failure in the stored JSON.
        line: usize,
        /// Column of the failure in the stored JSON.
        column: usize,
    },
    /// The snapshot file could not be created, written, synced, renamed or read.
    #[error("cannot {op} the snapshot file {path}: {source}")]
    SnapshotFile {
        /// The operation that failed.
        op: &'static str,
        /// The file.
        path: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The snapshot file does not have the layout capstan writes (it was cut short).
    #[error("the snapshot file {path} is malformed")]
    MalformedSnapshotFile {
        /// The file.
        path: String,
    },
    /// The thread that syncs the Raft log could not be started.
    #[error("cannot start the raft log syncer thread: {source}")]
    Syncer {
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A log key was not an 8-byte big-endian index.
    #[error("malformed log key of {len} bytes in the raft store")]
    MalformedLogKey {
        /// The key's length.
        len: usize,
    },
}

impl RaftStoreError {
    /// A stable snake_case code for the REST API and logs.
    pub fn code(&self) -> &'static str {
        match self {
            RaftStoreError::Open { .. } => "raft_store_open_failed",
            RaftStoreError::MissingColumnFamily { .. } => "raft_store_column_family_missing",
            RaftStoreError::Read { .. } => "raft_store_read_failed",
            RaftStoreError::Write { .. } => "raft_store_write_failed",
            RaftStoreError::Encode { .. } => "raft_store_encode_failed",
            RaftStoreError::Decode { .. } => "raft_store_decode_failed",
            RaftStoreError::MalformedLogKey { .. } => "raft_store_malformed_log_key",
            RaftStoreError::SnapshotFile { .. } => "raft_store_snapshot_file_failed",
            RaftStoreError::MalformedSnapshotFile { .. } => "raft_store_malformed_snapshot_file",
            RaftStoreError::Syncer { .. } => "raft_store_syncer_failed",
        }
    }

    /// An encoding failure of `what`, without the offending value.
    pub fn encode(what: &'static str, error: &serde_json::Error) -> Self {
        RaftStoreError::Encode {
            what,
            category: category_name(error),
        }
    }

    /// A decoding failure of `what`, with its location but not the offending bytes.
    pub fn decode(what: &'static str, error: &serde_json::Error) -> Self {
        RaftStoreError::Decode {
            what,
            category: category_name(error),
            line: error.line(),
            column: error.column(),
        }
    }
}

fn category_name(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Io => "io",
        serde_json::error::Category::Syntax => "syntax",
        serde_json::error::Category::Data => "data",
        serde_json::error::Category::Eof => "eof",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_errors_do_not_quote_the_input() {
        let error = serde_json::from_str::<u64>("\"hunter2\"").unwrap_err();
        let ours = RaftStoreError::decode("state", &error);
        let text = ours.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(text, "cannot decode state: data error at line 1 column 9");
        assert_eq!(ours.code(), "raft_store_decode_failed");
    }
}
