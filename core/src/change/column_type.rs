//! The declared type of a column, as far as the source tells it: what a schema'd event format
//! (Kafka Connect schemas) needs and a [`super::Value`] does not carry — integer widths,
//! decimal precision, nullability, ENUM/SET members, and the type of a column whose value is
//! NULL.

use std::sync::Arc;

/// The SQL type of one column.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum SqlType {
    /// `TINYINT` (1 byte), `SMALLINT` (2), `MEDIUMINT` (3), `INT` (4), `BIGINT` (8).
    Int {
        /// Storage bytes: 1, 2, 3, 4 or 8.
        bytes: u8,
        /// `UNSIGNED`.
        unsigned: bool,
    },
    /// `DECIMAL(precision, scale)`.
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// `FLOAT`.
    Float,
    /// `DOUBLE`.
    Double,
    /// Character data (`CHAR`, `VARCHAR`, `TEXT` family; MariaDB `JSON`).
    Text,
    /// Binary data (`BINARY`, `VARBINARY`, `BLOB` family).
    Bytes,
    /// `DATE`.
    Date,
    /// `TIME(fsp)`.
    Time {
        /// Fractional-second digits, 0..=6.
        fsp: u8,
    },
    /// `DATETIME(fsp)`.
    DateTime {
        /// Fractional-second digits, 0..=6.
        fsp: u8,
    },
    /// `TIMESTAMP(fsp)`.
    Timestamp {
        /// Fractional-second digits, 0..=6.
        fsp: u8,
    },
    /// `YEAR`.
    Year,
    /// `BIT(bits)`.
    Bit {
        /// Declared width, 1..=64.
        bits: u16,
    },
    /// `ENUM`, with its members when the source names them.
    Enum {
        /// Member names in declaration order (empty when unknown).
        members: Arc<[String]>,
    },
    /// `SET`, with its members when the source names them.
    Set {
        /// Member names in declaration order (empty when unknown).
        members: Arc<[String]>,
    },
    /// MySQL `JSON`.
    Json,
    /// The `GEOMETRY` family.
    Geometry,
    /// MySQL 9 `VECTOR`.
    Vector,
}

/// One column's declared type and nullability.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ColumnType {
    /// The SQL type.
    pub sql: SqlType,
    /// True when the column accepts NULL.
    pub nullable: bool,
}

/// The column types of one table version, in table order (shared by the changes of one
/// table map or snapshot).
pub type ColumnTypes = Arc<[ColumnType]>;
