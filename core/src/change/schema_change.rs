//! A DDL statement seen in the binlog.

use std::fmt;

use super::TableStructure;

/// What kind of DDL statement a [`SchemaChange`] reports.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SchemaChangeKind {
    /// `CREATE TABLE`.
    CreateTable,
    /// `ALTER TABLE`.
    AlterTable,
    /// `DROP TABLE`.
    DropTable,
    /// `RENAME TABLE`.
    RenameTable,
    /// `TRUNCATE TABLE`.
    TruncateTable,
    /// `CREATE INDEX`.
    CreateIndex,
    /// `DROP INDEX`.
    DropIndex,
    /// `CREATE DATABASE`/`SCHEMA`.
    CreateDatabase,
    /// `ALTER DATABASE`/`SCHEMA`.
    AlterDatabase,
    /// `DROP DATABASE`/`SCHEMA`.
    DropDatabase,
    /// Any other DDL (views, routines, triggers, events, …).
    Other,
}

impl SchemaChangeKind {
    /// Stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChangeKind::CreateTable => "create_table",
            SchemaChangeKind::AlterTable => "alter_table",
            SchemaChangeKind::DropTable => "drop_table",
            SchemaChangeKind::RenameTable => "rename_table",
            SchemaChangeKind::TruncateTable => "truncate_table",
            SchemaChangeKind::CreateIndex => "create_index",
            SchemaChangeKind::DropIndex => "drop_index",
            SchemaChangeKind::CreateDatabase => "create_database",
            SchemaChangeKind::AlterDatabase => "alter_database",
            SchemaChangeKind::DropDatabase => "drop_database",
            SchemaChangeKind::Other => "other",
        }
    }
}

impl fmt::Display for SchemaChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A DDL statement: the schema and table it names (best effort from the statement text;
/// `schema` falls back to the session's default database) and its kind.
///
/// `statement` is `None` unless the pipeline opted in to keeping DDL text: a statement can
/// carry literals (defaults, partition bounds, `IDENTIFIED BY` passwords). `Debug` never shows
/// it.
#[derive(Clone, PartialEq, Eq)]
pub struct SchemaChange {
    /// The schema the statement applies to, if known.
    pub schema: Option<String>,
    /// The first table the statement names, if any.
    pub table: Option<String>,
    /// The statement kind.
    pub kind: SchemaChangeKind,
    /// The statement text, only when the pipeline opted in.
    pub statement: Option<String>,
    /// The table structure the event's `tableChanges` entry describes, when the source knows
    /// it without parsing the statement: for `DROP TABLE`, the dropped table as its last table
    /// map gave it (Debezium's entry of a drop carries the table as it was). `None` otherwise.
    pub structure: Option<TableStructure>,
}

impl fmt::Debug for SchemaChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaChange")
            .field("schema", &self.schema)
            .field("table", &self.table)
            .field("kind", &self.kind)
            .field("statement", &self.statement.as_ref().map(|_| "<redacted>"))
            .field(
                "structure",
                &self.structure.as_ref().map(|s| s.columns.len()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_is_never_in_debug() {
        let c = SchemaChange {
            schema: Some("s".into()),
            table: None,
            kind: SchemaChangeKind::Other,
            statement: Some("CREATE USER u IDENTIFIED BY 'pw123'".into()),
            structure: None,
        };
        assert!(!format!("{c:?}").contains("pw123"));
        assert_eq!(c.kind.to_string(), "other");
    }
}
