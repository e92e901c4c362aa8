//! `bench_record_builder`: what building one change record costs, alone — the records of
//! 1,000-row insert transactions of the pipeline benchmark's 10-column table
//! (`tests/tests/pipeline_bench.rs`), in capstan's JSON and Debezium's. Prints ns per record;
//! a benchmark, not a test (docs/performance.md):
//!
//! `cargo test --release -p capstan-kafka --lib bench_record_builder -- --ignored --nocapture`

use std::time::Instant;

use capstan_core::change::{Date, DateTime, Op, TableId, Value};

use super::golden_tests::{builder, change, coords, ctx, row, text, tx};
use super::{RecordBuilder, TypeMapping, ValueEncoding};

const ROWS: u64 = 1_000;
const ROUNDS: u64 = 50;
const RUNS: u64 = 8;

fn wide_row(k: u64) -> Vec<Value> {
    let lorem = "lorem ipsum dolor sit amet ".repeat(1 + (k % 4) as usize);
    vec![
        Value::Int(k as i64),
        Value::Int((k % 100_000) as i64),
        Value::Decimal(format!("{}.{:02}", k % 10_000, k % 100)),
        Value::Double((k % 977) as f64 + 0.5),
        text(&format!("name-{k}")),
        text(&lorem),
        Value::DateTime(DateTime {
            date: Date {
                year: 2026,
                month: 11,
                day: 29,
            },
            hour: 12,
            minute: (k % 60) as u8,
            second: ((k / 60) % 60) as u8,
            micros: (k % 1_000_000) as u32,
            fsp: 6,
        }),
        Value::Date(Date {
            year: 2026,
            month: 1 + (k % 12) as u8,
            day: 1 + (k % 28) as u8,
        }),
        Value::Enum(["red", "green", "blue"][(k % 3) as usize].to_string()),
        Value::Json(format!(
            "{{\"k\":{k},\"tags\":[\"a\",\"b\"],\"n\":{{\"x\":{}}}}}",
            k % 7
        )),
    ]
}

fn run(name: &str, b: &RecordBuilder) {
    let table = TableId::new("bench", "t");
    let cols = ["id", "i", "d", "f", "s", "t", "ts", "dt", "e", "j"];
    let transaction = tx(
        1,
        (0..ROWS)
            .map(|k| {
                let after = row(&cols, wide_row(k));
                change(&table, Op::Insert, None, Some(after), &[0])
            })
            .collect(),
    );
    // the best of several runs: the machine is shared
    let mut best = f64::MAX;
    let mut bytes = 0usize;
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut records = 0u64;
        for _ in 0..ROUNDS {
            let out = b
                .transaction_records(&transaction, &coords(), &ctx())
                .expect("records");
            records += out.len() as u64;
            bytes = out.iter().map(|r| r.approximate_size()).sum::<usize>() / out.len();
        }
        best = best.min(started.elapsed().as_nanos() as f64 / records as f64);
    }
    println!("{name}: {best:.0} ns/record (best of {RUNS} runs of {ROUNDS} transactions of {ROWS} rows), {bytes} bytes/record");
}

#[test]
#[ignore = "a benchmark: prints figures"]
fn bench_record_builder() {
    run("capstan_json", &builder(false, false));
    let mut options = builder(false, false).options().clone();
    options.encoding = ValueEncoding::Debezium(TypeMapping::default());
    run("debezium_json", &RecordBuilder::new(options));
}
