//! The Avro datums capstan writes (`avro_writer.rs`, straight from the envelope) are the bytes
//! apache-avro writes for the registered schema from the same event's JSON form: checked for
//! every column type, NULLs, and every kind of record (insert, update, key change, delete,
//! tombstone), keys included.

use std::sync::Arc;

use capstan_core::change::{Op, Row, TableId, Value};
use serde_json::Value as Json;

use super::avro_subject::AvroSubject;
use super::golden_avro_schema::{avro_builder, columns, the_row, types_of};
use super::golden_tests::{change, coords, ctx, tx};
use super::*;

/// The same transaction in `debezium_json_schema`: its Connect schemas and payloads.
fn connect_builder() -> RecordBuilder {
    RecordBuilder::new(RecordOptions {
        schemas: SchemaFraming::ConnectJson,
        ..avro_builder().options().clone()
    })
}

/// apache-avro's datum of a `{"schema", "payload"}` record part.
fn oracle(part: &[u8], subject: &str) -> Vec<u8> {
    let part: Json = serde_json::from_slice(part).unwrap();
    AvroSubject::build(subject.into(), &part["schema"])
        .unwrap()
        .datum_by_apache_avro(&part["payload"])
        .unwrap()
}

#[test]
fn written_datums_are_apache_avros_for_every_type_and_record_kind() {
    let cols = columns();
    let types = types_of(&cols);
    let table = TableId::new("shop", "types");
    let full = the_row(&cols);
    // the same row with every nullable column NULL, and with another key
    let nulls = {
        let values: Vec<Value> = cols
            .iter()
            .map(|(_, t, v)| if t.nullable { Value::Null } else { v.clone() })
            .collect();
        Row::new(Arc::clone(full.columns_arc()), values).unwrap()
    };
    let rekeyed = {
        let mut values = full.values().to_vec();
        values[0] = Value::Int(43);
        Row::new(Arc::clone(full.columns_arc()), values).unwrap()
    };
    let typed = |op, before: Option<&Row>, after: Option<&Row>| {
        let mut c = change(&table, op, before.cloned(), after.cloned(), &[0]);
        c.types = Some(Arc::clone(&types));
        c
    };
    let changes = vec![
        typed(Op::Insert, None, Some(&full)),
        typed(Op::Insert, None, Some(&nulls)),
        typed(Op::Update, Some(&full), Some(&nulls)),
        typed(Op::Update, Some(&nulls), Some(&rekeyed)),
        typed(Op::Delete, Some(&rekeyed), None),
    ];
    let t = tx(5, changes);
    let avro = avro_builder()
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    let connect = connect_builder()
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(avro.len(), connect.len());
    // c, c, u, d + tombstone + c (the key change), d + tombstone: value datums and tombstones
    assert_eq!(avro.len(), 8);
    let mut values = 0;
    for (a, c) in avro.iter().zip(&connect) {
        let pending = a.registry.as_ref().unwrap();
        assert_eq!(
            a.key.as_deref().unwrap(),
            oracle(
                c.key.as_deref().unwrap(),
                pending.key.as_ref().unwrap().subject()
            ),
            "key"
        );
        match (&a.value, &c.value) {
            (Some(datum), Some(part)) => {
                values += 1;
                assert_eq!(
                    datum,
                    &oracle(part, pending.value.as_ref().unwrap().subject()),
                    "value of a {:?} record",
                    serde_json::from_slice::<Json>(part).unwrap()["payload"]["op"]
                );
            }
            (None, None) => {}
            _ => panic!("a tombstone in one format only"),
        }
    }
    assert_eq!(values, 6);
}
