//! Record-encoding throughput per `kafka.format` (ignored by default; run with
//! `cargo test -p capstan-kafka --release --test encode_throughput -- --ignored --nocapture`).
//!
//! The same 1,000,000 row changes in every format: the source benchmark's table and load
//! (`connectors/examples/source_bench.rs`, docs/performance.md): one 10-column table (`BIGINT`
//! key, `INT`, `DECIMAL(12,2)`, `DOUBLE`, `VARCHAR(64)`, `TEXT`, `DATETIME(6)`, `DATE`, `ENUM`,
//! `JSON`), 1,000 transactions of 1,000 changes each (600 inserts, 250 updates of those rows,
//! 150 deletes of others), with the declared column types as the binlog's table map gives
//! them. The changes are generated before the clock starts; the time is the real
//! `RecordBuilder` building every record (1,150,000: a delete is followed by its tombstone) and,
//! for `avro`, Confluent's framing of every key and value by `SchemaRegistrar::frame`, with the
//! registry ids already known to the table version's schemas (the registry is asked once per
//! table version; that one request is not timed). Prints records/s per format and each
//! format's cost against `capstan_json`. `CAPSTAN_BENCH_ROUNDS` (3) rounds, formats
//! interleaved, median reported.
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

const TRANSACTIONS: u64 = 1_000;
const CHANGES: u64 = 1_000;

fn types() -> ColumnTypes {
    let t = |sql, nullable| ColumnType { sql, nullable };
    let int = |bytes| SqlType::Int {
        bytes,
        unsigned: false,
    };
    let members: Arc<[String]> = ["new", "paid", "void"].map(String::from).into();
    vec![
        t(int(8), false),
        t(int(4), false),
        t(
            SqlType::Decimal {
                precision: 12,
                scale: 2,
            },
            false,
        ),
        t(SqlType::Double, true),
        t(SqlType::Text, false),
        t(SqlType::Text, true),
        t(SqlType::DateTime { fsp: 6 }, false),
        t(SqlType::Date, true),
        t(SqlType::Enum { members }, false),
        t(SqlType::Json, true),
    ]
    .into()
}

/// splitmix64, as the source benchmark fills its rows.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn date_of(days: i64) -> Date {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
    Date { year, month, day }
}

fn datetime_of(secs: u64, micros: u32) -> DateTime {
    let rem = secs % 86_400;
    DateTime {
        date: date_of((secs / 86_400) as i64),
        hour: (rem / 3600) as u8,
        minute: (rem / 60 % 60) as u8,
        second: (rem % 60) as u8,
        micros,
        fsp: 6,
    }
}

fn text(s: String) -> Value {
    Value::Text {
        bytes: s.into_bytes(),
        collation: 255,
    }
}

/// One row as the source benchmark inserts it.
fn row_values(rng: &mut Rng, id: u64) -> Vec<Value> {
    let r = rng.next();
    let account = (r % 2_000_000) as i64 - 1_000_000;
    let cents = rng.next() % 100_000_000;
    let ratio = (rng.next() % 1_000_000) as f64 / 7919.0;
    let note_len = 20 + (r >> 40) as usize % 100;
    let note: String = (0..note_len)
        .map(|i| char::from(b'a' + ((r >> (i % 48)) % 26) as u8))
        .collect();
    let secs = 1_600_000_000 + rng.next() % 100_000_000;
    let micros = (rng.next() % 1_000_000) as u32;
    let status = ["new", "paid", "void"][(r % 3) as usize];
    let ok = if r & 1 == 0 { "true" } else { "false" };
    vec![
        Value::Int(id as i64),
        Value::Int(account),
        Value::Decimal(format!("{}.{:02}", cents / 100, cents % 100)),
        Value::Double(ratio),
        text(format!("customer-{:08x}", r & 0xffff_ffff)),
        text(note),
        Value::DateTime(datetime_of(secs, micros)),
        Value::Date(date_of((secs / 86_400) as i64)),
        Value::Enum(status.into()),
        Value::Json(format!(
            "{{\"k\": {}, \"ok\": {ok}, \"tags\": [\"a\", \"b\"]}}",
            r % 1000
        )),
    ]
}

/// The source benchmark's `UPDATE`: `amount + 1.25`, `status = 'paid'`, `note` with a `!`
/// appended, `created` one second later.
fn updated(before: &[Value]) -> Vec<Value> {
    let mut after = before.to_vec();
    if let Value::Decimal(d) = &before[2] {
        let (units, cents) = d.split_once('.').unwrap();
        let c = units.parse::<u64>().unwrap() * 100 + cents.parse::<u64>().unwrap() + 125;
        after[2] = Value::Decimal(format!("{}.{:02}", c / 100, c % 100));
    }
    after[8] = Value::Enum("paid".into());
    if let Value::Text { bytes, .. } = &mut after[5] {
        bytes.push(b'!');
    }
    if let Value::DateTime(dt) = &mut after[6] {
        if dt.second < 59 {
            dt.second += 1;
        }
    }
    after
}

fn transactions() -> Vec<Transaction> {
    let cols: Arc<[String]> = [
        "id", "account", "amount", "ratio", "name", "note", "created", "day", "status", "attrs",
    ]
    .map(String::from)
    .into();
    let types = types();
    let table = Arc::new(TableId::new("bench", "t"));
    let mut rng = Rng(0x00C0_FFEE);
    let mut next_id = 1u64;
    let row = |values: Vec<Value>| Some(Row::new(cols.clone(), values).unwrap());
    let change = |op, before, after| Change {
        table: table.clone(),
        op,
        before,
        after,
        key: vec![0].into(),
        types: Some(types.clone()),
    };
    (1..=TRANSACTIONS)
        .map(|gno| {
            let (upd, del) = (CHANGES / 4, CHANGES * 3 / 20);
            let ins = CHANGES - upd - del;
            let inserted: Vec<Vec<Value>> = (next_id..next_id + ins)
                .map(|id| row_values(&mut rng, id))
                .collect();
            next_id += ins;
            let mut changes: Vec<Change> = inserted
                .iter()
                .map(|v| change(Op::Insert, None, row(v.clone())))
                .collect();
            changes.extend(
                inserted[..upd as usize]
                    .iter()
                    .map(|v| change(Op::Update, row(v.clone()), row(updated(v)))),
            );
            changes.extend(
                inserted[(ins - del) as usize..]
                    .iter()
                    .map(|v| change(Op::Delete, row(v.clone()), None)),
            );
            Transaction {
                gtid: TransactionGtid::Mysql(format!("{}:{gno}", common::UUID).parse().unwrap()),
                committed_at_micros: 1_700_000_000_000_000,
                changes,
                partially_filtered: false,
                first_change: 0,
                also_covers: Vec::new(),
                origin: Default::default(),
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

/// What one pass over the transactions took and produced.
struct Pass {
    elapsed: Duration,
    records: usize,
    key_bytes: usize,
    value_bytes: usize,
}

/// Builds (and for avro frames) every transaction's records once.
async fn run(format: EventFormat, txs: &[Transaction]) -> Pass {
    let (b, registrar) = builder(format);
    let mut pass = Pass {
        elapsed: Duration::ZERO,
        records: 0,
        key_bytes: 0,
        value_bytes: 0,
    };
    let start = Instant::now();
    for tx in txs {
        let mut records = common::records_of(&b, tx, 1);
        if let Some(registrar) = &registrar {
            for r in &records {
                // the ids the registry answered for the table version, once
                let p = r.registry.as_ref().unwrap();
                for (i, s) in p.key.iter().chain(p.value.iter()).enumerate() {
                    if s.id().is_none() {
                        s.set_id(100 + i as u32);
                    }
                }
            }
            registrar.frame(&mut records).await.unwrap();
        }
        pass.records += records.len();
        for r in &records {
            pass.key_bytes += r.key.as_ref().map_or(0, Vec::len);
            pass.value_bytes += r.value.as_ref().map_or(0, Vec::len);
        }
    }
    pass.elapsed = start.elapsed();
    pass
}

#[tokio::test]
#[ignore = "a benchmark: run with --release -- --ignored --nocapture"]
async fn records_per_second_by_format() {
    let rounds: usize = std::env::var("CAPSTAN_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let generated = Instant::now();
    let txs = transactions();
    let changes: usize = txs.iter().map(|t| t.changes.len()).sum();
    assert_eq!(changes as u64, TRANSACTIONS * CHANGES);
    println!(
        "{changes} changes in {} transactions generated in {:.1} s",
        txs.len(),
        generated.elapsed().as_secs_f64()
    );
    let formats = [
        ("capstan_json", EventFormat::CapstanJson),
        ("debezium_json", EventFormat::DebeziumJson),
        ("debezium_json_schema", EventFormat::DebeziumJsonSchema),
        ("avro", EventFormat::Avro),
    ];
    // warm-up on a tenth, then `rounds` rounds, formats interleaved
    for (_, f) in formats {
        run(f, &txs[..txs.len() / 10]).await;
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); formats.len()];
    let mut passes = Vec::new();
    for round in 0..rounds {
        for (i, (name, f)) in formats.iter().enumerate() {
            let pass = run(*f, &txs).await;
            println!("round {round}: {name} {:.3} s", pass.elapsed.as_secs_f64());
            times[i].push(pass.elapsed.as_secs_f64());
            if round == 0 {
                passes.push(pass);
            }
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = changes as f64 / median(&times[0]);
    println!("| format | records/s | changes/s | vs capstan_json | key bytes/record | value bytes/record | min–max s |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | --- |");
    for (i, (name, _)) in formats.iter().enumerate() {
        let t = median(&times[i]);
        let p = &passes[i];
        let (lo, hi) = times[i]
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        println!(
            "| {name} | {:.0} | {:.0} | {:+.1}% | {:.1} | {:.1} | {lo:.2}–{hi:.2} |",
            p.records as f64 / t,
            changes as f64 / t,
            (changes as f64 / t / base - 1.0) * 100.0,
            p.key_bytes as f64 / p.records as f64,
            p.value_bytes as f64 / p.records as f64,
        );
    }
}
