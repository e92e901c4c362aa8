//! Shared fixtures for the integration tests (included with `mod common;`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use capstan_core::change::{Change, Op, Row, TableId, Transaction, TransactionGtid, Value};
use capstan_core::position::Flavor;
use capstan_kafka::config::SinkConfig;
use capstan_kafka::record::{BinlogCoordinates, KafkaRecord, RecordBuilder, RecordContext};

/// The dev services' real Apache Kafka broker (`CAPSTAN_KAFKA_BOOTSTRAP`, printed by
/// `deploy/dev/services.sh env`); `None` after saying so, or a failure under CI.
pub fn real_kafka() -> Option<String> {
    match std::env::var("CAPSTAN_KAFKA_BOOTSTRAP") {
        Ok(b) if !b.is_empty() => Some(b),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CAPSTAN_KAFKA_BOOTSTRAP is not set (CI=true: a missing broker is a failure)")
        }
        _ => {
            eprintln!(
                "skipping: CAPSTAN_KAFKA_BOOTSTRAP is not set; run `deploy/dev/services.sh up`"
            );
            None
        }
    }
}

pub const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

pub fn builder(prefix: &str) -> RecordBuilder {
    let checked = SinkConfig::new("unused:9092", prefix)
        .validate(Flavor::Mysql)
        .unwrap();
    RecordBuilder::new(checked.record_options)
}

/// A transaction `UUID:gno` inserting `rows` rows into `shop.orders` (ids from `first_id`),
/// each with a ~500-byte note.
pub fn insert_tx(gno: u64, first_id: i64, rows: usize) -> Transaction {
    let cols: Arc<[String]> = vec!["id".to_string(), "note".to_string()].into();
    let table = Arc::new(TableId::new("shop", "orders"));
    let changes = (0..rows)
        .map(|i| Change {
            table: table.clone(),
            op: Op::Insert,
            before: None,
            after: Some(
                Row::new(
                    cols.clone(),
                    vec![
                        Value::Int(first_id + i as i64),
                        Value::Text {
                            bytes: vec![b'x'; 70],
                            collation: 255,
                        },
                    ],
                )
                .unwrap(),
            ),
            key: vec![0].into(),
            types: None,
        })
        .collect();
    Transaction {
        gtid: TransactionGtid::Mysql(format!("{UUID}:{gno}").parse().unwrap()),
        committed_at_micros: 1_700_000_000_000_000 + gno * 1000,
        changes,
        partially_filtered: false,
        first_change: 0,
        also_covers: Vec::new(),
        origin: Default::default(),
    }
}

pub fn records_of(builder: &RecordBuilder, tx: &Transaction, epoch: u64) -> Vec<KafkaRecord> {
    builder
        .transaction_records(
            tx,
            &BinlogCoordinates {
                server_id: 1,
                file: "binlog.000001",
                pos: 4,
            },
            &RecordContext {
                pipeline: "orders",
                epoch,
                now_ms: 1_700_000_000_000,
            },
        )
        .unwrap()
}
