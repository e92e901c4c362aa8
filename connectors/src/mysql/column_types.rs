//! The declared column types of a table map ([`ColumnTypes`]), computed once per TABLE_MAP
//! event from each column's binlog type, metadata, signedness, collation and nullability.

use capstan_core::change::{ColumnType, ColumnTypes, SqlType};
use mysql_common::constants::ColumnType as Binlog;

use super::table_schema::ColumnSchema;

/// The binary collation: character columns with it hold bytes.
const BINARY_COLLATION: u16 = 63;

/// The declared type of one table-map column.
pub(crate) fn column_type(col: &ColumnSchema) -> ColumnType {
    use Binlog::*;
    let m0 = col.meta.first().copied().unwrap_or(0);
    let m1 = col.meta.get(1).copied().unwrap_or(0);
    let int = |bytes| SqlType::Int {
        bytes,
        unsigned: col.unsigned,
    };
    let sql = match col.column_type {
        MYSQL_TYPE_TINY => int(1),
        MYSQL_TYPE_SHORT => int(2),
        MYSQL_TYPE_INT24 => int(3),
        MYSQL_TYPE_LONG => int(4),
        MYSQL_TYPE_LONGLONG => int(8),
        MYSQL_TYPE_FLOAT => SqlType::Float,
        MYSQL_TYPE_DOUBLE => SqlType::Double,
        MYSQL_TYPE_NEWDECIMAL | MYSQL_TYPE_DECIMAL => SqlType::Decimal {
            precision: m0,
            scale: m1,
        },
        MYSQL_TYPE_YEAR => SqlType::Year,
        MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATE => SqlType::Date,
        MYSQL_TYPE_TIME2 => SqlType::Time { fsp: m0.min(6) },
        MYSQL_TYPE_TIME => SqlType::Time { fsp: 0 },
        MYSQL_TYPE_DATETIME2 => SqlType::DateTime { fsp: m0.min(6) },
        MYSQL_TYPE_DATETIME => SqlType::DateTime { fsp: 0 },
        MYSQL_TYPE_TIMESTAMP2 => SqlType::Timestamp { fsp: m0.min(6) },
        MYSQL_TYPE_TIMESTAMP => SqlType::Timestamp { fsp: 0 },
        MYSQL_TYPE_VARCHAR | MYSQL_TYPE_VAR_STRING | MYSQL_TYPE_STRING => {
            if col.collation == Some(BINARY_COLLATION) {
                SqlType::Bytes
            } else {
                SqlType::Text
            }
        }
        MYSQL_TYPE_BLOB | MYSQL_TYPE_TINY_BLOB | MYSQL_TYPE_MEDIUM_BLOB | MYSQL_TYPE_LONG_BLOB => {
            match col.collation {
                Some(c) if c != BINARY_COLLATION => SqlType::Text,
                _ => SqlType::Bytes,
            }
        }
        MYSQL_TYPE_GEOMETRY => SqlType::Geometry,
        MYSQL_TYPE_JSON => SqlType::Json,
        MYSQL_TYPE_VECTOR => SqlType::Vector,
        MYSQL_TYPE_BIT => SqlType::Bit {
            bits: u16::from(m1) * 8 + u16::from(m0),
        },
        MYSQL_TYPE_ENUM => SqlType::Enum {
            members: col.enum_values.clone().unwrap_or_else(|| Vec::new().into()),
        },
        MYSQL_TYPE_SET => SqlType::Set {
            members: col.set_values.clone().unwrap_or_else(|| Vec::new().into()),
        },
        // never decoded (the decoder halts on them); text keeps the schema total
        MYSQL_TYPE_NULL | MYSQL_TYPE_TYPED_ARRAY | MYSQL_TYPE_UNKNOWN => SqlType::Text,
    };
    ColumnType {
        sql,
        nullable: col.nullable,
    }
}

/// The declared types of every column of a table map, in table order.
pub(crate) fn column_types(columns: &[ColumnSchema]) -> ColumnTypes {
    columns.iter().map(column_type).collect()
}
