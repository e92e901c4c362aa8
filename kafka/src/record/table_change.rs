//! One entry of a schema-change event's `tableChanges`, in Debezium's shape (its
//! `JsonTableChangeSerializer`): `{"type", "id", "table": {"defaultCharsetName",
//! "primaryKeyColumnNames", "columns": [...]}}`, built from the [`TableStructure`] the source
//! knows. Fields capstan does not know are left out (`autoIncremented`, `generated`,
//! `comment`, `nativeType`) or null (`defaultCharsetName`). Pure; structure only, never a value.

use capstan_core::change::{ColumnStructure, SchemaChangeKind, TableStructure};
use serde::Serialize;

/// `java.sql.Types` codes, as Debezium's MySQL DDL parser assigns them to MySQL types.
mod jdbc {
    pub(super) const BIT: i32 = -7;
    pub(super) const SMALLINT: i32 = 5;
    pub(super) const INTEGER: i32 = 4;
    pub(super) const BIGINT: i32 = -5;
    pub(super) const FLOAT: i32 = 6;
    pub(super) const DOUBLE: i32 = 8;
    pub(super) const DECIMAL: i32 = 3;
    pub(super) const CHAR: i32 = 1;
    pub(super) const VARCHAR: i32 = 12;
    pub(super) const BINARY: i32 = -2;
    pub(super) const VARBINARY: i32 = -3;
    pub(super) const BLOB: i32 = 2004;
    pub(super) const DATE: i32 = 91;
    pub(super) const TIME: i32 = 92;
    pub(super) const TIMESTAMP: i32 = 93;
    pub(super) const TIMESTAMP_WITH_TIMEZONE: i32 = 2014;
    pub(super) const OTHER: i32 = 1111;
}

/// The `java.sql.Types` code of a MySQL type name (`UNSIGNED` ignored).
fn jdbc_type(type_name: &str) -> i32 {
    let base = type_name.split(' ').next().unwrap_or(type_name);
    match base {
        "TINYINT" | "SMALLINT" => jdbc::SMALLINT,
        "MEDIUMINT" | "INT" | "YEAR" => jdbc::INTEGER,
        "BIGINT" => jdbc::BIGINT,
        "FLOAT" => jdbc::FLOAT,
        "DOUBLE" => jdbc::DOUBLE,
        "DECIMAL" => jdbc::DECIMAL,
        "BIT" => jdbc::BIT,
        "DATE" => jdbc::DATE,
        "TIME" => jdbc::TIME,
        "DATETIME" => jdbc::TIMESTAMP,
        "TIMESTAMP" => jdbc::TIMESTAMP_WITH_TIMEZONE,
        "CHAR" | "ENUM" | "SET" => jdbc::CHAR,
        "VARCHAR" | "TINYTEXT" | "TEXT" | "MEDIUMTEXT" | "LONGTEXT" => jdbc::VARCHAR,
        "BINARY" => jdbc::BINARY,
        "VARBINARY" => jdbc::VARBINARY,
        "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" => jdbc::BLOB,
        // JSON, the GEOMETRY family, VECTOR
        _ => jdbc::OTHER,
    }
}

/// Debezium's change type of a statement kind whose entry can describe a table.
fn change_type(kind: SchemaChangeKind) -> Option<&'static str> {
    match kind {
        SchemaChangeKind::CreateTable => Some("CREATE"),
        SchemaChangeKind::AlterTable
        | SchemaChangeKind::RenameTable
        | SchemaChangeKind::CreateIndex
        | SchemaChangeKind::DropIndex => Some("ALTER"),
        SchemaChangeKind::DropTable => Some("DROP"),
        _ => None,
    }
}

/// One `tableChanges` entry.
#[derive(Serialize)]
pub(crate) struct TableChange<'a> {
    #[serde(rename = "type")]
    change_type: &'static str,
    /// `"db"."table"` (Debezium's `TableId.toDoubleQuotedString`).
    id: String,
    table: TableDocument<'a>,
}

#[derive(Serialize)]
struct TableDocument<'a> {
    /// The table's default charset: not in the table map, always null.
    #[serde(rename = "defaultCharsetName")]
    default_charset_name: Option<&'a str>,
    #[serde(rename = "primaryKeyColumnNames")]
    primary_key_column_names: &'a [String],
    columns: Vec<ColumnDocument<'a>>,
}

#[derive(Serialize)]
struct ColumnDocument<'a> {
    name: &'a str,
    #[serde(rename = "jdbcType")]
    jdbc_type: i32,
    #[serde(rename = "typeName")]
    type_name: &'a str,
    #[serde(rename = "typeExpression")]
    type_expression: &'a str,
    #[serde(rename = "charsetName")]
    charset_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    length: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scale: Option<u32>,
    position: u32,
    optional: bool,
}

impl<'a> ColumnDocument<'a> {
    fn new(position: u32, c: &'a ColumnStructure) -> Self {
        ColumnDocument {
            name: &c.name,
            jdbc_type: jdbc_type(&c.type_name),
            type_name: &c.type_name,
            type_expression: &c.type_name,
            charset_name: c.charset.as_deref(),
            length: c.length,
            scale: c.scale,
            position,
            optional: c.nullable,
        }
    }
}

/// `"name"`, with an embedded `"` doubled.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The `tableChanges` of a statement of `kind` on `db`.`table`: one entry when the source
/// knew the structure, else none.
pub(crate) fn table_changes<'a>(
    kind: SchemaChangeKind,
    db: &str,
    table: Option<&str>,
    structure: Option<&'a TableStructure>,
) -> Vec<TableChange<'a>> {
    let (Some(change_type), Some(table), Some(structure)) = (change_type(kind), table, structure)
    else {
        return Vec::new();
    };
    vec![TableChange {
        change_type,
        id: format!("{}.{}", quoted(db), quoted(table)),
        table: TableDocument {
            default_charset_name: None,
            primary_key_column_names: &structure.primary_key,
            columns: structure
                .columns
                .iter()
                .map(|(position, c)| ColumnDocument::new(*position, c))
                .collect(),
        },
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jdbc_types_follow_debeziums_mysql_parser() {
        let cases = [
            ("TINYINT UNSIGNED", 5),
            ("INT", 4),
            ("YEAR", 4),
            ("BIGINT UNSIGNED", -5),
            ("DATETIME", 93),
            ("TIMESTAMP", 2014),
            ("ENUM", 1),
            ("MEDIUMTEXT", 12),
            ("LONGBLOB", 2004),
            ("VARBINARY", -3),
            ("JSON", 1111),
            ("GEOMETRY", 1111),
        ];
        for (name, code) in cases {
            assert_eq!(jdbc_type(name), code, "{name}");
        }
    }

    #[test]
    fn no_entry_without_a_structure_or_for_a_statement_without_a_table() {
        let s = TableStructure::default();
        assert!(table_changes(SchemaChangeKind::DropTable, "d", Some("t"), None).is_empty());
        assert!(table_changes(SchemaChangeKind::DropTable, "d", None, Some(&s)).is_empty());
        assert!(
            table_changes(SchemaChangeKind::TruncateTable, "d", Some("t"), Some(&s)).is_empty()
        );
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
    }
}
