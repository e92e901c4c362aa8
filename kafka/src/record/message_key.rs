//! Which columns form a record's key: the pipeline's `message_key_columns` for the table when
//! it names the table (Debezium's `message.key.columns`), else the key the change or the
//! snapshot chunk brings (the primary key, or the NOT NULL unique key a table without one is
//! read by).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_core::change::TableId;

use crate::SinkError;

/// Per table, the column names of its record key (checked `message_key_columns`).
pub type MessageKeys = Arc<BTreeMap<TableId, Arc<[String]>>>;

/// The record-key column indexes of a row of `table` with columns `columns`: those named for
/// the table in `keys`, in their order, else `default`. A named column the row does not have
/// (dropped or renamed since the pipeline was configured) is an error naming it.
pub(crate) fn key_columns<'k>(
    keys: &MessageKeys,
    table: &TableId,
    columns: &[String],
    default: &'k [usize],
) -> Result<Cow<'k, [usize]>, SinkError> {
    let Some(names) = keys.get(table) else {
        return Ok(Cow::Borrowed(default));
    };
    names
        .iter()
        .map(|n| {
            columns
                .iter()
                .position(|c| c == n)
                .ok_or_else(|| SinkError::MessageKeyColumnMissing {
                    table: table.to_string(),
                    column: n.clone(),
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::super::golden_tests::{builder, change, coords, ctx, json_of, row, tx};
    use super::super::{RecordBuilder, RecordOptions, SnapshotChunk};
    use super::*;
    use capstan_core::change::{Op, Value};

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    #[test]
    fn named_columns_replace_the_default_key_in_their_order() {
        let t = TableId::new("shop", "orders");
        let keys: MessageKeys = Arc::new(
            [(
                t.clone(),
                vec!["no".to_string(), "tenant".to_string()].into(),
            )]
            .into_iter()
            .collect(),
        );
        let row = cols(&["id", "tenant", "no"]);
        assert_eq!(
            key_columns(&keys, &t, &row, &[0]).unwrap().as_ref(),
            &[2, 1]
        );
        let other = TableId::new("shop", "items");
        assert_eq!(
            key_columns(&keys, &other, &row, &[0]).unwrap().as_ref(),
            &[0]
        );
        let e = key_columns(&keys, &t, &cols(&["id", "tenant"]), &[0]).unwrap_err();
        assert_eq!(e.code(), "message_key_column_missing");
        assert_eq!(
            e.to_string(),
            "message key column no of shop.orders is not in the row"
        );
    }

    #[test]
    fn the_builder_keys_a_named_table_by_its_columns_in_stream_and_snapshot() {
        let t = TableId::new("shop", "lines");
        let b = RecordBuilder::new(RecordOptions {
            message_keys: Arc::new(
                [(
                    t.clone(),
                    vec!["no".to_string(), "tenant".to_string()].into(),
                )]
                .into_iter()
                .collect(),
            ),
            ..builder(true, false).options().clone()
        });
        let line = |id: i64, tenant: i64, no: i64| {
            row(
                &["id", "tenant", "no"],
                vec![Value::Int(id), Value::Int(tenant), Value::Int(no)],
            )
        };
        // an update that changes the primary key but not the message key is an update
        let recs = b
            .transaction_records(
                &tx(
                    41,
                    vec![change(
                        &t,
                        Op::Update,
                        Some(line(1, 7, 3)),
                        Some(line(2, 7, 3)),
                        &[0],
                    )],
                ),
                &coords(),
                &ctx(),
            )
            .unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(
            json_of(&recs[0].key),
            serde_json::json!({"no": 3, "tenant": 7})
        );
        assert_eq!(json_of(&recs[0].value)["op"], "u");
        // snapshot rows: the same key, though the chunk brings the primary key
        let rows = vec![line(1, 7, 3)];
        let chunk = SnapshotChunk {
            table: &t,
            key: &[0],
            rows: &rows,
            types: None,
            chunk_id: "c",
            coordinates: coords(),
            first_of_table: false,
            first_of_snapshot: false,
            last_of_table: false,
            last_of_snapshot: false,
            incremental: false,
        };
        let snap = b.snapshot_records(&chunk, &ctx()).unwrap();
        assert_eq!(
            json_of(&snap[0].key),
            serde_json::json!({"no": 3, "tenant": 7})
        );
        // a named column the row lacks halts, naming it
        let short = row(&["id", "tenant"], vec![Value::Int(1), Value::Int(7)]);
        let e = b
            .transaction_records(
                &tx(42, vec![change(&t, Op::Insert, None, Some(short), &[0])]),
                &coords(),
                &ctx(),
            )
            .unwrap_err();
        assert_eq!(e.code(), "message_key_column_missing");
        assert_eq!(e.consequence(), crate::Consequence::Halt);
    }
}
