//! One changed row.

use std::fmt;
use std::sync::Arc;

use super::column_type::ColumnTypes;
use super::row::Row;
use super::table_id::TableId;

/// What happened to a row.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Op {
    /// A new row: `after` only.
    Insert,
    /// A changed row: `before` and `after`.
    Update,
    /// A removed row: `before` only.
    Delete,
}

impl Op {
    /// Lowercase name: `insert`, `update`, `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One changed row of one table.
///
/// `before` is present for updates and deletes, `after` for inserts and updates. `key` lists
/// the primary-key column indexes (into the row, table order) from the table map's metadata;
/// it is empty for a table without a primary key.
#[derive(Clone, PartialEq)]
pub struct Change {
    /// The table the row belongs to (shared by all changes of one table map).
    pub table: Arc<TableId>,
    /// Insert, update or delete.
    pub op: Op,
    /// The row before the change (updates, deletes).
    pub before: Option<Row>,
    /// The row after the change (inserts, updates).
    pub after: Option<Row>,
    /// Primary-key column indexes, in key order.
    pub key: Arc<[usize]>,
    /// The declared column types of the table version the rows were written under, in table
    /// order (`None` when the source does not give them).
    pub types: Option<ColumnTypes>,
}

impl Change {
    /// Bytes the change holds (both images), for byte budgets: an estimate of the memory it
    /// takes, not of its encoded size.
    pub fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Change>()
            + [&self.before, &self.after]
                .into_iter()
                .flatten()
                .map(Row::approximate_bytes)
                .sum::<usize>()
    }

    /// The image that identifies the row: `after` for inserts and updates, `before` for
    /// deletes.
    pub fn current_image(&self) -> Option<&Row> {
        match self.op {
            Op::Insert | Op::Update => self.after.as_ref(),
            Op::Delete => self.before.as_ref(),
        }
    }

    /// Names of the primary-key columns, in key order.
    pub fn key_column_names(&self) -> Vec<&str> {
        let Some(row) = self.before.as_ref().or(self.after.as_ref()) else {
            return Vec::new();
        };
        self.key
            .iter()
            .filter_map(|&i| row.columns().get(i).map(String::as_str))
            .collect()
    }
}

impl fmt::Debug for Change {
    /// Structure only: table, op, key columns and the (redacted) images.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Change")
            .field("table", &self.table.to_string())
            .field("op", &self.op)
            .field("key", &self.key)
            .field("before", &self.before)
            .field("after", &self.after)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::Value;

    #[test]
    fn key_names_and_redacted_debug() {
        let cols: Arc<[String]> = vec!["id".to_string(), "secret".to_string()].into();
        let row = Row::new(cols, vec![Value::Int(7), Value::Bytes(b"hunter2".to_vec())]).unwrap();
        let c = Change {
            table: Arc::new(TableId::new("s", "t")),
            op: Op::Delete,
            before: Some(row),
            after: None,
            key: vec![0].into(),
            types: None,
        };
        assert_eq!(c.key_column_names(), vec!["id"]);
        assert!(c.current_image().is_some());
        let s = format!("{c:?}");
        assert!(!s.contains("hunter2") && s.contains("s.t"), "{s}");
    }
}
