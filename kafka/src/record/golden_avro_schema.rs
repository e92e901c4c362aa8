//! Golden tests of `format: avro`: the Avro schemas derived from Debezium's Connect schemas
//! for the breadth of column types (as Confluent's AvroData derives them), the datums decoded
//! with the registered schema text, subjects by TopicNameStrategy, and schemas built once per
//! table version. When one of these changes, `docs/event-format.md` changes with it.

use std::sync::Arc;

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value as Avro;
use capstan_core::change::{ColumnType, ColumnTypes, Date, DateTime, Op, SqlType, TableId, Time};
use capstan_core::change::{Row, Value};
use serde_json::{json, Value as Json};

use super::golden_tests::{builder, change, coords, ctx, row, text, tx};
use super::*;

pub(super) fn avro_builder() -> RecordBuilder {
    RecordBuilder::new(RecordOptions {
        encoding: ValueEncoding::Debezium(TypeMapping::default()),
        schemas: SchemaFraming::Avro,
        ..builder(true, false).options().clone()
    })
}

fn t(sql: SqlType, nullable: bool) -> ColumnType {
    ColumnType { sql, nullable }
}

/// Column name, declared type, value.
pub(super) fn columns() -> Vec<(&'static str, ColumnType, Value)> {
    let members = |m: &[&str]| -> Arc<[String]> { m.iter().map(|s| s.to_string()).collect() };
    let int = |bytes, unsigned| SqlType::Int { bytes, unsigned };
    vec![
        ("id", t(int(4, false), false), Value::Int(-42)),
        ("c_tiny", t(int(1, false), true), Value::Int(7)),
        ("c_uint", t(int(4, true), false), Value::UInt(4_294_967_295)),
        ("c_big", t(int(8, false), true), Value::Null),
        (
            "c_decimal",
            t(
                SqlType::Decimal {
                    precision: 10,
                    scale: 3,
                },
                true,
            ),
            Value::Decimal("-12.340".into()),
        ),
        ("c_double", t(SqlType::Double, false), Value::Double(-2.5)),
        ("c-varchar", t(SqlType::Text, true), text("héllo")),
        (
            "c_blob",
            t(SqlType::Bytes, true),
            Value::Bytes(vec![0xde, 0xad]),
        ),
        (
            "c_date",
            t(SqlType::Date, false),
            Value::Date(Date {
                year: 2024,
                month: 2,
                day: 29,
            }),
        ),
        (
            "c_time",
            t(SqlType::Time { fsp: 6 }, true),
            Value::Time(Time {
                negative: false,
                hours: 1,
                minutes: 0,
                seconds: 0,
                micros: 5,
                fsp: 6,
            }),
        ),
        (
            "c_datetime3",
            t(SqlType::DateTime { fsp: 3 }, false),
            Value::DateTime(DateTime {
                date: Date {
                    year: 2012,
                    month: 3,
                    day: 18,
                },
                hour: 11,
                minute: 30,
                second: 45,
                micros: 120_000,
                fsp: 3,
            }),
        ),
        (
            "c_timestamp",
            t(SqlType::Timestamp { fsp: 0 }, false),
            Value::Timestamp {
                seconds: 1_650_493_080,
                micros: 0,
                fsp: 0,
            },
        ),
        ("c_year", t(SqlType::Year, true), Value::Year(2024)),
        (
            "c_bit1",
            t(SqlType::Bit { bits: 1 }, false),
            Value::Bit {
                bytes: vec![1],
                bits: 1,
            },
        ),
        (
            "c_bit12",
            t(SqlType::Bit { bits: 12 }, true),
            Value::Bit {
                bytes: vec![0x0a, 0xbc],
                bits: 12,
            },
        ),
        (
            "c_enum",
            t(
                SqlType::Enum {
                    members: members(&["small", "medium"]),
                },
                true,
            ),
            Value::Enum("medium".into()),
        ),
        (
            "c_set",
            t(
                SqlType::Set {
                    members: members(&["a", "c"]),
                },
                true,
            ),
            Value::Set("a,c".into()),
        ),
        (
            "c_json",
            t(SqlType::Json, true),
            Value::Json(r#"{"k":1}"#.into()),
        ),
        (
            "c_geo",
            t(SqlType::Geometry, true),
            Value::Geometry {
                srid: 4326,
                wkb: vec![1, 1],
            },
        ),
        ("c_geo2", t(SqlType::Geometry, true), Value::Null),
        (
            "c_vector",
            t(SqlType::Vector, true),
            Value::Vector(vec![0.5, -2.0]),
        ),
    ]
}

pub(super) fn types_of(cols: &[(&str, ColumnType, Value)]) -> ColumnTypes {
    cols.iter().map(|c| c.1.clone()).collect::<Vec<_>>().into()
}

pub(super) fn the_row(cols: &[(&str, ColumnType, Value)]) -> Row {
    let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
    row(&names, cols.iter().map(|c| c.2.clone()).collect())
}

fn insert(cols: &[(&str, ColumnType, Value)], types: &ColumnTypes, gno: u64) -> Vec<KafkaRecord> {
    let mut c = change(
        &TableId::new("shop", "types"),
        Op::Insert,
        None,
        Some(the_row(cols)),
        &[0],
    );
    c.types = Some(Arc::clone(types));
    avro_builder()
        .transaction_records(&tx(gno, vec![c]), &coords(), &ctx())
        .unwrap()
}

/// Decodes a datum with the schema text registered for it.
fn decode(schema: &RegistrySchema, datum: &[u8]) -> Avro {
    let parsed = apache_avro::Schema::parse_str(schema.schema()).unwrap();
    let reader = GenericDatumReader::builder(&parsed).build().unwrap();
    let mut bytes = datum;
    let v = reader.read_value(&mut bytes).unwrap();
    assert!(bytes.is_empty(), "the whole datum is read");
    v
}

fn field<'a>(record: &'a Avro, name: &str) -> &'a Avro {
    match record {
        Avro::Record(fields) => &fields.iter().find(|(n, _)| n == name).unwrap().1,
        Avro::Union(_, inner) => field(inner, name),
        v => panic!("not a record: {v:?}"),
    }
}

fn some(v: Avro) -> Avro {
    Avro::Union(1, Box::new(v))
}

#[test]
fn every_column_type_has_avrodatas_schema() {
    let cols = columns();
    let recs = insert(&cols, &types_of(&cols), 1);
    let pending = recs[0].registry.clone().unwrap();
    let value: Json = serde_json::from_str(pending.value.as_ref().unwrap().schema()).unwrap();
    let opt = |s: Json| json!(["null", s]);
    let logical =
        |ty: &str, name: &str| json!({"type": ty, "connect.version": 1, "connect.name": name});
    let f = |name: &str, ty: Json| json!({"name": name, "type": ty});
    let o = |name: &str, ty: Json| json!({"name": name, "type": opt(ty), "default": null});
    let want_fields = json!([
        f("id", json!("int")),
        o("c_tiny", json!({"type": "int", "connect.type": "int16"})),
        f("c_uint", json!("long")),
        o("c_big", json!("long")),
        o(
            "c_decimal",
            json!({"type": "bytes", "scale": 3, "precision": 10,
            "logicalType": "decimal", "connect.version": 1,
            "connect.parameters": {"scale": "3", "connect.decimal.precision": "10"},
            "connect.name": "org.apache.kafka.connect.data.Decimal"})
        ),
        f("c_double", json!("double")),
        // the column name adjusted as Debezium's field.name.adjustment.mode=avro
        o("c_varchar", json!("string")),
        o("c_blob", json!("bytes")),
        f("c_date", logical("int", "io.debezium.time.Date")),
        o("c_time", logical("long", "io.debezium.time.MicroTime")),
        // a zero date is null: DATETIME and TIMESTAMP are optional even when NOT NULL
        o("c_datetime3", logical("long", "io.debezium.time.Timestamp")),
        o(
            "c_timestamp",
            logical("string", "io.debezium.time.ZonedTimestamp")
        ),
        o("c_year", logical("int", "io.debezium.time.Year")),
        f("c_bit1", json!("boolean")),
        o(
            "c_bit12",
            json!({"type": "bytes", "connect.version": 1,
            "connect.parameters": {"length": "12"}, "connect.name": "io.debezium.data.Bits"})
        ),
        o(
            "c_enum",
            json!({"type": "string", "connect.version": 1,
            "connect.parameters": {"allowed": "small,medium"},
            "connect.name": "io.debezium.data.Enum"})
        ),
        o(
            "c_set",
            json!({"type": "string", "connect.version": 1,
            "connect.parameters": {"allowed": "a,c"},
            "connect.name": "io.debezium.data.EnumSet"})
        ),
        o("c_json", logical("string", "io.debezium.data.Json")),
        o(
            "c_geo",
            json!({"type": "record", "name": "Geometry",
            "namespace": "io.debezium.data.geometry",
            "fields": [{"name": "wkb", "type": "bytes"},
                       {"name": "srid", "type": ["null", "int"], "default": null}],
            "connect.doc": "Geometry", "connect.version": 1,
            "connect.name": "io.debezium.data.geometry.Geometry"})
        ),
        // a named type met again is referenced by its full name
        o("c_geo2", json!("io.debezium.data.geometry.Geometry")),
        o(
            "c_vector",
            json!({"type": "array", "items": "float", "connect.version": 1,
            "connect.name": "io.debezium.data.FloatVector"})
        ),
    ]);
    assert_eq!(value["type"], "record");
    assert_eq!(value["name"], "Envelope");
    assert_eq!(value["namespace"], "cdc.shop.types");
    assert_eq!(value["connect.name"], "cdc.shop.types.Envelope");
    assert_eq!(value["connect.version"], 2);
    let fields = value["fields"].as_array().unwrap();
    assert_eq!(
        fields[0],
        json!({"name": "before", "default": null, "type": ["null", {"type": "record",
            "name": "Value", "namespace": "cdc.shop.types", "fields": want_fields,
            "connect.name": "cdc.shop.types.Value"}]})
    );
    assert_eq!(
        fields[1],
        json!({"name": "after", "type": ["null", "cdc.shop.types.Value"], "default": null})
    );
    let source = &fields[2];
    assert_eq!(source["type"]["name"], "Source");
    assert_eq!(source["type"]["namespace"], "io.debezium.connector.mysql");
    assert_eq!(
        source["type"]["fields"][4],
        json!({"name": "snapshot", "default": "false", "type": [{"type": "string",
            "connect.version": 1, "connect.default": "false",
            "connect.parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},
            "connect.name": "io.debezium.data.Enum"}, "null"]})
    );
    assert_eq!(source["type"]["connect.version"], 1);
    // Debezium's field order: transaction before op and ts_ms
    assert_eq!(fields[4], json!({"name": "op", "type": "string"}));
    assert_eq!(
        fields[5],
        json!({"name": "ts_ms", "type": ["null", "long"], "default": null})
    );
    assert_eq!(
        fields[3],
        json!({"name": "transaction", "default": null, "type": ["null", {"type": "record",
            "name": "block", "namespace": "event", "connect.version": 1,
            "connect.name": "event.block", "fields": [
                {"name": "id", "type": "string"},
                {"name": "total_order", "type": "long"},
                {"name": "data_collection_order", "type": "long"}]}]})
    );
    let key: Json = serde_json::from_str(pending.key.as_ref().unwrap().schema()).unwrap();
    assert_eq!(
        key,
        json!({"type": "record", "name": "Key", "namespace": "cdc.shop.types",
               "fields": [{"name": "id", "type": "int"}], "connect.name": "cdc.shop.types.Key"})
    );
}

#[test]
fn datums_decode_to_debeziums_values() {
    let cols = columns();
    let recs = insert(&cols, &types_of(&cols), 2);
    let pending = recs[0].registry.clone().unwrap();
    let key = decode(pending.key.as_ref().unwrap(), recs[0].key.as_ref().unwrap());
    assert_eq!(key, Avro::Record(vec![("id".into(), Avro::Int(-42))]));
    let value = decode(
        pending.value.as_ref().unwrap(),
        recs[0].value.as_ref().unwrap(),
    );
    assert_eq!(
        field(&value, "before"),
        &Avro::Union(0, Box::new(Avro::Null))
    );
    assert_eq!(field(&value, "op"), &Avro::String("c".into()));
    let after = field(&value, "after");
    let want = [
        ("id", Avro::Int(-42)),
        ("c_tiny", some(Avro::Int(7))),
        ("c_uint", Avro::Long(4_294_967_295)),
        ("c_big", Avro::Union(0, Box::new(Avro::Null))),
        // unscaled -12340, two's complement
        (
            "c_decimal",
            some(Avro::Decimal(apache_avro::Decimal::from(vec![0xcf, 0xcc]))),
        ),
        ("c_double", Avro::Double(-2.5)),
        ("c_varchar", some(Avro::String("héllo".into()))),
        ("c_blob", some(Avro::Bytes(vec![0xde, 0xad]))),
        ("c_date", Avro::Int(19_782)),
        ("c_time", some(Avro::Long(3_600_000_005))),
        ("c_datetime3", some(Avro::Long(1_332_070_245_120))),
        (
            "c_timestamp",
            some(Avro::String("2022-04-20T22:18:00Z".into())),
        ),
        ("c_year", some(Avro::Int(2024))),
        ("c_bit1", Avro::Boolean(true)),
        ("c_bit12", some(Avro::Bytes(vec![0xbc, 0x0a]))),
        ("c_enum", some(Avro::String("medium".into()))),
        ("c_set", some(Avro::String("a,c".into()))),
        ("c_json", some(Avro::String(r#"{"k":1}"#.into()))),
        (
            "c_geo",
            some(Avro::Record(vec![
                ("wkb".into(), Avro::Bytes(vec![1, 1])),
                ("srid".into(), some(Avro::Int(4326))),
            ])),
        ),
        ("c_geo2", Avro::Union(0, Box::new(Avro::Null))),
        (
            "c_vector",
            some(Avro::Array(vec![Avro::Float(0.5), Avro::Float(-2.0)])),
        ),
    ];
    for (name, v) in want {
        assert_eq!(field(after, name), &v, "{name}");
    }
    let source = field(&value, "source");
    assert_eq!(
        field(source, "snapshot"),
        &Avro::Union(0, Box::new(Avro::String("false".into())))
    );
    assert_eq!(field(source, "db"), &Avro::String("shop".into()));
}

#[test]
fn subjects_follow_the_topic_and_schemas_are_built_once_per_table_version() {
    let cols = columns();
    let types = types_of(&cols);
    let b = avro_builder();
    let mut first: Option<PendingSchemas> = None;
    for gno in 0..20 {
        let mut del = change(
            &TableId::new("shop", "types"),
            Op::Delete,
            Some(the_row(&cols)),
            None,
            &[0],
        );
        del.types = Some(Arc::clone(&types));
        let recs = b
            .transaction_records(&tx(10 + gno, vec![del]), &coords(), &ctx())
            .unwrap();
        assert_eq!(recs.len(), 2, "delete and tombstone");
        let p = recs[0].registry.clone().unwrap();
        assert_eq!(p.key.as_ref().unwrap().subject(), "cdc.shop.types-key");
        assert_eq!(p.value.as_ref().unwrap().subject(), "cdc.shop.types-value");
        // the tombstone: an Avro key, no value
        let tomb = recs[1].registry.clone().unwrap();
        assert!(Arc::ptr_eq(
            tomb.key.as_ref().unwrap(),
            p.key.as_ref().unwrap()
        ));
        assert_eq!(tomb.value, None);
        assert_eq!(recs[1].value, None);
        // the size check counts the framing to come
        assert_eq!(
            recs[0].max_wire_size(),
            KafkaRecord {
                registry: None,
                ..recs[0].clone()
            }
            .max_wire_size()
                + 2 * WIRE_HEADER_BYTES
        );
        match &first {
            None => first = Some(p),
            // one registry schema per table version: its id is looked up once
            Some(f) => assert!(Arc::ptr_eq(
                f.value.as_ref().unwrap(),
                p.value.as_ref().unwrap()
            )),
        }
    }
    assert_eq!(b.schemas_built(), 1);
}

#[test]
fn schema_change_and_transaction_events_stay_json() {
    let cols = columns();
    let b = RecordBuilder::new(RecordOptions {
        transaction_topic: Some("cdc.transaction".into()),
        ..avro_builder().options().clone()
    });
    let mut c = change(
        &TableId::new("shop", "types"),
        Op::Insert,
        None,
        Some(the_row(&cols)),
        &[0],
    );
    c.types = Some(types_of(&cols));
    let recs = b
        .transaction_records(&tx(40, vec![c]), &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].topic, "cdc.transaction");
    assert_eq!(recs[0].registry, None);
    assert!(serde_json::from_slice::<Json>(recs[0].value.as_ref().unwrap()).is_ok());
    assert!(recs[1].registry.is_some());
    assert_eq!(recs[2].registry, None);
}
