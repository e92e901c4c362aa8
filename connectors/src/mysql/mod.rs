//! The MySQL/MariaDB binlog source. The pure half: event decoding, transaction assembly and
//! row decoding, all sans-I/O (bytes in, values out). The live half: configuration
//! ([`SourceConfig`]), the connection and preconditions ([`SourceClient`],
//! [`ServerSettings`]) on a protocol client of our own (`replica_conn`), the dump per
//! flavour ([`StartPosition`], [`check_resume`]), and [`BinlogSource`], which feeds the pure half
//! and keeps the stream alive.
//!
//! Flow: raw event bytes → [`EventReader`] → [`Event`] → [`TransactionAssembler`] →
//! [`AssemblerOutput`] (a [`Transaction`](capstan_core::change::Transaction), a
//! [`SchemaChange`](capstan_core::change::SchemaChange), or a position advance for a
//! transaction with nothing to deliver). Anything that could lose or corrupt data is a
//! [`Halt`].

mod assembler;
mod binlog_file;
mod binlog_stream;
mod column_controls;
mod column_plan;
mod column_types;
mod connect;
pub mod decode;
mod dump;
mod event;
mod event_reader;
mod halt;
pub mod mariadb_events;
pub mod payload;
mod preconditions;
#[cfg(test)]
mod proptests;
mod query_conn;
#[cfg(test)]
mod query_conn_tests;
mod query_packets;
mod replica_conn;
pub mod snapshot;
mod source_config;
mod source_error;
mod source_link;
mod source_progress;
mod statement;
mod stmt_cache;
mod stream_reader;
mod table_filter;
mod table_patterns;
mod table_schema;
mod table_structure;
#[cfg(test)]
mod test_support;
mod text_query;
mod tls;
mod xid;

pub use assembler::{AssemblerConfig, AssemblerOutput, TransactionAssembler, XaMode};
pub use binlog_file::BinlogFileEvents;
pub use binlog_stream::{BinlogSource, SourceStats};
pub use column_controls::{ColumnControlOnKey, ColumnControls, HashRule, IncludeRule, MaskRule};
pub use column_plan::{Action, ColumnPlan, TRANSFORMED_COLLATION};
pub use connect::{detect_flavor, SourceClient};
pub use dump::{check_processed, check_resume, ServerPositions, StartPosition};
pub use event::{Event, MariadbGtidEvent, QueryEvent, RowsEvent, RowsKind};
pub use event_reader::{frame_len, EventReader, HEADER_LEN};
pub use halt::Halt;
pub use preconditions::ServerSettings;
pub use source_config::{
    FlavorChoice, Password, SourceConfig, TlsChoice, TlsConfig, TlsMode, ValidSourceConfig,
    MAX_TIMER_MS,
};
pub use source_error::SourceError;
pub use source_link::{LinkEvent, LinkObserver};
pub use statement::{classify_statement, StatementClass};
pub use table_filter::TableFilter;
pub use table_patterns::TablePatterns;
pub use table_schema::{ColumnSchema, TableSchema};
pub use xid::XidKey;
