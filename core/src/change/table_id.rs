//! The identity of a table: schema and table name.

use std::fmt;

/// A table, named by its schema (database) and table name as the server reports them.
#[derive(
    Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, serde::Serialize, serde::Deserialize,
)]
pub struct TableId {
    /// Schema (database) name.
    pub schema: String,
    /// Table name.
    pub table: String,
}

impl TableId {
    /// A table id from its parts.
    pub fn new(schema: impl Into<String>, table: impl Into<String>) -> Self {
        TableId {
            schema: schema.into(),
            table: table.into(),
        }
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_schema_dot_table() {
        assert_eq!(TableId::new("shop", "orders").to_string(), "shop.orders");
    }
}
