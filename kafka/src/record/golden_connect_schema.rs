//! Golden tests of `format: debezium_json_schema`: keys and values wrapped with their Kafka
//! Connect schemas as Debezium's JSON converter writes them (`schemas.enable=true`), the
//! payload exactly the `debezium_json` record, and schemas built once per table version.

use std::sync::Arc;

use capstan_core::change::{ColumnType, ColumnTypes, Op, SqlType, TableId, Value};
use serde_json::{json, Value as Json};

use super::golden_tests::{builder, change, coords, ctx, json_of, row, tx};
use super::*;

fn schema_builder(schemas: bool) -> RecordBuilder {
    RecordBuilder::new(RecordOptions {
        encoding: ValueEncoding::Debezium(TypeMapping::default()),
        schemas: if schemas {
            SchemaFraming::ConnectJson
        } else {
            SchemaFraming::None
        },
        ..builder(true, false).options().clone()
    })
}

fn items() -> TableId {
    TableId::new("shop", "items")
}

fn types(price_scale: u8) -> ColumnTypes {
    let t = |sql, nullable| ColumnType { sql, nullable };
    vec![
        t(
            SqlType::Int {
                bytes: 4,
                unsigned: false,
            },
            false,
        ),
        t(
            SqlType::Decimal {
                precision: 10,
                scale: price_scale,
            },
            true,
        ),
        t(SqlType::Date, false),
        t(SqlType::Text, true),
    ]
    .into()
}

fn item(id: i64, price: &str) -> capstan_core::change::Row {
    row(
        &["id", "price", "day", "note"],
        vec![
            Value::Int(id),
            Value::Decimal(price.into()),
            Value::Date(capstan_core::change::Date {
                year: 2024,
                month: 1,
                day: 31,
            }),
            Value::Null,
        ],
    )
}

fn typed(
    op: Op,
    before: Option<capstan_core::change::Row>,
    after: Option<capstan_core::change::Row>,
    types: &ColumnTypes,
) -> capstan_core::change::Change {
    let mut c = change(&items(), op, before, after, &[0]);
    c.types = Some(Arc::clone(types));
    c
}

#[test]
fn keys_and_values_carry_debeziums_connect_schemas() {
    let ty = types(2);
    let t = tx(
        31,
        vec![
            typed(Op::Insert, None, Some(item(1, "12.34")), &ty),
            typed(Op::Delete, Some(item(1, "12.34")), None, &ty),
        ],
    );
    let b = schema_builder(true);
    let recs = b.transaction_records(&t, &coords(), &ctx()).unwrap();
    let plain = schema_builder(false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 3, "c, d, tombstone");
    let key_schema = json!({"type": "struct", "optional": false, "name": "cdc.shop.items.Key",
        "fields": [{"type": "int32", "optional": false, "field": "id"}]});
    assert_eq!(
        json_of(&recs[0].key),
        json!({"schema": key_schema, "payload": {"id": 1}})
    );
    let v = json_of(&recs[0].value);
    // the payload is the debezium_json record, unchanged
    assert_eq!(v["payload"], json_of(&plain[0].value));
    let row_fields = json!([
        {"type": "int32", "optional": false, "field": "id"},
        {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
         "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"},
         "field": "price"},
        {"type": "int32", "optional": false, "name": "io.debezium.time.Date", "version": 1,
         "field": "day"},
        {"type": "string", "optional": true, "field": "note"},
    ]);
    let s = &v["schema"];
    assert_eq!(s["name"], "cdc.shop.items.Envelope");
    assert_eq!(s["version"], 2);
    assert_eq!(s["optional"], false);
    let names: Vec<&str> = s["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["before", "after", "source", "transaction", "op", "ts_ms"],
        "Debezium's field order"
    );
    for (i, f) in ["before", "after"].into_iter().enumerate() {
        assert_eq!(
            s["fields"][i],
            json!({"type": "struct", "optional": true, "name": "cdc.shop.items.Value",
                   "fields": row_fields, "field": f})
        );
    }
    let source = &s["fields"][2];
    assert_eq!(source["name"], "io.debezium.connector.mysql.Source");
    assert_eq!(source["version"], 1);
    assert_eq!(
        source["fields"][4],
        json!({"type": "string", "optional": true, "name": "io.debezium.data.Enum", "version": 1,
               "parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},
               "default": "false", "field": "snapshot"})
    );
    assert_eq!(
        s["fields"][3]["name"], "event.block",
        "the transaction block"
    );
    // the delete and its tombstone: the schema'd key, no value for the tombstone
    assert_eq!(json_of(&recs[1].value)["payload"]["op"], "d");
    assert_eq!(recs[2].key, recs[1].key);
    assert_eq!(recs[2].value, None);
    assert_eq!(json_of(&recs[2].key)["schema"], key_schema);
}

#[test]
fn schemas_are_built_once_per_table_version() {
    let ty = types(2);
    let b = schema_builder(true);
    let copy = b.clone();
    for gno in 0..50 {
        let t = tx(
            100 + gno,
            vec![typed(Op::Insert, None, Some(item(gno as i64, "1.00")), &ty)],
        );
        copy.transaction_records(&t, &coords(), &ctx()).unwrap();
    }
    assert_eq!(b.schemas_built(), 1, "one table version, one schema");
    // the same version again through a new Arc (a new table map of the same table): cached
    let same: ColumnTypes = ty.to_vec().into();
    let t = tx(
        200,
        vec![typed(Op::Insert, None, Some(item(1, "1.00")), &same)],
    );
    let first = b.transaction_records(&t, &coords(), &ctx()).unwrap();
    assert_eq!(b.schemas_built(), 1);
    // a snapshot chunk of the same version: the same schema
    let rows = vec![item(2, "2.00")];
    let chunk = SnapshotChunk {
        table: &items(),
        key: &[0],
        rows: &rows,
        types: Some(&ty),
        chunk_id: "c",
        coordinates: coords(),
        first_of_table: false,
        first_of_snapshot: false,
        last_of_table: false,
        last_of_snapshot: false,
        incremental: false,
    };
    let snap = b.snapshot_records(&chunk, &ctx()).unwrap();
    assert_eq!(b.schemas_built(), 1);
    assert_eq!(
        json_of(&snap[0].value)["schema"],
        json_of(&first[0].value)["schema"]
    );
    assert_eq!(json_of(&snap[0].value)["payload"]["op"], "r");
    // an ALTER (another scale): a new version, a new schema
    let altered = types(3);
    let t = tx(
        201,
        vec![typed(Op::Insert, None, Some(item(1, "1.000")), &altered)],
    );
    let recs = b.transaction_records(&t, &coords(), &ctx()).unwrap();
    assert_eq!(b.schemas_built(), 2);
    assert_eq!(
        json_of(&recs[0].value)["schema"]["fields"][1]["fields"][1]["parameters"]["scale"],
        "3"
    );
}

#[test]
fn without_declared_types_the_schema_follows_the_values() {
    let b = schema_builder(true);
    let t = tx(
        300,
        vec![change(
            &items(),
            Op::Insert,
            None,
            Some(item(5, "1.50")),
            &[0],
        )],
    );
    let recs = b.transaction_records(&t, &coords(), &ctx()).unwrap();
    let after: &Json = &json_of(&recs[0].value)["schema"]["fields"][1];
    assert_eq!(
        after["fields"][0],
        json!({"type": "int64", "optional": true, "field": "id"})
    );
    assert_eq!(after["fields"][1]["parameters"]["scale"], "2");
    // a NULL reads as optional text
    assert_eq!(
        after["fields"][3],
        json!({"type": "string", "optional": true, "field": "note"})
    );
    assert_eq!(b.schemas_built(), 0, "inferred schemas are not cached");
}

/// `bigint_unsigned_handling_mode: precise`: a BIGINT UNSIGNED (here the key) is Connect's
/// `Decimal` of scale 0, its value the unscaled two's-complement bytes in base64, as Debezium
/// writes it; an INT UNSIGNED stays an `int64` number; `long` keeps Debezium's wrapped long.
#[test]
fn precise_bigint_unsigned_is_a_decimal_of_scale_zero() {
    let t = |bytes, nullable| ColumnType {
        sql: SqlType::Int {
            bytes,
            unsigned: true,
        },
        nullable,
    };
    let ty: ColumnTypes = vec![t(8, false), t(4, true)].into();
    let built = |mode| {
        let b = RecordBuilder::new(RecordOptions {
            encoding: ValueEncoding::Debezium(TypeMapping {
                bigint_unsigned_handling_mode: mode,
                ..TypeMapping::default()
            }),
            schemas: SchemaFraming::ConnectJson,
            ..builder(true, false).options().clone()
        });
        let r = row(
            &["id", "n"],
            vec![Value::UInt(u64::MAX), Value::UInt(4_294_967_295)],
        );
        let mut c = change(&items(), Op::Insert, None, Some(r), &[0]);
        c.types = Some(Arc::clone(&ty));
        let recs = b
            .transaction_records(&tx(21, vec![c]), &coords(), &ctx())
            .unwrap();
        (json_of(&recs[0].key), json_of(&recs[0].value))
    };
    let (key, value) = built(BigintUnsignedHandling::Precise);
    let decimal = json!({"type": "bytes", "optional": false, "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1, "parameters": {"scale": "0", "connect.decimal.precision": "20"}, "field": "id"});
    assert_eq!(key["schema"]["fields"][0], decimal);
    // 2^64 - 1: 00 ff ff ff ff ff ff ff ff
    assert_eq!(key["payload"], json!({"id": "AP//////////"}));
    let after = &value["payload"]["after"];
    assert_eq!(*after, json!({"id": "AP//////////", "n": 4_294_967_295u64}));
    let fields = &value["schema"]["fields"][1]["fields"];
    assert_eq!(fields[0], decimal);
    assert_eq!(
        fields[1],
        json!({"type": "int64", "optional": true, "field": "n"})
    );
    let (key, _) = built(BigintUnsignedHandling::Long);
    assert_eq!(key["payload"], json!({"id": -1}));
    assert_eq!(
        key["schema"]["fields"][0],
        json!({"type": "int64", "optional": false, "field": "id"})
    );
}
