//! `message_key_columns`: per table, the columns that form its record key instead of the
//! primary key (Debezium's `message.key.columns`), as users write it and its checked form.

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_core::change::TableId;
use serde::{Deserialize, Serialize};

use crate::record::MessageKeys;
use crate::SinkError;

/// `{"db.table": ["col", …], …}`: the record key of each named table is the object of these
/// columns, in this order, whatever its primary or unique key.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageKeyColumns(BTreeMap<String, Vec<String>>);

fn invalid(reason: String) -> SinkError {
    SinkError::InvalidConfig {
        field: "message_key_columns",
        reason,
    }
}

impl MessageKeyColumns {
    /// Adds (or replaces) the key columns of `table` (`"db.table"`).
    pub fn insert(&mut self, table: &str, columns: &[&str]) {
        self.0.insert(
            table.to_string(),
            columns.iter().map(|c| (*c).to_string()).collect(),
        );
    }

    /// Checks every entry without I/O: a table is `db.table` (split at its first `.`, both
    /// parts non-empty), its column list is non-empty, without empty or repeated names.
    pub fn validate(&self) -> Result<MessageKeys, SinkError> {
        let mut out = BTreeMap::new();
        for (table, columns) in &self.0 {
            let id = match table.split_once('.') {
                Some((db, t)) if !db.is_empty() && !t.is_empty() => TableId::new(db, t),
                _ => return Err(invalid(format!("table {table:?} must be written db.table"))),
            };
            if columns.is_empty() {
                return Err(invalid(format!("{table}: at least one column is required")));
            }
            for (i, c) in columns.iter().enumerate() {
                if c.is_empty() {
                    return Err(invalid(format!("{table}: a column name is empty")));
                }
                if columns[..i].contains(c) {
                    return Err(invalid(format!("{table}: column {c} is named twice")));
                }
            }
            out.insert(id, columns.iter().cloned().collect());
        }
        Ok(Arc::new(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(json: &str) -> String {
        let m: MessageKeyColumns = serde_json::from_str(json).unwrap();
        match m.validate().unwrap_err() {
            SinkError::InvalidConfig { field, reason } => {
                assert_eq!(field, "message_key_columns");
                reason
            }
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn tables_map_to_their_columns_in_order() {
        let m: MessageKeyColumns =
            serde_json::from_str(r#"{"shop.orders": ["tenant", "no"], "a.b.c": ["x"]}"#).unwrap();
        let keys = m.validate().unwrap();
        assert_eq!(
            keys.get(&TableId::new("shop", "orders"))
                .map(|c| c.to_vec()),
            Some(vec!["tenant".to_string(), "no".to_string()])
        );
        // split at the first dot: database a, table b.c
        assert!(keys.contains_key(&TableId::new("a", "b.c")));
        assert!(MessageKeyColumns::default().validate().unwrap().is_empty());
    }

    #[test]
    fn bad_entries_are_refused_naming_the_table() {
        assert!(reason(r#"{"orders": ["id"]}"#).contains("\"orders\""));
        assert!(reason(r#"{".orders": ["id"]}"#).contains("db.table"));
        assert!(reason(r#"{"shop.orders": []}"#).starts_with("shop.orders: at least one"));
        assert!(reason(r#"{"shop.orders": [""]}"#).contains("empty"));
        assert!(reason(r#"{"shop.orders": ["a", "a"]}"#).contains("column a is named twice"));
        assert!(serde_json::from_str::<MessageKeyColumns>(r#"{"shop.orders": "id"}"#).is_err());
    }
}
