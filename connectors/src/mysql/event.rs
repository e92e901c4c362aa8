//! capstan's narrow view of a binlog event: only what the assembler acts on, owned, and with
//! the statement-carrying events redacted in `Debug`. Produced by
//! [`EventReader`](super::EventReader) from raw event bytes.

use std::fmt;
use std::sync::Arc;

use capstan_core::position::{Gtid, MariadbGtid};

use super::decode::AheadSlot;
use super::halt::Halt;
use super::table_schema::TableSchema;
use super::xid::XidKey;

/// A binlog event, as far as capstan cares.
#[derive(Clone, PartialEq)]
pub enum Event {
    /// FORMAT_DESCRIPTION: the server version and whether events carry a CRC32.
    FormatDescription {
        /// Server version string from the event.
        server_version: String,
        /// True when the following events carry CRC32 checksums.
        checksum: bool,
    },
    /// MySQL GTID (or tagged GTID): the next transaction's identity.
    Gtid {
        /// The GTID.
        gtid: Gtid,
        /// Immediate commit timestamp in microseconds since the epoch (0 before MySQL 8.0).
        committed_at_micros: u64,
        /// The server id in the event header (the server that originally wrote it).
        server_id: u32,
        /// The event's own byte position in its binlog file (0 when unknown).
        position: u64,
    },
    /// MySQL ANONYMOUS_GTID: a transaction without a GTID (`gtid_mode` off).
    AnonymousGtid,
    /// MariaDB GTID (type 162).
    MariadbGtid(MariadbGtidEvent),
    /// MariaDB GTID_LIST (type 163): the binlog state at the start of a file.
    MariadbGtidList(Vec<MariadbGtid>),
    /// A statement (QUERY event): BEGIN/COMMIT/XA control, DDL, or statement-based DML.
    Query(QueryEvent),
    /// A table map, digested.
    TableMap(Arc<TableSchema>),
    /// Row changes of one table map.
    Rows(RowsEvent),
    /// XID: commit of a transactional-engine transaction.
    Xid,
    /// XA_PREPARE (type 38, both flavours).
    XaPrepare {
        /// True for `XA COMMIT … ONE PHASE`, which commits immediately.
        one_phase: bool,
        /// The key of the XID the event names.
        xid: XidKey,
    },
    /// TRANSACTION_PAYLOAD, inflated: the inner events in order.
    TransactionPayload(Vec<Event>),
    /// ROTATE: the server switches to another binlog file.
    Rotate {
        /// Next binlog file name.
        file: String,
        /// Position in that file.
        position: u64,
    },
    /// INCIDENT: the source reports that the binlog may be missing changes.
    Incident,
    /// Server heartbeat (v1 or v2).
    Heartbeat,
    /// STOP.
    Stop,
    /// An event with no bearing on row changes (PREVIOUS_GTIDS, INTVAR, ROWS_QUERY,
    /// ANNOTATE_ROWS, BINLOG_CHECKPOINT, ignorable unknown events, …).
    Ignored {
        /// Raw event type byte.
        event_type: u8,
    },
    /// An event capstan cannot honour (pre-GA rows events, statement-based LOAD DATA,
    /// partial JSON updates, MariaDB compressed or encrypted events). Decoding it succeeds
    /// so that a file walk can continue; the assembler halts with `halt`.
    Unsupported {
        /// Raw event type byte.
        event_type: u8,
        /// The halt the assembler raises when it meets this event.
        halt: Halt,
    },
}

/// The fields of a MariaDB GTID event capstan uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MariadbGtidEvent {
    /// The GTID (server id from the event header).
    pub gtid: MariadbGtid,
    /// Raw `flags2` byte.
    pub flags: u8,
    /// Event header timestamp, seconds since the epoch.
    pub timestamp: u32,
    /// The event's own byte position in its binlog file (0 when unknown).
    pub position: u64,
    /// The key of the XID an XA PREPARE ([`MariadbGtidEvent::FL_PREPARED_XA`]) or an XA
    /// COMMIT / ROLLBACK ([`MariadbGtidEvent::FL_COMPLETED_XA`]) names; `None` otherwise.
    pub xid: Option<XidKey>,
}

impl MariadbGtidEvent {
    /// FL_STANDALONE: a single statement (DDL) with no BEGIN/COMMIT around it.
    pub const FL_STANDALONE: u8 = 1;
    /// FL_GROUP_COMMIT_ID: a commit id follows.
    pub const FL_GROUP_COMMIT_ID: u8 = 2;
    /// FL_DDL: the transaction is DDL.
    pub const FL_DDL: u8 = 32;
    /// FL_PREPARED_XA: an XA PREPARE.
    pub const FL_PREPARED_XA: u8 = 64;
    /// FL_COMPLETED_XA: an XA COMMIT/ROLLBACK.
    pub const FL_COMPLETED_XA: u8 = 128;

    /// True for a standalone (DDL) transaction.
    pub fn is_standalone(&self) -> bool {
        self.flags & Self::FL_STANDALONE != 0
    }

    /// True for the group of an XA PREPARE (its rows, `XA END`, then an XA_PREPARE event).
    pub fn is_prepared_xa(&self) -> bool {
        self.flags & Self::FL_PREPARED_XA != 0
    }

    /// True for the group of a two-phase XA COMMIT or XA ROLLBACK (one statement).
    pub fn is_completed_xa(&self) -> bool {
        self.flags & Self::FL_COMPLETED_XA != 0
    }
}

/// A QUERY event's schema and statement. The statement can contain row values, so `Debug`
/// shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct QueryEvent {
    /// The session's default database (may be empty).
    pub schema: String,
    /// The statement text (lossy UTF-8).
    pub statement: String,
}

impl fmt::Debug for QueryEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueryEvent")
            .field("schema", &self.schema)
            .field("statement_len", &self.statement.len())
            .finish()
    }
}

/// Which row operation a rows event carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RowsKind {
    /// WRITE_ROWS (v1 or v2).
    Write,
    /// UPDATE_ROWS (v1 or v2): before and after image per row.
    Update,
    /// DELETE_ROWS (v1 or v2).
    Delete,
}

/// A rows event, undecoded: decoding needs the table map and is skipped for filtered tables.
#[derive(Clone, PartialEq, Eq)]
pub struct RowsEvent {
    /// Raw event type byte.
    pub event_type: u8,
    /// Table-map id.
    pub table_id: u64,
    /// Operation.
    pub kind: RowsKind,
    /// Column count the event declares.
    pub num_columns: usize,
    /// Columns present in the before image (updates, deletes).
    pub before_columns: Option<Vec<bool>>,
    /// Columns present in the after image (writes, updates).
    pub after_columns: Option<Vec<bool>>,
    /// The row images.
    pub rows: Vec<u8>,
    /// The rows decoded ahead by the stream's reader task, if it had the time (a cache).
    pub ahead: AheadSlot,
}

impl fmt::Debug for RowsEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowsEvent")
            .field("event_type", &self.event_type)
            .field("table_id", &self.table_id)
            .field("kind", &self.kind)
            .field("num_columns", &self.num_columns)
            .field("rows_len", &self.rows.len())
            .finish()
    }
}

impl Event {
    /// A short value-free name for diagnostics and tests.
    pub fn name(&self) -> &'static str {
        match self {
            Event::FormatDescription { .. } => "format_description",
            Event::Gtid { .. } => "gtid",
            Event::AnonymousGtid => "anonymous_gtid",
            Event::MariadbGtid(_) => "mariadb_gtid",
            Event::MariadbGtidList(_) => "mariadb_gtid_list",
            Event::Query(_) => "query",
            Event::TableMap(_) => "table_map",
            Event::Rows(r) => match r.kind {
                RowsKind::Write => "write_rows",
                RowsKind::Update => "update_rows",
                RowsKind::Delete => "delete_rows",
            },
            Event::Xid => "xid",
            Event::XaPrepare { .. } => "xa_prepare",
            Event::TransactionPayload(_) => "transaction_payload",
            Event::Rotate { .. } => "rotate",
            Event::Incident => "incident",
            Event::Heartbeat => "heartbeat",
            Event::Stop => "stop",
            Event::Ignored { .. } => "ignored",
            Event::Unsupported { .. } => "unsupported",
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::FormatDescription {
                server_version,
                checksum,
            } => f
                .debug_struct("FormatDescription")
                .field("server_version", server_version)
                .field("checksum", checksum)
                .finish(),
            Event::Gtid {
                gtid,
                committed_at_micros,
                ..
            } => f
                .debug_struct("Gtid")
                .field("gtid", &gtid.to_string())
                .field("committed_at_micros", committed_at_micros)
                .finish(),
            Event::MariadbGtid(g) => g.fmt(f),
            Event::MariadbGtidList(l) => f.debug_tuple("MariadbGtidList").field(l).finish(),
            Event::Query(q) => q.fmt(f),
            Event::TableMap(t) => f
                .debug_struct("TableMap")
                .field("table_id", &t.table_id)
                .field("table", &t.table.to_string())
                .field("columns", &t.columns.len())
                .finish(),
            Event::Rows(r) => r.fmt(f),
            Event::XaPrepare { one_phase, .. } => f
                .debug_struct("XaPrepare")
                .field("one_phase", one_phase)
                .finish(),
            Event::TransactionPayload(inner) => f
                .debug_struct("TransactionPayload")
                .field("events", &inner.len())
                .finish(),
            Event::Rotate { file, position } => f
                .debug_struct("Rotate")
                .field("file", file)
                .field("position", position)
                .finish(),
            Event::Ignored { event_type } => f
                .debug_struct("Ignored")
                .field("event_type", event_type)
                .finish(),
            Event::Unsupported { event_type, halt } => f
                .debug_struct("Unsupported")
                .field("event_type", event_type)
                .field("halt", &halt.code())
                .finish(),
            other => f.write_str(other.name()),
        }
    }
}
