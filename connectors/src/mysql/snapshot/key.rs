//! The key a snapshot table is chunked by: its columns and kinds ([`KeyShape`]) and the raw
//! key value of one row ([`KeyPart`]s, in key order), which the cursor gate compares and
//! stores as the cursor.
//!
//! Integers compare as integers and binary strings bytewise, exactly as the server orders
//! them. `BINARY(n)` values are compared with their trailing `0x00` bytes stripped: the
//! binlog strips them and `SELECT` pads them, and stripping both sides keeps the order (all
//! stored values are padded to `n`, so two values differing only in trailing zeros are the
//! same value). Character keys order by collation: their raw bytes are kept here and the
//! gate compares the server's `WEIGHT_STRING`s of them (see `SnapshotReader::weights`),
//! encoded for PAD SPACE collations so that they compare as if padded with spaces (see
//! `weighing`).

use std::fmt;

use capstan_core::change::{Row, Value};
use serde::{Deserialize, Serialize};

use super::error::SnapshotError;

/// How a key column's values order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// Signed `TINYINT` .. `BIGINT`.
    Int,
    /// Unsigned `TINYINT` .. `BIGINT`.
    UInt,
    /// `BINARY(n)`: bytewise, trailing `0x00` stripped.
    FixedBinary,
    /// `VARBINARY(n)`: bytewise.
    VarBinary,
    /// `CHAR` / `VARCHAR`: by the collation (compare weights, never bytes).
    Text {
        /// Character set name (validated `[A-Za-z0-9_]+`).
        charset: String,
        /// Collation name (validated `[A-Za-z0-9_]+`).
        collation: String,
        /// `Some(n)` for a PAD SPACE collation: the column's length in characters (the
        /// canary's values fit it; a collation whose weights are not in units of the
        /// space's weight is weighed at it, `WEIGHT_STRING(v AS CHAR(n))`). `None` for NO
        /// PAD: the bare value's weight.
        pad_to: Option<u32>,
    },
}

impl KeyKind {
    /// The kind's name, for value-free messages.
    pub fn name(&self) -> &'static str {
        match self {
            KeyKind::Int => "int",
            KeyKind::UInt => "uint",
            KeyKind::FixedBinary => "fixed_binary",
            KeyKind::VarBinary => "varbinary",
            KeyKind::Text { .. } => "text",
        }
    }
}

/// One key column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyColumn {
    /// Column name.
    pub name: String,
    /// Index of the column in the row (table order).
    pub position: usize,
    /// How its values order.
    pub kind: KeyKind,
}

/// The key of a snapshot table: its columns in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyShape {
    /// Key columns, in key order.
    pub columns: Vec<KeyColumn>,
    /// True when the table has no primary key and this is its first unique key whose
    /// columns are all NOT NULL.
    pub from_unique_key: bool,
}

/// One part of a row's raw key value. `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyPart {
    /// A signed integer key part.
    Int(i64),
    /// An unsigned integer key part.
    UInt(u64),
    /// A binary key part (`BINARY` with trailing `0x00` stripped, or `VARBINARY`).
    Bytes(Vec<u8>),
    /// A character key part: the raw bytes in the column's character set.
    Text(Vec<u8>),
}

impl KeyPart {
    /// The part's kind, for value-free messages.
    pub fn kind(&self) -> &'static str {
        match self {
            KeyPart::Int(_) => "int",
            KeyPart::UInt(_) => "uint",
            KeyPart::Bytes(_) => "bytes",
            KeyPart::Text(_) => "text",
        }
    }

    /// True if this part has the shape `kind` produces.
    pub fn fits(&self, kind: &KeyKind) -> bool {
        matches!(
            (self, kind),
            (KeyPart::Int(_), KeyKind::Int)
                | (KeyPart::UInt(_), KeyKind::UInt)
                | (KeyPart::Bytes(_), KeyKind::FixedBinary | KeyKind::VarBinary)
                | (KeyPart::Text(_), KeyKind::Text { .. })
        )
    }
}

impl fmt::Debug for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(<redacted>)", self.kind())
    }
}

/// `bytes` without its trailing `0x00`s.
pub(crate) fn strip_trailing_zeros(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes.get(..end).unwrap_or_default()
}

impl KeyShape {
    /// The raw key value of `row`, in key order. Pure. Refuses a NULL key part or a value
    /// whose kind does not fit its key column (value-free).
    pub fn key_of(&self, row: &Row) -> Result<Vec<KeyPart>, SnapshotError> {
        self.columns
            .iter()
            .map(|col| {
                let invalid = |got: &'static str| SnapshotError::KeyValueInvalid {
                    column: col.name.clone(),
                    expected: col.kind.name(),
                    got,
                };
                let value = row.get(col.position).ok_or_else(|| invalid("missing"))?;
                match (&col.kind, value) {
                    (KeyKind::Int, Value::Int(v)) => Ok(KeyPart::Int(*v)),
                    (KeyKind::UInt, Value::UInt(v)) => Ok(KeyPart::UInt(*v)),
                    (KeyKind::FixedBinary, Value::Bytes(b)) => {
                        Ok(KeyPart::Bytes(strip_trailing_zeros(b).to_vec()))
                    }
                    (KeyKind::VarBinary, Value::Bytes(b)) => Ok(KeyPart::Bytes(b.clone())),
                    (KeyKind::Text { .. }, Value::Text { bytes, .. }) => {
                        Ok(KeyPart::Text(bytes.clone()))
                    }
                    (_, other) => Err(invalid(other.kind())),
                }
            })
            .collect()
    }

    /// True if `key` has one part per key column, each of its column's kind.
    pub fn accepts(&self, key: &[KeyPart]) -> bool {
        key.len() == self.columns.len()
            && key
                .iter()
                .zip(&self.columns)
                .all(|(part, col)| part.fits(&col.kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn shape() -> KeyShape {
        KeyShape {
            columns: vec![
                KeyColumn {
                    name: "b".into(),
                    position: 1,
                    kind: KeyKind::FixedBinary,
                },
                KeyColumn {
                    name: "a".into(),
                    position: 0,
                    kind: KeyKind::UInt,
                },
                KeyColumn {
                    name: "c".into(),
                    position: 2,
                    kind: KeyKind::Text {
                        charset: "utf8mb4".into(),
                        collation: "utf8mb4_0900_ai_ci".into(),
                        pad_to: None,
                    },
                },
            ],
            from_unique_key: false,
        }
    }

    fn row(values: Vec<Value>) -> Row {
        let cols: Arc<[String]> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        Row::new(cols, values).unwrap()
    }

    #[test]
    fn key_in_key_order_with_fixed_binary_stripped() {
        let r = row(vec![
            Value::UInt(u64::MAX),
            Value::Bytes(vec![1, 0, 2, 0, 0]),
            Value::Text {
                bytes: b"Ab".to_vec(),
                collation: 255,
            },
            Value::Null,
        ]);
        let key = shape().key_of(&r).unwrap();
        assert_eq!(
            key,
            vec![
                KeyPart::Bytes(vec![1, 0, 2]),
                KeyPart::UInt(u64::MAX),
                KeyPart::Text(b"Ab".to_vec())
            ]
        );
        assert!(shape().accepts(&key));
        assert!(!shape().accepts(&key[..2]));
    }

    #[test]
    fn null_or_wrong_kind_is_refused_value_free() {
        let r = row(vec![
            Value::Int(7),
            Value::Bytes(vec![1]),
            Value::Text {
                bytes: b"x".to_vec(),
                collation: 255,
            },
            Value::Null,
        ]);
        let e = shape().key_of(&r).unwrap_err();
        assert_eq!(e.code(), "snapshot_key_value_invalid");
        assert!(!e.to_string().contains('7'));
    }

    #[test]
    fn strip_keeps_inner_zeros() {
        assert_eq!(strip_trailing_zeros(&[0, 0]), b"");
        assert_eq!(strip_trailing_zeros(&[0, 1, 0]), &[0, 1]);
        assert_eq!(strip_trailing_zeros(b""), b"");
    }

    #[test]
    fn debug_is_redacted_and_serde_round_trips() {
        let k = vec![
            KeyPart::Int(-424242),
            KeyPart::UInt(u64::MAX),
            KeyPart::Bytes(b"secret".to_vec()),
            KeyPart::Text(b"secret".to_vec()),
        ];
        let s = format!("{k:?}");
        assert!(
            !s.contains("4242") && !s.contains("secret") && !s.contains("1844"),
            "{s}"
        );
        let json = serde_json::to_string(&k).unwrap();
        let back: Vec<KeyPart> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, k);
    }
}
