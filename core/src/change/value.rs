//! A typed column value.

use std::fmt;

use super::temporal::{write_fraction, Date, DateTime, Time};

/// One column value, typed after the column's binlog type and metadata.
///
/// Exactness rules: integers keep their signedness (`BIGINT UNSIGNED` above 2^63 is a
/// [`Value::UInt`]), `DECIMAL` keeps its exact text, character data keeps its raw bytes plus
/// the column collation (no lossy transcoding here), and temporal values keep zero dates,
/// negative times and the column's fractional-second precision.
///
/// `Debug` prints the kind only, never the content (see the module documentation).
#[derive(Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A signed integer column (`TINYINT` .. `BIGINT`).
    Int(i64),
    /// An unsigned integer column (`TINYINT UNSIGNED` .. `BIGINT UNSIGNED`).
    UInt(u64),
    /// `DECIMAL`/`NUMERIC`, as exact text: optional `-`, integer digits, and exactly `scale`
    /// fraction digits after a `.` when the scale is non-zero (`"-12.340"`).
    Decimal(String),
    /// `FLOAT`.
    Float(f32),
    /// `DOUBLE`.
    Double(f64),
    /// Character data (`CHAR`, `VARCHAR`, `TEXT` family; MariaDB `JSON`): the raw bytes in the
    /// column's character set, and the column's collation id (0 when the table map carried
    /// no charset metadata).
    Text {
        /// The stored bytes, in the column's character set.
        bytes: Vec<u8>,
        /// MySQL/MariaDB collation id; identifies the character set.
        collation: u16,
    },
    /// Binary data (`BINARY`, `VARBINARY`, `BLOB` family).
    Bytes(Vec<u8>),
    /// `DATE`.
    Date(Date),
    /// `TIME`.
    Time(Time),
    /// `DATETIME`.
    DateTime(DateTime),
    /// `TIMESTAMP`: seconds and microseconds since the Unix epoch (UTC), with the column's
    /// fractional-second precision. `0` is MySQL's zero timestamp.
    Timestamp {
        /// Whole seconds since 1970-01-01 00:00:00 UTC.
        seconds: u32,
        /// Microseconds, 0..=999_999.
        micros: u32,
        /// Fractional-second precision of the column, 0..=6.
        fsp: u8,
    },
    /// `YEAR` (0 for the zero year `0000`).
    Year(u16),
    /// `BIT(n)`: big-endian bytes, `ceil(n / 8)` of them, and the declared width `n`.
    Bit {
        /// The value, big-endian, most significant byte first.
        bytes: Vec<u8>,
        /// Declared width in bits, 1..=64.
        bits: u16,
    },
    /// `ENUM`: the member name (`""` for MySQL's invalid-value index 0).
    Enum(String),
    /// `SET`: the selected member names, comma-joined in declaration order (`""` when empty).
    Set(String),
    /// MySQL `JSON`, converted from binary JSON to JSON text.
    Json(String),
    /// A spatial value: the SRID and the WKB, exactly as stored (MySQL's internal format is
    /// the 4-byte little-endian SRID followed by the WKB).
    Geometry {
        /// Spatial reference system id.
        srid: u32,
        /// Well-known binary.
        wkb: Vec<u8>,
    },
    /// MySQL 9 `VECTOR`: IEEE-754 single-precision elements.
    Vector(Vec<f32>),
}

impl Value {
    /// Bytes this value holds on the heap (its text, bytes or elements), for byte budgets.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Decimal(s) | Value::Enum(s) | Value::Set(s) | Value::Json(s) => s.capacity(),
            Value::Text { bytes, .. } | Value::Bytes(bytes) | Value::Bit { bytes, .. } => {
                bytes.capacity()
            }
            Value::Geometry { wkb, .. } => wkb.capacity(),
            Value::Vector(v) => v.capacity() * std::mem::size_of::<f32>(),
            _ => 0,
        }
    }

    /// The kind of value, for diagnostics that must not show the value itself.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int(_) => "int",
            Value::UInt(_) => "uint",
            Value::Decimal(_) => "decimal",
            Value::Float(_) => "float",
            Value::Double(_) => "double",
            Value::Text { .. } => "text",
            Value::Bytes(_) => "bytes",
            Value::Date(_) => "date",
            Value::Time(_) => "time",
            Value::DateTime(_) => "datetime",
            Value::Timestamp { .. } => "timestamp",
            Value::Year(_) => "year",
            Value::Bit { .. } => "bit",
            Value::Enum(_) => "enum",
            Value::Set(_) => "set",
            Value::Json(_) => "json",
            Value::Geometry { .. } => "geometry",
            Value::Vector(_) => "vector",
        }
    }

    /// True for SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// MySQL's text form of this value where one exists without a character-set conversion:
    /// numbers, decimals, temporals, ENUM/SET names and JSON text. `None` for NULL, raw
    /// character/binary data, BIT, geometry and vectors.
    ///
    /// The result is a row value: never log it.
    pub fn to_sql_text(&self) -> Option<String> {
        Some(match self {
            Value::Int(v) => v.to_string(),
            Value::UInt(v) => v.to_string(),
            Value::Decimal(s) | Value::Enum(s) | Value::Set(s) | Value::Json(s) => s.clone(),
            Value::Float(v) => v.to_string(),
            Value::Double(v) => v.to_string(),
            Value::Date(d) => d.to_string(),
            Value::Time(t) => t.to_string(),
            Value::DateTime(dt) => dt.to_string(),
            Value::Timestamp {
                seconds,
                micros,
                fsp,
            } => TimestampText(*seconds, *micros, *fsp).to_string(),
            Value::Year(y) => format!("{y:04}"),
            Value::Null
            | Value::Text { .. }
            | Value::Bytes(_)
            | Value::Bit { .. }
            | Value::Geometry { .. }
            | Value::Vector(_) => return None,
        })
    }
}

/// `seconds[.frac]` since the epoch, the form mysqlbinlog prints for TIMESTAMP columns.
struct TimestampText(u32, u32, u8);

impl fmt::Display for TimestampText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        write_fraction(f, self.1, self.2)
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("Null"),
            other => write!(f, "{}(<redacted>)", other.kind()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_content() {
        let values = [
            Value::Int(424242),
            Value::UInt(u64::MAX),
            Value::Decimal("1234.5678".into()),
            Value::Text {
                bytes: b"secret".to_vec(),
                collation: 255,
            },
            Value::Bytes(b"secret".to_vec()),
            Value::Json("{\"secret\":1}".into()),
            Value::Enum("secret".into()),
            Value::Set("secret".into()),
            Value::Vector(vec![424242.0]),
            Value::Geometry {
                srid: 4326,
                wkb: b"secret".to_vec(),
            },
        ];
        for v in &values {
            let s = format!("{v:?}");
            assert!(!s.contains("secret") && !s.contains("4242"), "{s}");
            assert!(!s.contains("1234") && !s.contains("4326"), "{s}");
        }
        assert_eq!(format!("{:?}", Value::Null), "Null");
    }

    #[test]
    fn sql_text() {
        assert_eq!(
            Value::UInt(18446744073709551615).to_sql_text().as_deref(),
            Some("18446744073709551615")
        );
        assert_eq!(Value::Year(0).to_sql_text().as_deref(), Some("0000"));
        let ts = Value::Timestamp {
            seconds: 1650493084,
            micros: 120000,
            fsp: 2,
        };
        assert_eq!(ts.to_sql_text().as_deref(), Some("1650493084.12"));
        assert_eq!(Value::Null.to_sql_text(), None);
    }
}
