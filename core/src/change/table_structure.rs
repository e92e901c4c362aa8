//! [`TableStructure`]: what the binlog's table map tells of a table's columns, for the
//! `tableChanges` of a schema-change event. Structure only: no default, no comment, no value.

/// One column of a [`TableStructure`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnStructure {
    /// The column name.
    pub name: String,
    /// MySQL's type name in upper case, with `UNSIGNED` when it is (`"VARCHAR"`,
    /// `"BIGINT UNSIGNED"`, `"MEDIUMTEXT"`, `"DATETIME"`).
    pub type_name: String,
    /// The declared length where the table map carries it: characters of `CHAR`/`VARCHAR`,
    /// bytes of `BINARY`/`VARBINARY`, precision of `DECIMAL`, bits of `BIT`, the fractional
    /// digits of a temporal type declared with some (`DATETIME(6)`: 6).
    pub length: Option<u32>,
    /// The scale of `DECIMAL`.
    pub scale: Option<u32>,
    /// The character set of a character, `ENUM` or `SET` column, when the table map names it.
    pub charset: Option<String>,
    /// True when the column accepts NULL.
    pub nullable: bool,
}

/// A table's columns in table order, and its primary-key column names in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStructure {
    /// The columns the pipeline captures (excluded columns are left out), in table order,
    /// each with its position in the table (1-based).
    pub columns: Vec<(u32, ColumnStructure)>,
    /// The primary-key column names, in key order (empty: none or unknown).
    pub primary_key: Vec<String>,
}
