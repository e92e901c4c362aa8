//! Row changes as the binlog source delivers them: a typed [`Value`] per column, a [`Row`] per
//! image, a [`Change`] per row event row, a [`Transaction`] per committed GTID, and a
//! [`SchemaChange`] per DDL statement.
//!
//! # Redaction
//!
//! Row values are user data. Nothing in this module prints one: the `Debug` impls of
//! [`Value`], [`Row`], [`Change`], [`Transaction`] and [`SchemaChange`] show only structure
//! (column names, value kinds, counts, positions), never content, so a value can't leak into a
//! log line or an error message by accident. DDL statement text is likewise redacted by default
//! (it can carry literals, defaults and passwords) and is only kept when a pipeline opts in.

mod binlog_origin;
#[allow(clippy::module_inception)]
mod change;
mod column_type;
mod row;
mod schema_change;
mod table_id;
mod table_structure;
mod temporal;
mod transaction;
mod value;

pub use binlog_origin::BinlogOrigin;
pub use change::{Change, Op};
pub use column_type::{ColumnType, ColumnTypes, SqlType};
pub use row::{Row, RowShapeError};
pub use schema_change::{SchemaChange, SchemaChangeKind};
pub use table_id::TableId;
pub use table_structure::{ColumnStructure, TableStructure};
pub use temporal::{Date, DateTime, Time};
pub use transaction::{Transaction, TransactionGtid};
pub use value::Value;
