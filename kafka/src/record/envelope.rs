//! The serialised shapes: the change-event envelope, its `source` block, row images as
//! ordered JSON objects, the transaction-metadata events and the schema-change events.
//!
//! Row images and keys keep the table's column order (and key order) on the wire, without
//! relying on serde_json's `preserve_order` feature: [`OrderedObject`] serialises its pairs
//! in the order given.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value as Json;

/// A JSON object whose keys serialise in insertion order; the keys are borrowed (a row's
/// column names), not copied per record.
#[derive(Clone, PartialEq, Default)]
pub(crate) struct OrderedObject<'r>(pub(crate) Vec<(&'r str, Cell<'r>)>);

/// One value of an [`OrderedObject`]: text borrowed from the row (UTF-8 text, a decimal, an
/// enum's label: no copy per record), or any JSON value. Serialises exactly as the JSON
/// string or value it stands for.
#[derive(Clone, Debug)]
pub(crate) enum Cell<'r> {
    Text(&'r str),
    Json(Json),
}

impl<'r> From<std::borrow::Cow<'r, str>> for Cell<'r> {
    fn from(text: std::borrow::Cow<'r, str>) -> Self {
        match text {
            std::borrow::Cow::Borrowed(s) => Cell::Text(s),
            std::borrow::Cow::Owned(s) => Cell::Json(Json::String(s)),
        }
    }
}

impl Cell<'_> {
    /// The text, when this is a string.
    fn as_str(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            Cell::Json(j) => j.as_str(),
        }
    }
}

/// Equal when the JSON they serialise to is equal (a borrowed and an owned string alike).
impl PartialEq for Cell<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Cell::Json(a), Cell::Json(b)) => a == b,
            _ => self.as_str().is_some() && self.as_str() == other.as_str(),
        }
    }
}

impl Serialize for Cell<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Text(s) => serializer.serialize_str(s),
            Cell::Json(j) => j.serialize(serializer),
        }
    }
}

impl Serialize for OrderedObject<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// The `source` block of a change event.
#[derive(Serialize)]
pub(crate) struct Source<'a> {
    pub(crate) version: &'static str,
    pub(crate) connector: &'static str,
    pub(crate) name: &'a str,
    pub(crate) ts_ms: u64,
    pub(crate) snapshot: &'static str,
    pub(crate) db: &'a str,
    /// Always set on data events; `None` (null) on a schema change that names no table.
    pub(crate) table: Option<&'a str>,
    pub(crate) server_id: u32,
    pub(crate) gtid: Option<&'a str>,
    pub(crate) file: &'a str,
    pub(crate) pos: u64,
    pub(crate) row: usize,
}

/// The `transaction` block of a streamed change event.
#[derive(Serialize)]
pub(crate) struct TransactionBlock<'a> {
    pub(crate) id: &'a str,
    pub(crate) total_order: u64,
    pub(crate) data_collection_order: u64,
}

/// A change event: `{before, after, source, transaction, op, ts_ms}`, in the order of
/// Debezium's envelope (and of its Connect schema, so the Avro writer meets the fields in the
/// plan's order).
#[derive(Serialize)]
pub(crate) struct Envelope<'a> {
    pub(crate) before: Option<&'a OrderedObject<'a>>,
    pub(crate) after: Option<&'a OrderedObject<'a>>,
    pub(crate) source: Source<'a>,
    pub(crate) transaction: Option<TransactionBlock<'a>>,
    pub(crate) op: &'static str,
    pub(crate) ts_ms: u64,
}

/// One data collection's event count in an `END` transaction event.
#[derive(Serialize)]
pub(crate) struct DataCollectionCount {
    pub(crate) data_collection: String,
    pub(crate) event_count: u64,
}

/// A transaction-metadata event (`BEGIN` or `END`).
#[derive(Serialize)]
pub(crate) struct TransactionEvent<'a> {
    pub(crate) status: &'static str,
    pub(crate) id: &'a str,
    pub(crate) event_count: Option<u64>,
    pub(crate) data_collections: Option<Vec<DataCollectionCount>>,
    pub(crate) ts_ms: u64,
}

/// The key of a transaction-metadata event.
#[derive(Serialize)]
pub(crate) struct TransactionKey<'a> {
    pub(crate) id: &'a str,
}

/// The key of a schema-change event (Debezium's `SchemaChangeKey`).
#[derive(Serialize)]
pub(crate) struct SchemaChangeKey<'a> {
    #[serde(rename = "databaseName")]
    pub(crate) database_name: &'a str,
}

/// A schema-change event (Debezium's `SchemaChangeValue`, without `tableChanges`, plus
/// capstan's `tableName` and `kind`).
#[derive(Serialize)]
pub(crate) struct SchemaChangeEvent<'a> {
    pub(crate) source: Source<'a>,
    pub(crate) ts_ms: u64,
    #[serde(rename = "databaseName")]
    pub(crate) database_name: &'a str,
    /// Always null: MySQL and MariaDB have no schemas inside a database.
    #[serde(rename = "schemaName")]
    pub(crate) schema_name: Option<&'a str>,
    #[serde(rename = "tableName")]
    pub(crate) table_name: Option<&'a str>,
    pub(crate) kind: &'static str,
    /// The statement text, only when the pipeline opted in; else null.
    pub(crate) ddl: Option<&'a str>,
    /// Debezium's `tableChanges`: an entry when the source knew the table's structure.
    #[serde(rename = "tableChanges")]
    pub(crate) table_changes: Vec<super::table_change::TableChange<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_and_an_owned_string_are_one_value() {
        let borrowed = Cell::Text("k-1");
        let owned = Cell::from(std::borrow::Cow::<str>::Owned("k-1".into()));
        assert!(matches!(owned, Cell::Json(Json::String(_))));
        // a key change is found by comparing keys: the two forms must not look like one
        assert_eq!(borrowed, owned);
        assert_eq!(owned, borrowed);
        assert_ne!(borrowed, Cell::Text("k-2"));
        assert_ne!(borrowed, Cell::Json(Json::Null));
        assert_ne!(Cell::Json(Json::from(1)), Cell::Text("1"));
        assert_eq!(Cell::Json(Json::from(1)), Cell::Json(Json::from(1)));
        let object = OrderedObject(vec![("id", borrowed), ("n", Cell::Json(Json::from(7)))]);
        assert_eq!(
            serde_json::to_string(&object).unwrap(),
            r#"{"id":"k-1","n":7}"#
        );
    }
}
