//! Golden tests: the exact envelope of every change kind and the JSON form of every column
//! type. When one of these changes, `docs/event-format.md` changes with it.

use std::sync::Arc;

use capstan_core::change::{Change, Op, Row, TableId, Transaction, TransactionGtid, Value};
use capstan_core::position::{Flavor, MariadbGtid};
use serde_json::{json, Value as Json};

use super::*;
use crate::SinkError;

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

pub(super) fn builder(tombstones: bool, txn_topic: bool) -> RecordBuilder {
    RecordBuilder::new(RecordOptions {
        topics: TopicTemplate::parse("cdc", DEFAULT_TOPIC_TEMPLATE).unwrap(),
        flavor: Flavor::Mysql,
        tombstones_on_delete: tombstones,
        transaction_topic: txn_topic.then(|| "cdc.transaction".to_string()),
        max_record_bytes: 1_000_000,
        encoding: Default::default(),
        snapshot_marker_topic: Some("cdc.snapshot_complete".to_string()),
        message_keys: Default::default(),
        schemas: SchemaFraming::None,
    })
}

pub(super) fn ctx() -> RecordContext<'static> {
    RecordContext {
        pipeline: "orders-pipe",
        epoch: 7,
        now_ms: 1_700_000_000_123,
    }
}

pub(super) fn coords() -> BinlogCoordinates<'static> {
    BinlogCoordinates {
        server_id: 1,
        file: "binlog.000003",
        pos: 4711,
    }
}

pub(super) fn row(cols: &[&str], values: Vec<Value>) -> Row {
    let cols: Arc<[String]> = cols.iter().map(|c| c.to_string()).collect();
    Row::new(cols, values).unwrap()
}

pub(super) fn text(s: &str) -> Value {
    Value::Text {
        bytes: s.as_bytes().to_vec(),
        collation: 255,
    }
}

pub(super) fn change(
    table: &TableId,
    op: Op,
    before: Option<Row>,
    after: Option<Row>,
    key: &[usize],
) -> Change {
    Change {
        table: Arc::new(table.clone()),
        op,
        before,
        after,
        key: key.to_vec().into(),
        types: None,
    }
}

pub(super) fn tx(gno: u64, changes: Vec<Change>) -> Transaction {
    Transaction {
        gtid: TransactionGtid::Mysql(format!("{UUID}:{gno}").parse().unwrap()),
        committed_at_micros: 1_699_999_999_456_789,
        changes,
        partially_filtered: false,
        first_change: 0,
        also_covers: Vec::new(),
        origin: Default::default(),
    }
}

pub(super) fn json_of(bytes: &Option<Vec<u8>>) -> Json {
    bytes
        .as_ref()
        .map_or(Json::Null, |b| serde_json::from_slice(b).unwrap())
}

fn source(table: &str, row: usize, gno: u64) -> Json {
    json!({
        "version": SOURCE_VERSION, "connector": "mysql", "name": "cdc",
        "ts_ms": 1_699_999_999_456u64, "snapshot": "false", "db": "shop", "table": table,
        "server_id": 1, "gtid": format!("{UUID}:{gno}"), "file": "binlog.000003", "pos": 4711,
        "row": row
    })
}

pub(super) fn orders() -> TableId {
    TableId::new("shop", "orders")
}

pub(super) fn order(id: i64, note: &str) -> Row {
    row(&["id", "note"], vec![Value::Int(id), text(note)])
}

#[test]
fn insert_envelope() {
    let t = tx(
        5,
        vec![change(
            &orders(),
            Op::Insert,
            None,
            Some(order(1, "new")),
            &[0],
        )],
    );
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].topic, "cdc.shop.orders");
    assert_eq!(json_of(&recs[0].key), json!({"id": 1}));
    assert_eq!(
        json_of(&recs[0].value),
        json!({
            "before": null,
            "after": {"id": 1, "note": "new"},
            "source": source("orders", 0, 5),
            "op": "c",
            "ts_ms": 1_700_000_000_123u64,
            "transaction": {"id": format!("{UUID}:5"), "total_order": 1, "data_collection_order": 1}
        })
    );
    assert_eq!(recs[0].timestamp_ms, Some(1_699_999_999_456));
    let headers: Vec<(&str, &str)> = recs[0]
        .headers
        .iter()
        .map(|(n, v)| (n.as_ref(), std::str::from_utf8(v).unwrap()))
        .collect();
    let gtid = format!("{UUID}:5");
    assert_eq!(
        headers,
        vec![
            ("capstan.pipeline", "orders-pipe"),
            ("capstan.epoch", "7"),
            ("capstan.position", gtid.as_str()),
            ("capstan.row", "0"),
            ("capstan.record", "0"),
        ]
    );
    // Column order is the table's, on the wire.
    let raw = String::from_utf8(recs[0].value.clone().unwrap()).unwrap();
    assert!(
        raw.starts_with(r#"{"before":null,"after":{"id":1,"note":"new"},"source":{"version""#),
        "{raw}"
    );
}

#[test]
fn update_envelope() {
    let t = tx(
        6,
        vec![change(
            &orders(),
            Op::Update,
            Some(order(1, "a")),
            Some(order(1, "b")),
            &[0],
        )],
    );
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(json_of(&recs[0].key), json!({"id": 1}));
    let v = json_of(&recs[0].value);
    assert_eq!(v["op"], "u");
    assert_eq!(v["before"], json!({"id": 1, "note": "a"}));
    assert_eq!(v["after"], json!({"id": 1, "note": "b"}));
    assert_eq!(v["source"], source("orders", 0, 6));
}

#[test]
fn delete_then_tombstone() {
    let t = tx(
        7,
        vec![change(
            &orders(),
            Op::Delete,
            Some(order(9, "x")),
            None,
            &[0],
        )],
    );
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 2);
    let v = json_of(&recs[0].value);
    assert_eq!(
        v,
        json!({
            "before": {"id": 9, "note": "x"}, "after": null, "source": source("orders", 0, 7),
            "op": "d", "ts_ms": 1_700_000_000_123u64,
            "transaction": {"id": format!("{UUID}:7"), "total_order": 1, "data_collection_order": 1}
        })
    );
    assert_eq!(recs[1].topic, "cdc.shop.orders");
    assert_eq!(json_of(&recs[1].key), json!({"id": 9}));
    assert_eq!(recs[1].value, None);
    assert_eq!(recs[1].header_str(HEADER_ROW), Some("0"));
    assert_eq!(recs[1].header_str(HEADER_RECORD), Some("1"));

    let recs = builder(false, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 1, "no tombstone when disabled");
}

#[test]
fn key_change_is_delete_tombstone_create() {
    let t = tx(
        8,
        vec![change(
            &orders(),
            Op::Update,
            Some(order(1, "a")),
            Some(order(2, "a")),
            &[0],
        )],
    );
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    let shape: Vec<(Json, Json)> = recs
        .iter()
        .map(|r| {
            (
                json_of(&r.key),
                json_of(&r.value).get("op").cloned().unwrap_or(Json::Null),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (json!({"id": 1}), json!("d")),
            (json!({"id": 1}), Json::Null),
            (json!({"id": 2}), json!("c")),
        ]
    );
    let create = json_of(&recs[2].value);
    assert_eq!(create["before"], Json::Null);
    assert_eq!(create["after"], json!({"id": 2, "note": "a"}));
    assert_eq!(create["transaction"]["total_order"], 2);
    // Debezium's key-change headers, after capstan's own: the delete and its tombstone name
    // the new key, the create the old one
    let extra: Vec<Vec<(&str, &str)>> = recs
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .filter(|(n, _)| n.starts_with("__debezium."))
                .map(|(n, v)| (n.as_ref(), std::str::from_utf8(v).unwrap()))
                .collect()
        })
        .collect();
    assert_eq!(
        extra,
        vec![
            vec![("__debezium.newkey", r#"{"id":2}"#)],
            vec![("__debezium.newkey", r#"{"id":2}"#)],
            vec![("__debezium.oldkey", r#"{"id":1}"#)],
        ]
    );
    assert_eq!(recs[2].headers.last().unwrap().0, HEADER_DEBEZIUM_OLDKEY);
    assert_eq!(recs[2].header_str(HEADER_RECORD), Some("2"));
}

#[test]
fn keyless_table_has_null_key_and_no_tombstone() {
    let log = TableId::new("shop", "log");
    let r = row(&["msg"], vec![text("hi")]);
    let t = tx(9, vec![change(&log, Op::Delete, Some(r), None, &[])]);
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].key, None);
    assert_eq!(json_of(&recs[0].value)["before"], json!({"msg": "hi"}));
}

#[test]
fn composite_key_in_key_order() {
    let items = TableId::new("shop", "items");
    let r = row(
        &["qty", "order_id", "line"],
        vec![Value::Int(3), Value::Int(10), Value::Int(2)],
    );
    let t = tx(10, vec![change(&items, Op::Insert, None, Some(r), &[1, 2])]);
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(
        String::from_utf8(recs[0].key.clone().unwrap()).unwrap(),
        r#"{"order_id":10,"line":2}"#
    );
}

#[test]
fn transaction_metadata_begin_and_end() {
    let items = TableId::new("shop", "items");
    let t = tx(
        11,
        vec![
            change(&orders(), Op::Insert, None, Some(order(1, "a")), &[0]),
            change(
                &items,
                Op::Insert,
                None,
                Some(row(&["id"], vec![Value::Int(5)])),
                &[0],
            ),
            change(&orders(), Op::Delete, Some(order(2, "b")), None, &[0]),
        ],
    );
    let recs = builder(true, true)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    let topics: Vec<&str> = recs.iter().map(|r| r.topic.as_str()).collect();
    assert_eq!(
        topics,
        vec![
            "cdc.transaction",
            "cdc.shop.orders",
            "cdc.shop.items",
            "cdc.shop.orders",
            "cdc.shop.orders",
            "cdc.transaction"
        ]
    );
    let id = format!("{UUID}:11");
    assert_eq!(json_of(&recs[0].key), json!({"id": id}));
    assert_eq!(
        json_of(&recs[0].value),
        json!({"status": "BEGIN", "id": id, "event_count": null, "data_collections": null,
               "ts_ms": 1_699_999_999_456u64})
    );
    assert_eq!(
        json_of(&recs[5].value),
        json!({"status": "END", "id": id, "event_count": 3, "data_collections": [
            {"data_collection": "shop.orders", "event_count": 2},
            {"data_collection": "shop.items", "event_count": 1}
        ], "ts_ms": 1_699_999_999_456u64})
    );
    let delete = json_of(&recs[3].value);
    assert_eq!(
        delete["transaction"],
        json!({"id": id, "total_order": 3, "data_collection_order": 2})
    );
    assert_eq!(recs[0].header(HEADER_ROW), None);
    let record_ids: Vec<&str> = recs
        .iter()
        .map(|r| r.header_str(HEADER_RECORD).unwrap())
        .collect();
    assert_eq!(record_ids, vec!["0", "1", "2", "3", "4", "5"]);
}

#[test]
fn a_transaction_built_in_parts_gives_the_records_of_the_whole() {
    let items = TableId::new("shop", "items");
    let changes = vec![
        change(&orders(), Op::Insert, None, Some(order(1, "a")), &[0]),
        change(
            &items,
            Op::Insert,
            None,
            Some(row(&["id"], vec![Value::Int(5)])),
            &[0],
        ),
        // a key change: two events and a tombstone
        change(
            &orders(),
            Op::Update,
            Some(order(2, "b")),
            Some(order(3, "b")),
            &[0],
        ),
        change(&orders(), Op::Delete, Some(order(1, "a")), None, &[0]),
    ];
    for txn_topic in [false, true] {
        let b = builder(true, txn_topic);
        let whole = b
            .transaction_records(&tx(11, changes.clone()), &coords(), &ctx())
            .unwrap();
        // cut as the assembler may: [0..1] [1..3] [3..4], and with an empty last part
        for cuts in [vec![0, 1, 3, 4], vec![0, 2, 4, 4]] {
            let mut progress = TransactionProgress::default();
            let mut parts = Vec::new();
            for w in cuts.windows(2) {
                let mut part = tx(11, changes[w[0]..w[1]].to_vec());
                part.first_change = w[0] as u64;
                let last = w[1] == changes.len() && w == cuts.windows(2).last().unwrap();
                parts.extend(
                    b.transaction_part_records(&part, &mut progress, last, &coords(), &ctx())
                        .unwrap(),
                );
            }
            assert!(
                parts == whole,
                "parts {cuts:?} (transaction topic {txn_topic})"
            );
        }
    }
}

#[test]
fn empty_transaction_has_no_records() {
    let recs = builder(true, true)
        .transaction_records(&tx(12, vec![]), &coords(), &ctx())
        .unwrap();
    assert!(recs.is_empty());
}

#[test]
fn mariadb_source() {
    let mut b = builder(true, false);
    b = RecordBuilder::new(RecordOptions {
        flavor: Flavor::Mariadb,
        ..b.options().clone()
    });
    let mut t = tx(
        1,
        vec![change(
            &orders(),
            Op::Insert,
            None,
            Some(order(1, "a")),
            &[0],
        )],
    );
    t.gtid = TransactionGtid::Mariadb(MariadbGtid::new(0, 1, 42));
    let recs = b.transaction_records(&t, &coords(), &ctx()).unwrap();
    let v = json_of(&recs[0].value);
    assert_eq!(v["source"]["connector"], "mariadb");
    assert_eq!(v["source"]["gtid"], "0-1-42");
    assert_eq!(recs[0].header_str(HEADER_POSITION), Some("0-1-42"));
}

#[test]
fn snapshot_chunk_reads() {
    let rows = vec![order(1, "a"), order(2, "b")];
    let table = orders();
    let chunk = SnapshotChunk {
        table: &table,
        key: &[0],
        rows: &rows,
        types: None,
        chunk_id: "shop.orders/3",
        coordinates: coords(),
        first_of_table: false,
        first_of_snapshot: false,
        last_of_table: true,
        last_of_snapshot: true,
        incremental: false,
    };
    let recs = builder(true, true)
        .snapshot_records(&chunk, &ctx())
        .unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(
        json_of(&recs[0].value),
        json!({
            "before": null, "after": {"id": 1, "note": "a"},
            "source": {"version": SOURCE_VERSION, "connector": "mysql", "name": "cdc",
                       "ts_ms": 1_700_000_000_123u64, "snapshot": "true", "db": "shop",
                       "table": "orders", "server_id": 1, "gtid": null,
                       "file": "binlog.000003", "pos": 4711, "row": 0},
            "op": "r", "ts_ms": 1_700_000_000_123u64, "transaction": null
        })
    );
    assert_eq!(json_of(&recs[1].value)["source"]["snapshot"], "last");
    assert_eq!(
        recs[1].header_str(HEADER_POSITION),
        Some("snapshot:shop.orders/3")
    );
    assert_eq!(recs[1].header_str(HEADER_ROW), Some("1"));
    // the last chunk of a table that is not the last table
    let chunk = SnapshotChunk {
        last_of_snapshot: false,
        ..chunk
    };
    let recs = builder(true, true)
        .snapshot_records(&chunk, &ctx())
        .unwrap();
    assert_eq!(json_of(&recs[0].value)["source"]["snapshot"], "true");
    assert_eq!(
        json_of(&recs[1].value)["source"]["snapshot"],
        "last_in_data_collection"
    );
    // an ad-hoc snapshot's rows say so, each of them, as Debezium's incremental snapshots do
    let chunk = SnapshotChunk {
        incremental: true,
        last_of_snapshot: true,
        ..chunk
    };
    let recs = builder(true, true)
        .snapshot_records(&chunk, &ctx())
        .unwrap();
    let kinds: Vec<Json> = recs
        .iter()
        .map(|r| json_of(&r.value)["source"]["snapshot"].clone())
        .collect();
    assert_eq!(kinds, [json!("incremental"), json!("incremental")]);
    assert_eq!(json_of(&recs[1].value)["op"], "r");
}

/// `source.snapshot` by Debezium's names over the chunks of two tables: the snapshot's first
/// row, a table's first row, a middle row, a table's last row, the snapshot's last row; a
/// one-row table's row is "last" before "first". Every read says `row: 0`, as Debezium's.
#[test]
fn snapshot_flags_follow_debeziums_names() {
    let rows = [order(1, "a"), order(2, "b"), order(3, "c")];
    let table = orders();
    let kinds = |first_of_snapshot, first_of_table, last_of_table, last_of_snapshot, n: usize| {
        let chunk = SnapshotChunk {
            table: &table,
            key: &[0],
            rows: &rows[..n],
            types: None,
            chunk_id: "shop.orders/0",
            coordinates: coords(),
            first_of_table,
            first_of_snapshot,
            last_of_table,
            last_of_snapshot,
            incremental: false,
        };
        let recs = builder(true, true)
            .snapshot_records(&chunk, &ctx())
            .unwrap();
        for r in &recs {
            assert_eq!(json_of(&r.value)["source"]["row"], 0);
        }
        recs.iter()
            .map(|r| json_of(&r.value)["source"]["snapshot"].clone())
            .collect::<Vec<Json>>()
    };
    // the first table, read in one chunk, then not the last one
    assert_eq!(
        kinds(true, true, true, false, 3),
        [
            json!("first"),
            json!("true"),
            json!("last_in_data_collection")
        ]
    );
    // a later table's first chunk, then its last, which ends the snapshot
    assert_eq!(
        kinds(false, true, false, false, 2),
        [json!("first_in_data_collection"), json!("true")]
    );
    assert_eq!(
        kinds(false, false, true, true, 2),
        [json!("true"), json!("last")]
    );
    // the only table, of one row; a table of one row before the last
    assert_eq!(kinds(true, true, true, true, 1), [json!("last")]);
    assert_eq!(
        kinds(false, true, true, false, 1),
        [json!("last_in_data_collection")]
    );
    // the first chunk of a whole snapshot of one table (Debezium: first, true, …, last)
    assert_eq!(
        kinds(true, true, true, true, 3),
        [json!("first"), json!("true"), json!("last")]
    );
}

#[test]
fn snapshot_complete_marker() {
    let marker = builder(true, true)
        .snapshot_complete_record(&orders(), 0, &ctx())
        .unwrap();
    // the control topic: table topics hold change events only
    assert_eq!(marker.topic, "cdc.snapshot_complete");
    assert_eq!(
        json_of(&marker.key),
        json!({"snapshot_complete": "shop.orders"})
    );
    assert_eq!(
        json_of(&marker.value),
        json!({"snapshot_complete": {"db": "shop", "table": "orders", "rows": 0}})
    );
    assert_eq!(
        marker.header_str(HEADER_POSITION),
        Some("snapshot:shop.orders:complete")
    );
    // opted in: the same record on the table's own topic
    let on_table = RecordBuilder::new(RecordOptions {
        snapshot_marker_topic: None,
        ..builder(true, true).options().clone()
    })
    .snapshot_complete_record(&orders(), 0, &ctx())
    .unwrap();
    assert_eq!(on_table.topic, "cdc.shop.orders");
    assert_eq!(
        (&on_table.key, &on_table.value),
        (&marker.key, &marker.value)
    );
}

#[test]
fn malformed_changes_are_refused() {
    let t = tx(
        16,
        vec![change(
            &orders(),
            Op::Update,
            None,
            Some(order(1, "a")),
            &[0],
        )],
    );
    let err = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap_err();
    assert_eq!(err.code(), "malformed_change");
    let t = tx(
        17,
        vec![change(
            &orders(),
            Op::Insert,
            None,
            Some(order(1, "a")),
            &[5],
        )],
    );
    assert!(builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .is_err());
}

#[test]
fn a_record_over_message_max_bytes_is_refused_naming_table_topic_and_sizes() {
    let big = "x".repeat(5 << 20);
    let t = tx(
        6,
        vec![change(
            &orders(),
            Op::Insert,
            None,
            Some(order(1, &big)),
            &[0],
        )],
    );
    let e = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap_err();
    let SinkError::RecordTooLarge {
        table,
        topic,
        bytes,
        limit,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(
        (table.as_str(), topic.as_str()),
        ("shop.orders", "cdc.shop.orders")
    );
    assert_eq!(*limit, 1_000_000);
    assert!(*bytes > 5 << 20 && *bytes < (5 << 20) + 2048, "{bytes}");
    // value-free: the row's text is nowhere in the error
    assert!(!format!("{e} {e:?}").contains("xxxx"));
    // a record at the limit passes: the same row, a higher limit
    let roomy = RecordBuilder::new(RecordOptions {
        max_record_bytes: *bytes,
        encoding: Default::default(),
        ..builder(true, false).options().clone()
    });
    assert_eq!(
        roomy.transaction_records(&t, &coords(), &ctx()).unwrap()[0].max_wire_size(),
        *bytes
    );
}
