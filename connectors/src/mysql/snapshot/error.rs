//! [`SnapshotError`]: why the snapshot reader refuses a table, a chunk or a connection.
//!
//! Every variant has a stable snake_case [`SnapshotError::code`]. Messages are lowercase and
//! value-free: they may name a schema, table, column, character set or collation (identifiers),
//! never a row, column or key value, a password, or a server error message (which can quote
//! statements and values) — only the server's error code.

use capstan_core::change::TableId;

use crate::mysql::replica_conn::ServerOrIo;

/// A refusal or failure of the snapshot reader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// `resolve_all_tables` found no base table the filter admits.
    #[error("no base tables to snapshot")]
    NoBaseTables,
    /// The table does not exist (or is not a base table).
    #[error("snapshot table not found: {table}")]
    TableNotFound {
        /// The table.
        table: TableId,
    },
    /// No primary key, and no unique key whose columns are all NOT NULL.
    #[error("snapshot table has no primary key or not-null unique key: {table}")]
    TableNoPrimaryKey {
        /// The table.
        table: TableId,
    },
    /// A key column type outside the order-faithful allowlist (or a prefix key part).
    #[error("snapshot key column type unsupported: {table} column {column} ({data_type})")]
    PkUnsupportedType {
        /// The table.
        table: TableId,
        /// The key column.
        column: String,
        /// Its declared type name (`text`, `decimal`, `enum`, …; `prefix` for a prefix part).
        data_type: String,
    },
    /// A non-key column whose type the reader cannot convert exactly as the binlog does
    /// (e.g. MariaDB `UUID`/`INET6`).
    #[error("snapshot column type unsupported: {table} column {column} ({data_type})")]
    ColumnUnsupportedType {
        /// The table.
        table: TableId,
        /// The column.
        column: String,
        /// Its declared type name.
        data_type: String,
    },
    /// `LOCK TABLES … READ` failed: missing privilege or lock-wait timeout.
    #[error("snapshot lock unavailable on {table}: server error {code}")]
    LockUnavailable {
        /// The table.
        table: TableId,
        /// The server error code (0 when the failure was not a server error).
        code: u16,
    },
    /// The table's structure differs from what `describe` saw.
    #[error("snapshot schema drifted: {table}: {reason}")]
    SchemaDrifted {
        /// The table.
        table: TableId,
        /// What differs, value-free.
        reason: &'static str,
    },
    /// `WEIGHT_STRING` order disagrees with `ORDER BY` order under the collation.
    #[error("snapshot collation contract violated: {collation}")]
    CollationContractViolated {
        /// The collation.
        collation: String,
    },
    /// Computing collation weights failed on the server.
    #[error("snapshot key weight query failed: server error {code}")]
    WeightFailed {
        /// The server error code (0 when the failure was not a server error).
        code: u16,
    },
    /// A row's key value is NULL or not of the key column's kind.
    #[error("snapshot key value invalid: column {column}: expected {expected}, got {got}")]
    KeyValueInvalid {
        /// The key column.
        column: String,
        /// The kind the key column needs.
        expected: &'static str,
        /// The kind the row holds.
        got: &'static str,
    },
    /// A character set or collation name from the server is not a plain identifier.
    #[error("snapshot identifier invalid: {what}")]
    InvalidIdentifier {
        /// Which identifier (`charset`, `collation`).
        what: &'static str,
    },
    /// A key (cursor) does not match the table's key shape.
    #[error("snapshot cursor does not match the key of {table}")]
    CursorShapeMismatch {
        /// The table.
        table: TableId,
    },
    /// The configured position capture does not exist on this flavour (binlog snapshot on
    /// MySQL).
    #[error("snapshot position capture unsupported on {flavor}")]
    CaptureUnsupported {
        /// The server flavour.
        flavor: &'static str,
    },
    /// Connecting the query connection (or its session setup) failed.
    #[error("snapshot query connection failed: server error {code}")]
    ConnectFailed {
        /// The server error code (0 for a socket or protocol failure).
        code: u16,
    },
    /// The query connection's TLS handshake refused the server (certificate not signed by
    /// the configured CA, no TLS offered, unreadable CA file): definite, as for the stream.
    #[error("snapshot query connection tls failed: {reason}")]
    TlsFailed {
        /// What failed, value-free.
        reason: &'static str,
    },
    /// Reading the executed position (P0) failed or returned something unreadable.
    #[error("snapshot executed position read failed: server error {code}")]
    PositionReadFailed {
        /// The server error code (0 when unreadable or not a server error).
        code: u16,
    },
    /// A chunk read (position capture, select, commit) failed.
    #[error("snapshot chunk read failed on {table}: {site}: server error {code}")]
    ChunkReadFailed {
        /// The table.
        table: TableId,
        /// Which step, value-free.
        site: &'static str,
        /// The server error code (0 when not a server error).
        code: u16,
    },
    /// A metadata query (information_schema, server identity) failed.
    #[error("snapshot query failed: {site}: server error {code}")]
    QueryFailed {
        /// Which query, value-free.
        site: &'static str,
        /// The server error code (0 when not a server error).
        code: u16,
    },
    /// A new query connection reached another server than the stream reads.
    #[error("snapshot query connection reached another server than the stream")]
    SourceMismatch,
    /// A column control (exclude, mask, hash) names a key column of the table.
    #[error("column {column} of {table} is a key column and cannot be excluded, masked or hashed")]
    ColumnControlOnKey {
        /// The table.
        table: TableId,
        /// The column.
        column: String,
    },
    /// A column value of a chunk row could not be converted.
    #[error("snapshot value decode failed: {table} column {column}: {reason}")]
    ValueDecodeFailed {
        /// The table.
        table: TableId,
        /// The column.
        column: String,
        /// What is wrong, value-free.
        reason: &'static str,
    },
}

impl SnapshotError {
    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SnapshotError::NoBaseTables => "snapshot_no_base_tables",
            SnapshotError::TableNotFound { .. } => "snapshot_table_not_found",
            SnapshotError::TableNoPrimaryKey { .. } => "snapshot_table_no_primary_key",
            SnapshotError::PkUnsupportedType { .. } => "snapshot_pk_unsupported_type",
            SnapshotError::ColumnUnsupportedType { .. } => "snapshot_column_unsupported_type",
            SnapshotError::LockUnavailable { .. } => "snapshot_lock_unavailable",
            SnapshotError::SchemaDrifted { .. } => "snapshot_schema_drifted",
            SnapshotError::CollationContractViolated { .. } => {
                "snapshot_collation_contract_violated"
            }
            SnapshotError::WeightFailed { .. } => "snapshot_pk_weight_failed",
            SnapshotError::KeyValueInvalid { .. } => "snapshot_key_value_invalid",
            SnapshotError::ColumnControlOnKey { .. } => "column_control_on_key",
            SnapshotError::InvalidIdentifier { .. } => "snapshot_identifier_invalid",
            SnapshotError::CursorShapeMismatch { .. } => "snapshot_cursor_shape_mismatch",
            SnapshotError::CaptureUnsupported { .. } => "snapshot_capture_unsupported",
            SnapshotError::ConnectFailed { .. } => "snapshot_query_connect_failed",
            SnapshotError::TlsFailed { .. } => "snapshot_query_tls_failed",
            SnapshotError::PositionReadFailed { .. } => "snapshot_bootstrap_gtid_read_failed",
            SnapshotError::ChunkReadFailed { .. } => "snapshot_chunk_read_failed",
            SnapshotError::QueryFailed { .. } => "snapshot_query_failed",
            SnapshotError::ValueDecodeFailed { .. } => "snapshot_value_decode_failed",
            SnapshotError::SourceMismatch => "snapshot_source_mismatch",
        }
    }

    /// True for failures a new connection may cure (a lost socket, a server going away, a
    /// lock-wait timeout): the caller may reopen the reader and retry within its budget.
    /// Everything else (a refused table, drift, a contract violation) is definite.
    pub fn is_transient(&self) -> bool {
        match self {
            SnapshotError::ConnectFailed { code }
            | SnapshotError::PositionReadFailed { code }
            | SnapshotError::ChunkReadFailed { code, .. }
            | SnapshotError::QueryFailed { code, .. }
            | SnapshotError::WeightFailed { code } => *code == 0 || is_transient_code(*code),
            // 1205: lock wait timeout
            SnapshotError::LockUnavailable { code, .. } => *code == 0 || *code == 1205,
            _ => false,
        }
    }
}

/// Server error codes that mean "going away or busy", not "you are wrong".
fn is_transient_code(code: u16) -> bool {
    matches!(
        code,
        1040 | 1053 | 1077 | 1152 | 1158..=1161 | 1205 | 1213 | 1317 | 1927 | 2006 | 2013
    )
}

/// The server error code of a failed query (0 for anything else). The server's message is
/// never read here: it can quote statements and values.
pub(crate) fn server_code(e: &ServerOrIo) -> u16 {
    match e {
        ServerOrIo::Server(s) => s.code,
        ServerOrIo::Source(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_messages_lowercase_and_value_free() {
        let t = TableId::new("shop", "orders");
        let all = [
            SnapshotError::NoBaseTables,
            SnapshotError::SourceMismatch,
            SnapshotError::TableNotFound { table: t.clone() },
            SnapshotError::TableNoPrimaryKey { table: t.clone() },
            SnapshotError::PkUnsupportedType {
                table: t.clone(),
                column: "id".into(),
                data_type: "text".into(),
            },
            SnapshotError::LockUnavailable {
                table: t.clone(),
                code: 1205,
            },
            SnapshotError::SchemaDrifted {
                table: t.clone(),
                reason: "column count",
            },
            SnapshotError::KeyValueInvalid {
                column: "id".into(),
                expected: "int",
                got: "null",
            },
            SnapshotError::ChunkReadFailed {
                table: t,
                site: "select",
                code: 0,
            },
        ];
        for e in &all {
            assert!(e.code().starts_with("snapshot_"));
            assert!(e.code().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            let msg = e.to_string();
            assert!(!msg.ends_with('.'));
        }
        assert!(SnapshotError::ChunkReadFailed {
            table: TableId::new("a", "b"),
            site: "select",
            code: 2013
        }
        .is_transient());
        assert!(!SnapshotError::NoBaseTables.is_transient());
    }
}
