//! Why the binlog source stops: every condition that could otherwise lose or corrupt data
//! silently is a [`Halt`]. Each variant has a stable snake_case [`Halt::code`] that the
//! pipeline status and the REST API show; messages are lowercase and carry only structure
//! (event type codes, table ids, column indexes, sizes), never a row value or statement text.

/// A fail-closed stop of the binlog source (the pure half: parsing, assembly, decoding).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Halt {
    /// An event's bytes could not be parsed (truncated, malformed, inconsistent lengths).
    #[error("event parse failed: event type {event_type}: {reason}")]
    EventParseFailed {
        /// Raw event type byte (0 when the header itself was unreadable).
        event_type: u8,
        /// What was wrong, value-free.
        reason: &'static str,
    },
    /// An event's CRC32 does not match its bytes.
    #[error("checksum mismatch: event type {event_type}")]
    ChecksumMismatch {
        /// Raw event type byte.
        event_type: u8,
    },
    /// An event type this source does not know and that is not flagged ignorable.
    #[error("unknown event type {event_type}")]
    UnknownEventType {
        /// Raw event type byte.
        event_type: u8,
    },
    /// A TABLE_MAP or rows event outside a transaction.
    #[error("rows event without a transaction")]
    RowsWithoutTransaction,
    /// A BEGIN (or XA START) not preceded by a GTID event.
    #[error("begin without gtid")]
    BeginWithoutGtid,
    /// A statement (DDL or other) outside a GTID transaction.
    #[error("statement without gtid")]
    StatementWithoutGtid,
    /// A GTID event while a transaction is still open.
    #[error("gtid inside an open transaction")]
    GtidInsideTransaction,
    /// A commit (XID, COMMIT) with no open transaction.
    #[error("commit without transaction")]
    CommitWithoutTransaction,
    /// An anonymous GTID: the source runs with `gtid_mode` off.
    #[error("anonymous transaction: gtid_mode is not on")]
    AnonymousTransaction,
    /// A rows event names a table id no TABLE_MAP of this transaction mapped.
    #[error("unmapped table id {table_id}")]
    UnmappedTableId {
        /// The table id.
        table_id: u64,
    },
    /// A column type or value outside the decoded breadth, or a value inconsistent with the
    /// table map (a SET bit beyond the declared members, an ENUM index out of range, …).
    #[error("unsupported column type {type_code} at column {column}: {reason}")]
    UnsupportedColumnType {
        /// Zero-based column index.
        column: usize,
        /// Binlog column type code.
        type_code: u8,
        /// What is unsupported, value-free (e.g. `set_member_out_of_range`).
        reason: &'static str,
    },
    /// A row image could not be decoded against its table map.
    #[error("row decode failed at column {column}: {reason}")]
    RowDecodeFailed {
        /// Zero-based column index (the column count when the image was too long).
        column: usize,
        /// What was wrong, value-free.
        reason: &'static str,
    },
    /// A row image without all columns (`binlog_row_image` is not FULL).
    #[error("partial row image: binlog_row_image is not full")]
    PartialRowImage,
    /// A TABLE_MAP without the optional metadata capstan needs (`binlog_row_metadata` is not
    /// FULL).
    #[error("table map metadata missing: {missing}")]
    TableMapMetadataMissing {
        /// Which metadata field is missing.
        missing: &'static str,
    },
    /// A partial JSON update (`binlog_row_value_options=PARTIAL_JSON`) or another rows event
    /// shape capstan refuses.
    #[error("unsupported rows event: {reason}")]
    UnsupportedRowsEvent {
        /// Which shape, value-free.
        reason: &'static str,
    },
    /// Statement-based DML in the stream (`binlog_format` is not ROW).
    #[error("statement-based change in the binlog: binlog_format is not row")]
    StatementBasedChange,
    /// An XA transaction under `xa: refuse`, a rollback of logged rows, a savepoint rollback,
    /// or another transaction shape capstan refuses.
    #[error("unsupported transaction shape: {reason}")]
    UnsupportedTransactionShape {
        /// Which shape, value-free.
        reason: &'static str,
    },
    /// `xa: track`: the pool of prepared, unresolved XA transactions is full. Never evicts.
    #[error("xa prepared pool exhausted: more than {limit} unresolved xa prepares")]
    XaPreparedPoolExhausted {
        /// The configured bound.
        limit: usize,
    },
    /// `xa: track`: an XA COMMIT for a prepare neither seen in the stream nor listed by
    /// `XA RECOVER` at connect.
    #[error("xa commit without a known prepare")]
    XaCommitWithoutPrepare,
    /// `xa: track`: an XA ROLLBACK for a prepare neither seen in the stream nor listed by
    /// `XA RECOVER` at connect.
    #[error("xa rollback without a known prepare")]
    XaRollbackWithoutPrepare,
    /// An INCIDENT event: the source says its binlog may be missing changes.
    #[error("incident event: the source binlog may be missing changes")]
    Incident,
    /// A TRANSACTION_PAYLOAD whose declared or inflated size exceeds the envelope.
    #[error("transaction payload too large: {size} bytes exceeds {limit}")]
    PayloadTooLarge {
        /// Declared or observed size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A column control (exclude, mask, hash) names a key column of a captured table: the
    /// record key and compaction need its real value.
    #[error("column {column} of {table} is a key column and cannot be excluded, masked or hashed")]
    ColumnControlOnKey {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
    },
    /// A corrupt TRANSACTION_PAYLOAD: bad compression type, zstd error, size mismatch,
    /// malformed inner events.
    #[error("transaction payload corrupt: {reason}")]
    PayloadCorrupt {
        /// What was wrong, value-free.
        reason: &'static str,
    },
}

impl Halt {
    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Halt::EventParseFailed { .. } => "event_parse_failed",
            Halt::ChecksumMismatch { .. } => "checksum_mismatch",
            Halt::UnknownEventType { .. } => "unknown_event_type",
            Halt::RowsWithoutTransaction => "rows_without_transaction",
            Halt::BeginWithoutGtid => "begin_without_gtid",
            Halt::StatementWithoutGtid => "statement_without_gtid",
            Halt::GtidInsideTransaction => "gtid_inside_transaction",
            Halt::CommitWithoutTransaction => "commit_without_transaction",
            Halt::AnonymousTransaction => "anonymous_transaction",
            Halt::UnmappedTableId { .. } => "unmapped_table_id",
            Halt::UnsupportedColumnType { .. } => "unsupported_column_type",
            Halt::RowDecodeFailed { .. } => "row_decode_failed",
            Halt::PartialRowImage => "partial_row_image",
            Halt::TableMapMetadataMissing { .. } => "table_map_metadata_missing",
            Halt::UnsupportedRowsEvent { .. } => "unsupported_rows_event",
            Halt::StatementBasedChange => "statement_based_change",
            Halt::UnsupportedTransactionShape { .. } => "unsupported_transaction_shape",
            Halt::XaPreparedPoolExhausted { .. } => "xa_prepared_pool_exhausted",
            Halt::XaCommitWithoutPrepare => "xa_commit_without_prepare",
            Halt::XaRollbackWithoutPrepare => "xa_rollback_without_prepare",
            Halt::Incident => "incident",
            Halt::PayloadTooLarge { .. } => "payload_too_large",
            Halt::PayloadCorrupt { .. } => "payload_corrupt",
            Halt::ColumnControlOnKey { .. } => "column_control_on_key",
        }
    }

    pub(crate) fn parse(event_type: u8, reason: &'static str) -> Self {
        Halt::EventParseFailed { event_type, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_messages_lowercase() {
        let halts = [
            Halt::parse(30, "truncated"),
            Halt::ChecksumMismatch { event_type: 2 },
            Halt::UnmappedTableId { table_id: 7 },
            Halt::XaPreparedPoolExhausted { limit: 3 },
            Halt::XaCommitWithoutPrepare,
            Halt::XaRollbackWithoutPrepare,
            Halt::PayloadTooLarge {
                size: 2 << 30,
                limit: 1 << 30,
            },
        ];
        for h in &halts {
            assert!(h.code().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            let msg = h.to_string();
            assert_eq!(msg, msg.to_lowercase());
            assert!(!msg.ends_with('.'));
        }
    }
}
