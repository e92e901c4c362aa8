//! Record-encoding throughput per `kafka.format` (ignored by default; run with
//! `cargo test -p capstan-kafka --release --test encode_throughput -- --ignored --nocapture`).
//! The same 200 transactions of 100 inserts into a typed table of 12 columns (ints, a decimal,
//! text, a date, a datetime, a timestamp, an enum, a blob, a nullable column) are built into
//! records in each format with the real `RecordBuilder`, the declared column types given as the
//! binlog's table map gives them; `avro` includes the wire format's framing with schema ids
//! already known (the registry is asked once per table version, not timed here). Prints
//! records/s per format and each schema'd format's cost against `capstan_json`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_core::change::{
    Change, ColumnType, ColumnTypes, Date, DateTime, Op, Row, SqlType, TableId, Transaction,
    TransactionGtid, Value,
};
use capstan_core::position::Flavor;
use capstan_kafka::config::{EventFormat, SchemaRegistryConfig, SinkConfig};
use capstan_kafka::record::RecordBuilder;
use capstan_kafka::registry::SchemaRegistrar;

const TRANSACTIONS: u64 = 200;
const ROWS: usize = 100;
const ROUNDS: usize = 5;

fn types() -> ColumnTypes {
    let t = |sql, nullable| ColumnType { sql, nullable };
    let int = |bytes| SqlType::Int {
        bytes,
        unsigned: false,
    };
    let members: Arc<[String]> = vec!["new".to_string(), "paid".to_string()].into();
    vec![
        t(int(8), false),
        t(int(4), false),
        t(int(2), true),
        t(
            SqlType::Decimal {
                precision: 12,
                scale: 2,
            },
            false,
        ),
        t(SqlType::Text, false),
        t(SqlType::Text, true),
        t(SqlType::Date, false),
        t(SqlType::DateTime { fsp: 6 }, false),
        t(SqlType::Timestamp { fsp: 0 }, false),
        t(SqlType::Enum { members }, false),
        t(SqlType::Bytes, true),
        t(SqlType::Double, true),
    ]
    .into()
}

fn transactions() -> Vec<Transaction> {
    let cols: Arc<[String]> = [
        "id", "customer", "qty", "amount", "sku", "note", "day", "created", "updated", "status",
        "blob", "weight",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let types = types();
    let table = Arc::new(TableId::new("shop", "orders"));
    (1..=TRANSACTIONS)
        .map(|gno| {
            let changes = (0..ROWS)
                .map(|i| {
                    let id = (gno as i64) * 1000 + i as i64;
                    let text = |s: String| Value::Text {
                        bytes: s.into_bytes(),
                        collation: 255,
                    };
                    let values = vec![
                        Value::Int(id),
                        Value::Int(id % 977),
                        Value::Int(i as i64 % 7),
                        Value::Decimal(format!("{}.{:02}", id % 10_000, i % 100)),
                        text(format!("SKU-{id:08}")),
                        text("a note of about forty bytes, give or take".into()),
                        Value::Date(Date {
                            year: 2026,
                            month: 12,
                            day: 5,
                        }),
                        Value::DateTime(DateTime {
                            date: Date {
                                year: 2026,
                                month: 12,
                                day: 5,
                            },
                            hour: 3,
                            minute: 4,
                            second: 5,
                            micros: 123_456,
                            fsp: 6,
                        }),
                        Value::Timestamp {
                            seconds: 1_764_903_845,
                            micros: 0,
                            fsp: 0,
                        },
                        Value::Enum("paid".into()),
                        Value::Bytes(vec![0xab; 16]),
                        Value::Null,
                    ];
                    Change {
                        table: table.clone(),
                        op: Op::Insert,
                        before: None,
                        after: Some(Row::new(cols.clone(), values).unwrap()),
                        key: vec![0].into(),
                        types: Some(types.clone()),
                    }
                })
                .collect();
            Transaction {
                gtid: TransactionGtid::Mysql(format!("{}:{gno}", common::UUID).parse().unwrap()),
                committed_at_micros: 1_700_000_000_000_000,
                changes,
                partially_filtered: false,
                first_change: 0,
                also_covers: Vec::new(),
            }
        })
        .collect()
}

fn builder(format: EventFormat) -> (RecordBuilder, Option<SchemaRegistrar>) {
    let mut c = SinkConfig::new("unused:9092", "bench");
    c.format = format;
    if format == EventFormat::Avro {
        c.schema_registry = Some(SchemaRegistryConfig {
            url: "http://127.0.0.1:9".into(),
            username: None,
            password: None,
        });
    }
    let checked = c.validate(Flavor::Mysql).unwrap();
    let registrar = checked
        .schema_registry
        .as_ref()
        .map(|r| SchemaRegistrar::new(r).unwrap());
    (RecordBuilder::new(checked.record_options), registrar)
}

/// Builds (and for avro frames) every transaction's records once; returns the time taken and
/// the value bytes written.
async fn run(format: EventFormat, txs: &[Transaction]) -> (Duration, usize) {
    let (b, registrar) = builder(format);
    let start = Instant::now();
    let mut bytes = 0;
    for tx in txs {
        let mut records = common::records_of(&b, tx, 1);
        if let Some(registrar) = &registrar {
            for r in &records {
                // ids as the registry would have answered for the table version, once
                let p = r.registry.as_ref().unwrap();
                for (i, s) in p.key.iter().chain(p.value.iter()).enumerate() {
                    s.set_id(100 + i as u32);
                }
            }
            registrar.frame(&mut records).await.unwrap();
        }
        bytes += records
            .iter()
            .map(|r| r.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
    }
    (start.elapsed(), bytes)
}

#[tokio::test]
#[ignore = "a benchmark: run with --release -- --ignored --nocapture"]
async fn records_per_second_by_format() {
    let txs = transactions();
    let n = (TRANSACTIONS as usize * ROWS) as f64;
    let formats = [
        ("capstan_json", EventFormat::CapstanJson),
        ("debezium_json", EventFormat::DebeziumJson),
        ("debezium_json_schema", EventFormat::DebeziumJsonSchema),
        ("avro", EventFormat::Avro),
    ];
    // warm-up, then the median of ROUNDS rounds, formats interleaved
    for (_, f) in formats {
        run(f, &txs).await;
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); formats.len()];
    let mut sizes = vec![0; formats.len()];
    for _ in 0..ROUNDS {
        for (i, (_, f)) in formats.iter().enumerate() {
            let (elapsed, bytes) = run(*f, &txs).await;
            times[i].push(elapsed.as_secs_f64());
            sizes[i] = bytes;
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = n / median(&mut times[0].clone());
    for (i, (name, _)) in formats.iter().enumerate() {
        let rate = n / median(&mut times[i]);
        println!(
            "{name}: {rate:.0} records/s ({} value bytes avg), {:+.1}% vs capstan_json",
            sizes[i] / n as usize,
            (rate / base - 1.0) * 100.0
        );
    }
}
