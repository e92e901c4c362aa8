//! [`SnapshotTable`]: what `describe` learns about a table from `information_schema` — its
//! columns in table order, its chunking key and a fingerprint of its definition — and the
//! per-column layout the chunk reader converts values with ([`TableLayout`], crate-private).
//!
//! The key is the PRIMARY KEY, else the first (by index name) UNIQUE key whose columns are all
//! NOT NULL and none a prefix part. Key columns must be order-faithful: integers, `BINARY`,
//! `VARBINARY`, or `CHAR`/`VARCHAR` (ordered by collation weights). Everything else —
//! the TEXT/BLOB family (prefix keys, filesort per page), `ENUM`/`SET` (member-position
//! order), `DECIMAL`, floating point, temporals, `BIT`, `JSON` … — is refused.

use std::sync::Arc;

use capstan_core::change::{ColumnTypes, TableId};

use super::declared_type::declared_type;
use super::error::SnapshotError;
use super::key::{KeyColumn, KeyKind, KeyShape};

/// A table ready to be chunked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotTable {
    /// The table.
    pub id: TableId,
    /// Column names in table order (as the binlog names them with `binlog_row_metadata=FULL`).
    pub columns: Arc<[String]>,
    /// The chunking key.
    pub key: KeyShape,
    /// The declared column types, in table order (as the binlog's table map gives them).
    pub types: ColumnTypes,
    /// `information_schema.TABLES.TABLE_ROWS`: an estimate, for progress only.
    pub estimated_rows: u64,
    /// A stable hash of the column definitions (name, `COLUMN_TYPE`, character set,
    /// collation, nullability, in order) and the key columns: a changed fingerprint is
    /// schema drift.
    pub fingerprint: u64,
}

/// How a column's values are converted from the binary protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColKind {
    Int { unsigned: bool },
    Decimal,
    Float,
    Double,
    Year,
    Date,
    Time { fsp: u8 },
    DateTime { fsp: u8 },
    Timestamp { fsp: u8 },
    Text { collation: u16 },
    Bytes,
    FixedBinary,
    Bit { bits: u16 },
    Enum,
    Set,
    Json,
    Geometry,
    Vector,
}

/// One `information_schema.COLUMNS` row, as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ColumnRow {
    pub name: String,
    pub data_type: String,
    pub column_type: String,
    pub nullable: bool,
    pub charset: Option<String>,
    pub collation: Option<String>,
    pub collation_id: Option<u16>,
    pub numeric_precision: Option<u64>,
    pub datetime_precision: Option<u64>,
    pub octet_length: Option<u64>,
    /// `CHARACTER_MAXIMUM_LENGTH`: a character column's length in characters.
    pub char_length: Option<u64>,
    /// MySQL `COLLATIONS.PAD_ATTRIBUTE` (`PAD SPACE` / `NO PAD`); `None` where the server
    /// has no such column (MariaDB), see [`pads_space`].
    pub pad_attribute: Option<String>,
}

/// One `information_schema.STATISTICS` row of a unique index, as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IndexRow {
    pub index: String,
    pub seq: u64,
    /// `None` for a functional key part.
    pub column: Option<String>,
    /// `Some` for a prefix key part.
    pub sub_part: Option<u64>,
}

/// One column of a [`TableLayout`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ColumnInfo {
    pub name: String,
    pub kind: ColKind,
}

/// What the chunk reader needs beyond [`SnapshotTable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableLayout {
    pub table: SnapshotTable,
    pub columns: Vec<ColumnInfo>,
    /// Per key column (key order): the declared byte length of a `BINARY(n)` part, to pad a
    /// stripped cursor back to the stored value.
    pub fixed_len: Vec<Option<usize>>,
}

fn fsp(p: Option<u64>) -> u8 {
    p.and_then(|p| u8::try_from(p).ok()).unwrap_or(0).min(6)
}

fn col_kind(table: &TableId, c: &ColumnRow) -> Result<ColKind, SnapshotError> {
    let unsigned = c.column_type.to_ascii_lowercase().contains("unsigned");
    let binary = c.collation.as_deref().is_none_or(|n| n == "binary");
    let text = || match (binary, c.collation_id) {
        (false, Some(id)) => ColKind::Text { collation: id },
        _ => ColKind::Bytes,
    };
    Ok(match c.data_type.to_ascii_lowercase().as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" => {
            ColKind::Int { unsigned }
        }
        "decimal" | "numeric" => ColKind::Decimal,
        "float" => ColKind::Float,
        "double" | "real" | "double precision" => ColKind::Double,
        "year" => ColKind::Year,
        "date" => ColKind::Date,
        "time" => ColKind::Time {
            fsp: fsp(c.datetime_precision),
        },
        "datetime" => ColKind::DateTime {
            fsp: fsp(c.datetime_precision),
        },
        "timestamp" => ColKind::Timestamp {
            fsp: fsp(c.datetime_precision),
        },
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" => text(),
        "binary" => ColKind::FixedBinary,
        "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => ColKind::Bytes,
        "bit" => ColKind::Bit {
            bits: c
                .numeric_precision
                .and_then(|p| u16::try_from(p).ok())
                .filter(|b| (1..=64).contains(b))
                .ok_or_else(|| unsupported_column(table, c))?,
        },
        "enum" => ColKind::Enum,
        "set" => ColKind::Set,
        "json" => ColKind::Json,
        "geometry" | "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
        | "multipolygon" | "geometrycollection" | "geomcollection" => ColKind::Geometry,
        "vector" => ColKind::Vector,
        _ => return Err(unsupported_column(table, c)),
    })
}

fn unsupported_column(table: &TableId, c: &ColumnRow) -> SnapshotError {
    SnapshotError::ColumnUnsupportedType {
        table: table.clone(),
        column: c.name.clone(),
        data_type: c.data_type.to_ascii_lowercase(),
    }
}

/// True for a character set or collation name safe to splice into SQL.
pub(crate) fn is_plain_identifier(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// True if `collation` compares as if the shorter value were padded with spaces: MySQL says
/// so in `PAD_ATTRIBUTE`; MariaDB has no such column and names every NO PAD collation
/// `…_nopad_…`, every other one pads.
pub(crate) fn pads_space(collation: &str, pad_attribute: Option<&str>) -> bool {
    match pad_attribute {
        Some(attr) => attr.trim().eq_ignore_ascii_case("PAD SPACE"),
        None => !collation.to_ascii_lowercase().contains("_nopad_"),
    }
}

fn key_kind(table: &TableId, c: &ColumnRow) -> Result<KeyKind, SnapshotError> {
    let refuse = || SnapshotError::PkUnsupportedType {
        table: table.clone(),
        column: c.name.clone(),
        data_type: c.data_type.to_ascii_lowercase(),
    };
    let unsigned = c.column_type.to_ascii_lowercase().contains("unsigned");
    Ok(match c.data_type.to_ascii_lowercase().as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" if unsigned => {
            KeyKind::UInt
        }
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" => KeyKind::Int,
        "binary" => KeyKind::FixedBinary,
        "varbinary" => KeyKind::VarBinary,
        "char" | "varchar" => match (&c.charset, &c.collation) {
            (_, Some(coll)) if coll == "binary" => KeyKind::VarBinary,
            (Some(cs), Some(coll)) => {
                if !is_plain_identifier(cs) {
                    return Err(SnapshotError::InvalidIdentifier { what: "charset" });
                }
                if !is_plain_identifier(coll) {
                    return Err(SnapshotError::InvalidIdentifier { what: "collation" });
                }
                let pad_to = if pads_space(coll, c.pad_attribute.as_deref()) {
                    // the column's length: the canary's values must fit it, and a
                    // multi-level collation is weighed at it (see `weighing`)
                    let n = c
                        .char_length
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|n| *n > 0)
                        .ok_or_else(refuse)?;
                    Some(n)
                } else {
                    None
                };
                KeyKind::Text {
                    charset: cs.clone(),
                    collation: coll.clone(),
                    pad_to,
                }
            }
            _ => return Err(refuse()),
        },
        _ => return Err(refuse()),
    })
}

/// 64-bit FNV-1a.
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn fingerprint(columns: &[ColumnRow], key: &KeyShape) -> u64 {
    let mut bytes = Vec::new();
    for c in columns {
        for field in [
            c.name.as_bytes(),
            c.column_type.as_bytes(),
            c.charset.as_deref().unwrap_or("").as_bytes(),
            c.collation.as_deref().unwrap_or("").as_bytes(),
            if c.nullable { b"null" } else { b"not null" },
        ] {
            bytes.extend_from_slice(field);
            bytes.push(0);
        }
        bytes.push(0xff);
    }
    bytes.extend_from_slice(b"key");
    for k in &key.columns {
        bytes.push(0);
        bytes.extend_from_slice(k.name.as_bytes());
    }
    fnv1a(&[&bytes])
}

/// Builds the table description from `information_schema` rows. Pure. `columns` in ordinal
/// order (empty: the table does not exist); `indexes` are the unique indexes' rows.
pub(crate) fn describe_from(
    table: &TableId,
    columns: Vec<ColumnRow>,
    indexes: &[IndexRow],
    estimated_rows: u64,
) -> Result<TableLayout, SnapshotError> {
    if columns.is_empty() {
        return Err(SnapshotError::TableNotFound {
            table: table.clone(),
        });
    }
    let infos = columns
        .iter()
        .map(|c| {
            Ok(ColumnInfo {
                name: c.name.clone(),
                kind: col_kind(table, c)?,
            })
        })
        .collect::<Result<Vec<_>, SnapshotError>>()?;
    let mut names: Vec<&str> = indexes.iter().map(|i| i.index.as_str()).collect();
    names.sort_unstable_by(|a, b| (*a != "PRIMARY").cmp(&(*b != "PRIMARY")).then(a.cmp(b)));
    names.dedup();
    let parts = |name: &str| {
        let mut p: Vec<&IndexRow> = indexes.iter().filter(|i| i.index == name).collect();
        p.sort_by_key(|i| i.seq);
        p
    };
    let position = |n: &str| columns.iter().position(|c| c.name == n);
    let mut chosen = None;
    for name in names {
        let p = parts(name);
        let primary = name == "PRIMARY";
        let usable = p.iter().all(|i| {
            i.sub_part.is_none()
                && i.column
                    .as_deref()
                    .and_then(position)
                    .is_some_and(|pos| columns.get(pos).is_some_and(|c| !c.nullable))
        });
        if primary {
            // a primary key part that is a prefix or an expression cannot order the chunks
            if let Some(bad) = p
                .iter()
                .find(|i| i.sub_part.is_some() || i.column.is_none())
            {
                // name the column's type when that is what rules it out (a TEXT key is
                // always a prefix key)
                if let Some(c) = bad
                    .column
                    .as_deref()
                    .and_then(position)
                    .and_then(|i| columns.get(i))
                {
                    key_kind(table, c)?;
                }
                return Err(SnapshotError::PkUnsupportedType {
                    table: table.clone(),
                    column: bad.column.clone().unwrap_or_default(),
                    data_type: "prefix".into(),
                });
            }
        }
        if primary || usable {
            chosen = Some((p, !primary));
            break;
        }
    }
    let Some((parts, from_unique_key)) = chosen else {
        return Err(SnapshotError::TableNoPrimaryKey {
            table: table.clone(),
        });
    };
    let mut key_columns = Vec::with_capacity(parts.len());
    let mut fixed_len = Vec::with_capacity(parts.len());
    for part in parts {
        let pos = part.column.as_deref().and_then(position).ok_or_else(|| {
            SnapshotError::TableNoPrimaryKey {
                table: table.clone(),
            }
        })?;
        let c = columns
            .get(pos)
            .ok_or_else(|| SnapshotError::TableNoPrimaryKey {
                table: table.clone(),
            })?;
        let kind = key_kind(table, c)?;
        fixed_len.push(match kind {
            KeyKind::FixedBinary => Some(
                c.octet_length
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| unsupported_column(table, c))?,
            ),
            _ => None,
        });
        key_columns.push(KeyColumn {
            name: c.name.clone(),
            position: pos,
            kind,
        });
    }
    let key = KeyShape {
        columns: key_columns,
        from_unique_key,
    };
    let fingerprint = fingerprint(&columns, &key);
    Ok(TableLayout {
        table: SnapshotTable {
            id: table.clone(),
            columns: columns.iter().map(|c| c.name.clone()).collect(),
            key,
            types: columns
                .iter()
                .zip(&infos)
                .map(|(c, info)| declared_type(c, info.kind))
                .collect(),
            estimated_rows,
            fingerprint,
        },
        columns: infos,
        fixed_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, data_type: &str, column_type: &str, nullable: bool) -> ColumnRow {
        let text = matches!(data_type, "char" | "varchar" | "text");
        ColumnRow {
            name: name.into(),
            data_type: data_type.into(),
            column_type: column_type.into(),
            nullable,
            charset: text.then(|| "utf8mb4".into()),
            collation: text.then(|| "utf8mb4_0900_ai_ci".into()),
            collation_id: text.then_some(255),
            octet_length: Some(16),
            char_length: text.then_some(4),
            pad_attribute: text.then(|| "NO PAD".into()),
            ..ColumnRow::default()
        }
    }

    fn idx(index: &str, seq: u64, column: &str) -> IndexRow {
        IndexRow {
            index: index.into(),
            seq,
            column: Some(column.into()),
            sub_part: None,
        }
    }

    fn t() -> TableId {
        TableId::new("s", "t")
    }

    #[test]
    fn primary_key_in_key_order() {
        let cols = vec![
            col("a", "int", "int", false),
            col("b", "varbinary", "varbinary(8)", false),
            col("c", "bigint", "bigint unsigned", false),
        ];
        let keys = [
            idx("PRIMARY", 2, "b"),
            idx("PRIMARY", 1, "c"),
            idx("u", 1, "a"),
        ];
        let l = describe_from(&t(), cols, &keys, 5).unwrap();
        let k: Vec<_> = l
            .table
            .key
            .columns
            .iter()
            .map(|c| (c.name.as_str(), c.position))
            .collect();
        assert_eq!(k, [("c", 2), ("b", 1)]);
        assert_eq!(l.table.key.columns[0].kind, KeyKind::UInt);
        assert_eq!(l.table.key.columns[1].kind, KeyKind::VarBinary);
        assert!(!l.table.key.from_unique_key);
        assert_eq!(l.table.estimated_rows, 5);
    }

    #[test]
    fn unique_key_needs_every_column_not_null() {
        let cols = vec![col("a", "int", "int", true), col("b", "int", "int", false)];
        let keys = [idx("a_u", 1, "a"), idx("b_u", 1, "b")];
        let l = describe_from(&t(), cols.clone(), &keys, 0).unwrap();
        assert!(l.table.key.from_unique_key);
        assert_eq!(l.table.key.columns[0].name, "b");
        let e = describe_from(&t(), cols, &keys[..1], 0).unwrap_err();
        assert_eq!(e.code(), "snapshot_table_no_primary_key");
    }

    #[test]
    fn unsupported_key_types_are_refused_with_the_column() {
        for (dt, ct) in [
            ("text", "text"),
            ("decimal", "decimal(10,2)"),
            ("enum", "enum('a')"),
            ("datetime", "datetime"),
            ("double", "double"),
        ] {
            let cols = vec![col("k", dt, ct, false)];
            let e = describe_from(&t(), cols, &[idx("PRIMARY", 1, "k")], 0).unwrap_err();
            assert_eq!(e.code(), "snapshot_pk_unsupported_type", "{dt}");
            assert!(e.to_string().contains("column k"), "{e}");
        }
        let e = describe_from(&t(), vec![], &[], 0).unwrap_err();
        assert_eq!(e.code(), "snapshot_table_not_found");
    }

    #[test]
    fn fingerprint_tracks_definitions() {
        let cols = vec![
            col("a", "int", "int", false),
            col("v", "varchar", "varchar(5)", true),
        ];
        let keys = [idx("PRIMARY", 1, "a")];
        let f1 = describe_from(&t(), cols.clone(), &keys, 0)
            .unwrap()
            .table
            .fingerprint;
        let f2 = describe_from(&t(), cols.clone(), &keys, 9)
            .unwrap()
            .table
            .fingerprint;
        assert_eq!(f1, f2);
        let mut changed = cols;
        changed[1].column_type = "varchar(6)".into();
        let f3 = describe_from(&t(), changed, &keys, 0)
            .unwrap()
            .table
            .fingerprint;
        assert_ne!(f1, f3);
    }

    #[test]
    fn pad_space_text_keys_carry_their_character_length() {
        // MySQL: PAD_ATTRIBUTE decides
        let mut c = col("k", "varchar", "varchar(4)", false);
        c.collation = Some("utf8mb4_general_ci".into());
        c.pad_attribute = Some("PAD SPACE".into());
        let key = |c: ColumnRow| {
            describe_from(&t(), vec![c], &[idx("PRIMARY", 1, "k")], 0)
                .map(|l| l.table.key.columns[0].kind.clone())
        };
        let pad = |k: KeyKind| match k {
            KeyKind::Text { pad_to, .. } => pad_to,
            other => panic!("{other:?}"),
        };
        assert_eq!(pad(key(c.clone()).unwrap()), Some(4));
        let mut nopad = c.clone();
        nopad.pad_attribute = Some("NO PAD".into());
        assert_eq!(pad(key(nopad).unwrap()), None);
        // MariaDB: the name decides
        let mut maria = c.clone();
        maria.pad_attribute = None;
        assert_eq!(pad(key(maria.clone()).unwrap()), Some(4));
        maria.collation = Some("utf8mb4_general_nopad_ci".into());
        assert_eq!(pad(key(maria).unwrap()), None);
        // a padding collation without a length cannot be ordered
        let mut unknown = c;
        unknown.char_length = None;
        let e = key(unknown).unwrap_err();
        assert_eq!(e.code(), "snapshot_pk_unsupported_type");
        assert!(pads_space("latin1_swedish_ci", None));
        assert!(!pads_space("latin1_swedish_nopad_ci", None));
        assert!(!pads_space("utf8mb4_0900_ai_ci", Some("NO PAD")));
    }

    #[test]
    fn collation_names_must_be_plain() {
        let mut c = col("k", "varchar", "varchar(5)", false);
        c.collation = Some("x`y".into());
        let e = describe_from(&t(), vec![c], &[idx("PRIMARY", 1, "k")], 0).unwrap_err();
        assert_eq!(e.code(), "snapshot_identifier_invalid");
    }
}
