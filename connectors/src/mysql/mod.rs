//! The MySQL/MariaDB binlog source, pure half: event decoding, transaction assembly and row
//! decoding, all sans-I/O (bytes in, values out). The connection, dump and liveness live
//! beside it and feed it.
//!
//! Flow: raw event bytes → [`EventReader`] → [`Event`] → [`TransactionAssembler`] →
//! [`AssemblerOutput`] (a [`Transaction`](capstan_core::change::Transaction), a
//! [`SchemaChange`](capstan_core::change::SchemaChange), or a position advance for a
//! transaction with nothing to deliver). Anything that could lose or corrupt data is a
//! [`Halt`].

mod assembler;
mod binlog_file;
pub mod decode;
mod event;
mod event_reader;
mod halt;
pub mod mariadb_events;
pub mod payload;
#[cfg(test)]
mod proptests;
mod statement;
mod table_filter;
mod table_schema;
#[cfg(test)]
mod test_support;

pub use assembler::{AssemblerConfig, AssemblerOutput, TransactionAssembler, XaMode};
pub use binlog_file::BinlogFileEvents;
pub use event::{Event, MariadbGtidEvent, QueryEvent, RowsEvent, RowsKind};
pub use event_reader::{frame_len, EventReader, HEADER_LEN};
pub use halt::Halt;
pub use statement::{classify_statement, StatementClass};
pub use table_filter::TableFilter;
pub use table_schema::{ColumnSchema, TableSchema};
