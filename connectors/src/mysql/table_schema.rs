//! A table map, digested once per TABLE_MAP event into what row decoding needs: per column
//! the real type, its metadata bytes, signedness, collation, ENUM/SET member names; per table
//! the column names and primary-key columns.
//!
//! The optional metadata (MySQL 8.0 / MariaDB 10.5 with `binlog_row_metadata=FULL`) lists
//! signedness for "numeric" columns only, charsets for "character" columns only, and so on,
//! each in column order; we zip those lists back onto column indexes here. MySQL and MariaDB
//! disagree on one detail: MariaDB also gives GEOMETRY columns a charset (binary). MySQL 9
//! gives VECTOR columns one.

use std::sync::Arc;

use capstan_core::change::{ColumnTypes, TableId};
use capstan_core::position::Flavor;
use mysql_common::binlog::events::{OptionalMetadataField, TableMapEvent};
use mysql_common::constants::ColumnType;

use super::halt::Halt;

const TABLE_MAP: u8 = 19;

/// One column of a mapped table.
#[derive(Clone, PartialEq, Eq)]
pub struct ColumnSchema {
    /// Real type (`STRING` columns resolved to `ENUM`/`SET` through their metadata).
    pub column_type: ColumnType,
    /// Raw type code as written in the table map.
    pub type_code: u8,
    /// Type-specific metadata bytes (0 to 3 of them).
    pub meta: Vec<u8>,
    /// True if the column is nullable.
    pub nullable: bool,
    /// True for an UNSIGNED numeric column (from the SIGNEDNESS metadata).
    pub unsigned: bool,
    /// Collation id for character, ENUM and SET columns, when the metadata carries it.
    pub collation: Option<u16>,
    /// ENUM member names, in declaration order.
    pub enum_values: Option<Arc<[String]>>,
    /// SET member names, in declaration order.
    pub set_values: Option<Arc<[String]>>,
}

impl std::fmt::Debug for ColumnSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // ENUM/SET member names are schema, not row values, but they are user text: keep the
        // Debug to structure.
        f.debug_struct("ColumnSchema")
            .field("type_code", &self.type_code)
            .field("meta", &self.meta)
            .field("unsigned", &self.unsigned)
            .field("collation", &self.collation)
            .finish_non_exhaustive()
    }
}

/// A digested TABLE_MAP event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSchema {
    /// The table-map id the rows events refer to.
    pub table_id: u64,
    /// Schema and table name.
    pub table: Arc<TableId>,
    /// Columns in table order.
    pub columns: Vec<ColumnSchema>,
    /// Column names in table order (`@1`, `@2`, … when the metadata has none).
    pub column_names: Arc<[String]>,
    /// Primary-key column indexes in key order (empty if none or unknown).
    pub key: Arc<[usize]>,
    /// The declared column types, in table order (computed once per table map).
    pub types: ColumnTypes,
    /// True if the table map carried column names.
    pub has_column_names: bool,
    /// True if the table map carried signedness (or the table has no numeric column).
    pub has_signedness: bool,
}

fn is_numeric(t: ColumnType) -> bool {
    use ColumnType::*;
    matches!(
        t,
        MYSQL_TYPE_TINY
            | MYSQL_TYPE_SHORT
            | MYSQL_TYPE_INT24
            | MYSQL_TYPE_LONG
            | MYSQL_TYPE_LONGLONG
            | MYSQL_TYPE_DECIMAL
            | MYSQL_TYPE_NEWDECIMAL
            | MYSQL_TYPE_FLOAT
            | MYSQL_TYPE_DOUBLE
            | MYSQL_TYPE_YEAR
    )
}

fn is_character(t: ColumnType, flavor: Flavor) -> bool {
    use ColumnType::*;
    match t {
        // MySQL 9 gives VECTOR columns a (binary) charset entry too (vector.binlog fixture)
        MYSQL_TYPE_STRING
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_VECTOR => true,
        MYSQL_TYPE_GEOMETRY => flavor == Flavor::Mariadb,
        _ => false,
    }
}

fn bad_meta() -> Halt {
    Halt::parse(TABLE_MAP, "malformed table map optional metadata")
}

fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        // Not UTF-8 (a latin1 identifier or member name): map bytes to chars one to one
        // rather than lose them.
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

impl TableSchema {
    /// Digests a parsed TABLE_MAP event. `flavor` selects the MySQL or MariaDB reading of
    /// the charset metadata.
    pub fn from_event(tme: &TableMapEvent<'_>, flavor: Flavor) -> Result<Self, Halt> {
        let n = usize::try_from(tme.columns_count())
            .map_err(|_| Halt::parse(TABLE_MAP, "column count out of range"))?;
        let nulls = tme.null_bitmask();
        let mut columns = Vec::with_capacity(n.min(4096));
        for i in 0..n {
            let type_code = tme
                .get_raw_column_type(i)
                .ok()
                .flatten()
                .map(|t| t as u8)
                .ok_or(Halt::UnsupportedColumnType {
                    column: i,
                    type_code: 0,
                    reason: "unknown_type_code",
                })?;
            let column_type = match tme.get_column_type(i) {
                Ok(Some(t)) => t,
                _ => {
                    return Err(Halt::UnsupportedColumnType {
                        column: i,
                        type_code,
                        reason: "unresolvable_string_type",
                    })
                }
            };
            let meta = tme
                .get_column_metadata(i)
                .ok_or_else(|| Halt::parse(TABLE_MAP, "column metadata truncated"))?
                .to_vec();
            columns.push(ColumnSchema {
                column_type,
                type_code,
                meta,
                nullable: nulls.get(i).map(|b| *b).unwrap_or(true),
                unsigned: false,
                collation: None,
                enum_values: None,
                set_values: None,
            });
        }

        let mut names: Option<Vec<String>> = None;
        let mut key: Vec<usize> = Vec::new();
        let mut has_signedness = !columns.iter().any(|c| is_numeric(c.column_type));
        let numeric: Vec<usize> = indexes(&columns, |c| is_numeric(c.column_type));
        let character: Vec<usize> = indexes(&columns, |c| is_character(c.column_type, flavor));
        let enum_set: Vec<usize> = indexes(&columns, |c| {
            matches!(
                c.column_type,
                ColumnType::MYSQL_TYPE_ENUM | ColumnType::MYSQL_TYPE_SET
            )
        });
        let enums: Vec<usize> = indexes(&columns, |c| c.column_type == ColumnType::MYSQL_TYPE_ENUM);
        let sets: Vec<usize> = indexes(&columns, |c| c.column_type == ColumnType::MYSQL_TYPE_SET);

        for field in tme.iter_optional_meta() {
            match field.map_err(|_| bad_meta())? {
                OptionalMetadataField::Signedness(bits) => {
                    has_signedness = true;
                    for (bit, &col) in bits.iter().zip(&numeric) {
                        columns[col].unsigned = *bit;
                    }
                }
                OptionalMetadataField::DefaultCharset(dc) => {
                    for &col in &character {
                        columns[col].collation = Some(dc.default_charset());
                    }
                    for nd in dc.iter_non_default() {
                        let nd = nd.map_err(|_| bad_meta())?;
                        let pos = usize::try_from(nd.column_index()).map_err(|_| bad_meta())?;
                        let col = *character.get(pos).ok_or_else(bad_meta)?;
                        columns[col].collation = Some(nd.charset());
                    }
                }
                OptionalMetadataField::ColumnCharset(cc) => {
                    for (cs, &col) in cc.iter_charsets().zip(&character) {
                        columns[col].collation = Some(cs.map_err(|_| bad_meta())?);
                    }
                }
                OptionalMetadataField::EnumAndSetDefaultCharset(dc) => {
                    for &col in &enum_set {
                        columns[col].collation = Some(dc.default_charset());
                    }
                    for nd in dc.iter_non_default() {
                        let nd = nd.map_err(|_| bad_meta())?;
                        let pos = usize::try_from(nd.column_index()).map_err(|_| bad_meta())?;
                        let col = *enum_set.get(pos).ok_or_else(bad_meta)?;
                        columns[col].collation = Some(nd.charset());
                    }
                }
                OptionalMetadataField::EnumAndSetColumnCharset(cc) => {
                    for (cs, &col) in cc.iter_charsets().zip(&enum_set) {
                        columns[col].collation = Some(cs.map_err(|_| bad_meta())?);
                    }
                }
                OptionalMetadataField::ColumnName(cn) => {
                    let mut v = Vec::with_capacity(n.min(4096));
                    for name in cn.iter_names() {
                        v.push(text(name.map_err(|_| bad_meta())?.name_raw()));
                    }
                    if v.len() != n {
                        return Err(bad_meta());
                    }
                    names = Some(v);
                }
                OptionalMetadataField::EnumStrValue(ev) => {
                    for (vals, &col) in ev.iter_values().zip(&enums) {
                        let vals = vals.map_err(|_| bad_meta())?;
                        let list: Arc<[String]> =
                            vals.values().iter().map(|v| text(v.value_raw())).collect();
                        columns[col].enum_values = Some(list);
                    }
                }
                OptionalMetadataField::SetStrValue(sv) => {
                    for (vals, &col) in sv.iter_values().zip(&sets) {
                        let vals = vals.map_err(|_| bad_meta())?;
                        let list: Arc<[String]> =
                            vals.values().iter().map(|v| text(v.value_raw())).collect();
                        columns[col].set_values = Some(list);
                    }
                }
                OptionalMetadataField::SimplePrimaryKey(pk) => {
                    for idx in pk.iter_indexes() {
                        key.push(column_index(idx.map_err(|_| bad_meta())?, n)?);
                    }
                }
                OptionalMetadataField::PrimaryKeyWithPrefix(pk) => {
                    for k in pk.iter_keys() {
                        key.push(column_index(k.map_err(|_| bad_meta())?.column_index(), n)?);
                    }
                }
                OptionalMetadataField::GeometryType(_)
                | OptionalMetadataField::ColumnVisibility(_)
                | OptionalMetadataField::Dimensionality(_) => {}
            }
        }

        let types = super::column_types::column_types(&columns);
        let has_column_names = names.is_some();
        let column_names: Arc<[String]> = match names {
            Some(v) => v.into(),
            None => (1..=n).map(|i| format!("@{i}")).collect(),
        };
        Ok(TableSchema {
            table_id: tme.table_id(),
            table: Arc::new(TableId::new(
                text(tme.database_name_raw()),
                text(tme.table_name_raw()),
            )),
            columns,
            column_names,
            key: key.into(),
            types,
            has_column_names,
            has_signedness,
        })
    }
}

fn indexes(columns: &[ColumnSchema], pred: impl Fn(&ColumnSchema) -> bool) -> Vec<usize> {
    columns
        .iter()
        .enumerate()
        .filter(|(_, c)| pred(c))
        .map(|(i, _)| i)
        .collect()
}

fn column_index(idx: u64, n: usize) -> Result<usize, Halt> {
    usize::try_from(idx)
        .ok()
        .filter(|&i| i < n)
        .ok_or_else(bad_meta)
}
