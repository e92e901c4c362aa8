//! `format: avro` against the dev services' real Schema Registry (Apicurio, Confluent API;
//! `CAPSTAN_TEST_REGISTRY_URL` from `deploy/dev/services.sh env`): schemas are registered under
//! `<topic>-key` / `<topic>-value`, each record is framed with the ids the registry gave
//! (magic byte 0, 4-byte big-endian id), and the registry's copy of the schema decodes the
//! datum; an incompatible schema halts naming its subject; a registry that is down is
//! transient.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value as Avro;
use capstan_core::change::{Change, Op, Row, TableId, Transaction, TransactionGtid, Value};
use capstan_core::position::Flavor;
use capstan_kafka::config::{EventFormat, SchemaRegistryConfig, SinkConfig};
use capstan_kafka::record::{KafkaRecord, RecordBuilder};
use capstan_kafka::registry::SchemaRegistrar;
use capstan_kafka::{Consequence, SinkError};
use schema_registry_converter::async_impl::schema_registry::{
    get_all_versions, get_schema_by_id, SrSettings,
};

/// The registry's Confluent API; `None` after saying so, or a failure under CI.
fn registry_url() -> Option<String> {
    match std::env::var("CAPSTAN_TEST_REGISTRY_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "CAPSTAN_TEST_REGISTRY_URL is not set (CI=true: a missing registry is a failure)"
            )
        }
        _ => {
            eprintln!(
                "skipping: CAPSTAN_TEST_REGISTRY_URL is not set; run `deploy/dev/services.sh up`"
            );
            None
        }
    }
}

/// A topic prefix no earlier run used (the registry keeps its subjects).
fn unique_prefix(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}{nanos}")
}

fn avro_sink(prefix: &str, url: &str) -> (RecordBuilder, SchemaRegistrar) {
    let mut c = SinkConfig::new("unused:9092", prefix);
    c.format = EventFormat::Avro;
    c.schema_registry = Some(SchemaRegistryConfig {
        url: url.to_string(),
        username: None,
        password: None,
    });
    let checked = c.validate(Flavor::Mysql).unwrap();
    let registrar = SchemaRegistrar::new(checked.schema_registry.as_ref().unwrap()).unwrap();
    (RecordBuilder::new(checked.record_options), registrar)
}

/// A transaction inserting one row `(id, note)` into `shop.orders`.
fn insert(gno: u64, id: i64, note: Value) -> Transaction {
    let cols: Arc<[String]> = vec!["id".to_string(), "note".to_string()].into();
    Transaction {
        gtid: TransactionGtid::Mysql(format!("{}:{gno}", common::UUID).parse().unwrap()),
        committed_at_micros: 1_700_000_000_000_000,
        first_change: 0,
        partially_filtered: false,
        also_covers: Vec::new(),
        origin: Default::default(),
        changes: vec![Change {
            table: Arc::new(TableId::new("shop", "orders")),
            op: Op::Insert,
            before: None,
            after: Some(Row::new(cols, vec![Value::Int(id), note]).unwrap()),
            key: vec![0].into(),
            types: None,
        }],
    }
}

fn records(b: &RecordBuilder, gno: u64, id: i64, note: Value) -> Vec<KafkaRecord> {
    common::records_of(b, &insert(gno, id, note), 1)
}

fn text(s: &str) -> Value {
    Value::Text {
        bytes: s.as_bytes().to_vec(),
        collation: 255,
    }
}

/// The id a framed payload names, and its datum.
fn unframe(bytes: &[u8]) -> (u32, &[u8]) {
    assert_eq!(bytes[0], 0, "the magic byte");
    (
        u32::from_be_bytes(bytes[1..5].try_into().unwrap()),
        &bytes[5..],
    )
}

#[tokio::test]
async fn schemas_are_registered_once_and_records_carry_their_ids() {
    let Some(url) = registry_url() else { return };
    let prefix = unique_prefix("avroit");
    let (b, registrar) = avro_sink(&prefix, &url);
    let mut first = records(&b, 1, 7, text("hello"));
    let subject_schema = first[0].registry.clone().unwrap();
    registrar.frame(&mut first).await.unwrap();
    assert_eq!(first[0].registry, None, "framed");
    let (key_id, key_datum) = unframe(first[0].key.as_ref().unwrap());
    let (value_id, value_datum) = unframe(first[0].value.as_ref().unwrap());
    assert_ne!(key_id, value_id);

    // the registry's copy of each schema decodes the datum framed with its id
    let sr = SrSettings::new(url.clone());
    let registered = get_schema_by_id(value_id, &sr).await.unwrap();
    let ours: serde_json::Value =
        serde_json::from_str(subject_schema.value.as_ref().unwrap().schema()).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(&registered.schema).unwrap();
    // the registry may shorten names relative to their namespace: the same Avro schema, with
    // the Connect metadata kept
    let schema = apache_avro::Schema::parse_str(&registered.schema).unwrap();
    assert_eq!(schema, apache_avro::Schema::parse(&ours).unwrap());
    assert_eq!(theirs["connect.name"], ours["connect.name"]);
    assert_eq!(theirs["connect.version"], 2);
    assert_eq!(
        theirs["fields"][2]["type"]["fields"][4], ours["fields"][2]["type"]["fields"][4],
        "source.snapshot with its connect.default and connect.parameters"
    );
    let reader = GenericDatumReader::builder(&schema).build().unwrap();
    let mut datum = value_datum;
    let value = reader.read_value(&mut datum).unwrap();
    let Avro::Record(fields) = value else {
        panic!("not a record")
    };
    let after = &fields.iter().find(|(n, _)| n == "after").unwrap().1;
    assert_eq!(
        after,
        &Avro::Union(
            1,
            Box::new(Avro::Record(vec![
                ("id".into(), Avro::Union(1, Box::new(Avro::Long(7)))),
                (
                    "note".into(),
                    Avro::Union(1, Box::new(Avro::String("hello".into())))
                ),
            ]))
        )
    );
    let key_schema = get_schema_by_id(key_id, &sr).await.unwrap();
    let key_schema = apache_avro::Schema::parse_str(&key_schema.schema).unwrap();
    let mut datum = key_datum;
    let key = GenericDatumReader::builder(&key_schema)
        .build()
        .unwrap()
        .read_value(&mut datum)
        .unwrap();
    assert_eq!(
        key,
        Avro::Record(vec![("id".into(), Avro::Union(1, Box::new(Avro::Long(7))))])
    );

    // more records of the same table version: the same ids, one version per subject
    let mut more = records(&b, 2, 8, text("again"));
    registrar.frame(&mut more).await.unwrap();
    assert_eq!(unframe(more[0].value.as_ref().unwrap()).0, value_id);
    assert_eq!(unframe(more[0].key.as_ref().unwrap()).0, key_id);
    // a second registrar (a new owner) is told the existing ids
    let (b2, registrar2) = avro_sink(&prefix, &url);
    let mut again = records(&b2, 3, 9, text("new owner"));
    registrar2.frame(&mut again).await.unwrap();
    assert_eq!(unframe(again[0].value.as_ref().unwrap()).0, value_id);
    let topic = format!("{prefix}.shop.orders");
    for subject in [format!("{topic}-key"), format!("{topic}-value")] {
        assert_eq!(
            get_all_versions(&sr, subject.clone()).await.unwrap().len(),
            1,
            "{subject}"
        );
    }
}

#[tokio::test]
async fn an_incompatible_schema_halts_naming_its_subject() {
    let Some(url) = registry_url() else { return };
    let prefix = unique_prefix("avroinc");
    let subject = format!("{prefix}.shop.orders-value");
    let (b, registrar) = avro_sink(&prefix, &url);
    let mut v1 = records(&b, 1, 1, text("a string"));
    registrar.frame(&mut v1).await.unwrap();
    let res = reqwest::Client::new()
        .put(format!("{url}/config/{subject}"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .body(r#"{"compatibility":"BACKWARD"}"#)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    // `note` becomes a number: old records cannot be read with the new schema
    let mut v2 = records(&b, 2, 2, Value::Int(5));
    let e = registrar.frame(&mut v2).await.unwrap_err();
    assert_eq!(e, SinkError::SchemaIncompatible { subject });
    assert_eq!(e.consequence(), Consequence::Halt);
    assert!(v2[0].registry.is_some(), "nothing was framed");
}

#[tokio::test]
async fn a_registry_that_is_down_is_a_transient_fault() {
    // no registry listens on port 9 of the loopback: connection refused
    let (b, registrar) = avro_sink("down", "http://127.0.0.1:9");
    let mut recs = records(&b, 1, 1, text("x"));
    let e = registrar.frame(&mut recs).await.unwrap_err();
    assert_eq!(e.code(), "schema_registry_unavailable");
    assert_eq!(e.consequence(), Consequence::Retry);
}
