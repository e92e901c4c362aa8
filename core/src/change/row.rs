//! One row image: column values in table order, with the column names.

use std::fmt;
use std::sync::Arc;

use super::value::Value;

/// A row image: every column of the table, in table order.
///
/// Column names are shared between all rows of a table map (`Arc`), so a large transaction
/// does not repeat them. `Debug` shows the column names and value kinds, never the values.
#[derive(Clone, PartialEq)]
pub struct Row {
    columns: Arc<[String]>,
    values: Vec<Value>,
}

/// A row whose value count differs from its column count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("row has {values} values for {columns} columns")]
pub struct RowShapeError {
    /// Number of column names.
    pub columns: usize,
    /// Number of values.
    pub values: usize,
}

impl Row {
    /// A row from shared column names and one value per column.
    pub fn new(columns: Arc<[String]>, values: Vec<Value>) -> Result<Self, RowShapeError> {
        if columns.len() != values.len() {
            return Err(RowShapeError {
                columns: columns.len(),
                values: values.len(),
            });
        }
        Ok(Row { columns, values })
    }

    /// Column names in table order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The shared column names.
    pub fn columns_arc(&self) -> &Arc<[String]> {
        &self.columns
    }

    /// Bytes the row holds (its values and what they point to; the shared column names are
    /// not counted), for byte budgets.
    pub fn approximate_bytes(&self) -> usize {
        std::mem::size_of::<Row>()
            + self.values.capacity() * std::mem::size_of::<Value>()
            + self.values.iter().map(Value::heap_bytes).sum::<usize>()
    }

    /// Values in table order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// Consumes the row, returning its values.
    pub fn into_values(self) -> Vec<Value> {
        self.values
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True for a zero-column row.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The value at a column index.
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.values.get(index)
    }

    /// The value of a named column.
    pub fn get_by_name(&self, name: &str) -> Option<&Value> {
        let i = self.columns.iter().position(|c| c == name)?;
        self.values.get(i)
    }

    /// `(name, value)` pairs in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.columns
            .iter()
            .map(String::as_str)
            .zip(self.values.iter())
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (name, value) in self.iter() {
            m.entry(&name, value);
        }
        m.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(names: &[&str]) -> Arc<[String]> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shape_is_checked() {
        assert!(Row::new(cols(&["a"]), vec![]).is_err());
        let r = Row::new(cols(&["a", "b"]), vec![Value::Int(1), Value::Null]).unwrap();
        assert_eq!(r.get_by_name("b"), Some(&Value::Null));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn debug_shows_names_not_values() {
        let r = Row::new(
            cols(&["email"]),
            vec![Value::Text {
                bytes: b"alice@example.com".to_vec(),
                collation: 255,
            }],
        )
        .unwrap();
        let s = format!("{r:?}");
        assert!(s.contains("email") && !s.contains("alice"), "{s}");
    }
}
