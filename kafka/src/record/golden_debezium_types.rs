//! Golden tests of `format: debezium_json`: every column type in Debezium's default encodings,
//! each type-mapping mode, and keys in the same encodings. When one of these changes,
//! `docs/event-format.md` changes with it.

use capstan_core::change::{Date, DateTime, Op, TableId, Time, Value};
use serde_json::{json, Value as Json};

use super::golden_tests::{builder, change, coords, ctx, json_of, row, text, tx};
use super::*;

fn debezium_builder(mapping: TypeMapping) -> RecordBuilder {
    RecordBuilder::new(RecordOptions {
        encoding: ValueEncoding::Debezium(mapping),
        ..builder(true, false).options().clone()
    })
}

/// The `after` image and key of an insert of `cases` (first column the key) under `mapping`.
fn encode(mapping: TypeMapping, cases: &[(&str, Value, Json)]) -> (Json, Json) {
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let values: Vec<Value> = cases.iter().map(|c| c.1.clone()).collect();
    let t = tx(
        21,
        vec![change(
            &TableId::new("shop", "types"),
            Op::Insert,
            None,
            Some(row(&names, values)),
            &[0],
        )],
    );
    let recs = debezium_builder(mapping)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    (
        json_of(&recs[0].value)["after"].clone(),
        json_of(&recs[0].key),
    )
}

fn expected(cases: &[(&str, Value, Json)]) -> Json {
    Json::Object(
        cases
            .iter()
            .map(|c| (c.0.to_string(), c.2.clone()))
            .collect(),
    )
}

fn date(year: u16, month: u8, day: u8) -> Date {
    Date { year, month, day }
}

fn datetime(date: Date, micros: u32, fsp: u8) -> Value {
    Value::DateTime(DateTime {
        date,
        hour: 11,
        minute: 30,
        second: 45,
        micros,
        fsp,
    })
}

fn time(negative: bool, hours: u32, micros: u32, fsp: u8) -> Value {
    Value::Time(Time {
        negative,
        hours,
        minutes: 59,
        seconds: 59,
        micros,
        fsp,
    })
}

/// Every `Value` variant in Debezium's default modes (`precise`, `adaptive_time_microseconds`,
/// `bytes`, `long`).
#[test]
fn every_column_type_in_debeziums_defaults() {
    let cases: Vec<(&str, Value, Json)> = vec![
        ("c_int", Value::Int(-42), json!(-42)),
        ("c_null", Value::Null, Json::Null),
        (
            "c_int_unsigned",
            Value::UInt(4_294_967_295),
            json!(4_294_967_295u64),
        ),
        // Debezium's `long` mode: a Java long, wrapped above 2^63 - 1
        ("c_bigint_unsigned", Value::UInt(u64::MAX), json!(-1)),
        // Connect Decimal: unscaled -12340 as two's-complement bytes 0xcfcc
        ("c_decimal", Value::Decimal("-12.340".into()), json!("z8w=")),
        ("c_float", Value::Float(1.1), json!(1.1)),
        ("c_double", Value::Double(-2.5e-10), json!(-2.5e-10)),
        ("c_varchar", text("héllo"), json!("héllo")),
        (
            "c_binary_text",
            Value::Text {
                bytes: vec![0, 255],
                collation: 63,
            },
            json!("AP8="),
        ),
        (
            "c_blob",
            Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef]),
            json!("3q2+7w=="),
        ),
        // io.debezium.time.Date: days since the epoch
        ("c_date", Value::Date(date(2024, 2, 29)), json!(19_782)),
        ("c_zero_date", Value::Date(date(0, 0, 0)), Json::Null),
        ("c_zero_month", Value::Date(date(2024, 0, 10)), Json::Null),
        // io.debezium.time.MicroTime
        (
            "c_time",
            time(true, 838, 500_000, 1),
            json!(-3_020_399_500_000i64),
        ),
        // DATETIME(6): io.debezium.time.MicroTimestamp
        (
            "c_datetime6",
            datetime(date(2012, 3, 18), 123_456, 6),
            json!(1_332_070_245_123_456i64),
        ),
        // DATETIME(3): io.debezium.time.Timestamp (milliseconds)
        (
            "c_datetime3",
            datetime(date(2012, 3, 18), 120_000, 3),
            json!(1_332_070_245_120i64),
        ),
        (
            "c_datetime0",
            datetime(date(1969, 12, 31), 0, 0),
            json!(-44_955_000),
        ),
        ("c_zero_datetime", datetime(date(0, 0, 0), 0, 0), Json::Null),
        // io.debezium.time.ZonedTimestamp: UTC, the column's fraction digits
        (
            "c_timestamp",
            Value::Timestamp {
                seconds: 1_650_493_084,
                micros: 120_000,
                fsp: 3,
            },
            json!("2022-04-20T22:18:04.120Z"),
        ),
        (
            "c_timestamp0",
            Value::Timestamp {
                seconds: 1_650_493_080,
                micros: 0,
                fsp: 0,
            },
            json!("2022-04-20T22:18:00Z"),
        ),
        (
            "c_zero_timestamp",
            Value::Timestamp {
                seconds: 0,
                micros: 0,
                fsp: 0,
            },
            Json::Null,
        ),
        ("c_year", Value::Year(2024), json!(2024)),
        (
            "c_bit1",
            Value::Bit {
                bytes: vec![1],
                bits: 1,
            },
            json!(true),
        ),
        // io.debezium.data.Bits: 0x0abc little-endian
        (
            "c_bit12",
            Value::Bit {
                bytes: vec![0x0a, 0xbc],
                bits: 12,
            },
            json!("vAo="),
        ),
        ("c_enum", Value::Enum("medium".into()), json!("medium")),
        ("c_set", Value::Set("a,c".into()), json!("a,c")),
        (
            "c_json",
            Value::Json(r#"{"k": [1, 2]}"#.into()),
            json!(r#"{"k": [1, 2]}"#),
        ),
        (
            "c_geometry",
            Value::Geometry {
                srid: 4326,
                wkb: vec![1, 1, 0, 0, 0],
            },
            json!({"wkb": "AQEAAAA=", "srid": 4326}),
        ),
        (
            "c_vector",
            Value::Vector(vec![0.1, -2.0, 3.5]),
            json!([0.1, -2.0, 3.5]),
        ),
    ];
    let (after, key) = encode(TypeMapping::default(), &cases);
    assert_eq!(after, expected(&cases));
    assert_eq!(key, json!({"c_int": -42}));
}

#[test]
fn decimal_handling_modes() {
    let value = || Value::Decimal("-12.340".into());
    for (mode, want) in [
        (DecimalHandling::Precise, json!("z8w=")),
        (DecimalHandling::String, json!("-12.340")),
        (DecimalHandling::Double, json!(-12.34)),
    ] {
        let mapping = TypeMapping {
            decimal_handling_mode: mode,
            ..TypeMapping::default()
        };
        let cases = [("id", Value::Int(1), json!(1)), ("amount", value(), want)];
        assert_eq!(encode(mapping, &cases).0, expected(&cases), "{mode:?}");
    }
}

#[test]
fn time_precision_modes() {
    let d = date(2024, 1, 31);
    let rows = |dt6: Json, dt3: Json, dt0: Json, t6: Json, dd: Json| {
        vec![
            ("id", Value::Int(1), json!(1)),
            ("c_date", Value::Date(d), dd),
            ("c_time", time(false, 10, 250_000, 6), t6),
            ("c_datetime6", datetime(d, 123_456, 6), dt6),
            ("c_datetime3", datetime(d, 120_000, 3), dt3),
            ("c_datetime0", datetime(d, 0, 0), dt0),
            (
                "c_timestamp",
                Value::Timestamp {
                    seconds: 1_650_493_084,
                    micros: 120_000,
                    fsp: 3,
                },
                json!("2022-04-20T22:18:04.120Z"),
            ),
            ("c_zero_date", Value::Date(date(0, 0, 0)), Json::Null),
        ]
    };
    // 2024-01-31T11:30:45 is 1_706_700_645 s; 10:59:59.25 is 39_599_250_000 µs
    let cases = [
        (
            TimePrecision::AdaptiveTimeMicroseconds,
            rows(
                json!(1_706_700_645_123_456i64),
                json!(1_706_700_645_120i64),
                json!(1_706_700_645_000i64),
                json!(39_599_250_000i64),
                json!(19_753),
            ),
        ),
        (
            TimePrecision::Microseconds,
            rows(
                json!(1_706_700_645_123_456i64),
                json!(1_706_700_645_120_000i64),
                json!(1_706_700_645_000_000i64),
                json!(39_599_250_000i64),
                json!(19_753),
            ),
        ),
        (
            TimePrecision::Connect,
            rows(
                json!(1_706_700_645_123i64),
                json!(1_706_700_645_120i64),
                json!(1_706_700_645_000i64),
                json!(39_599_250),
                json!(19_753),
            ),
        ),
        (
            TimePrecision::Isostring,
            rows(
                json!("2024-01-31T11:30:45.123456Z"),
                json!("2024-01-31T11:30:45.12Z"),
                json!("2024-01-31T11:30:45Z"),
                json!("10:59:59.25Z"),
                json!("2024-01-31Z"),
            ),
        ),
    ];
    for (mode, cases) in cases {
        let mapping = TypeMapping {
            time_precision_mode: mode,
            ..TypeMapping::default()
        };
        assert_eq!(encode(mapping, &cases).0, expected(&cases), "{mode:?}");
    }
}

/// A TIME outside a day (negative, or 24 hours and more): under `connect` null, as Debezium
/// writes it (Connect's `Time` is a time of day in int32 milliseconds; -838:59:59 does not fit);
/// the other modes keep it.
#[test]
fn time_outside_a_day_is_null_only_under_connect() {
    let t = |negative, hours, minutes, seconds, micros| Time {
        negative,
        hours,
        minutes,
        seconds,
        micros,
        fsp: 6,
    };
    let cases = |connect: bool| {
        let (a, b, c, d) = if connect {
            (Json::Null, Json::Null, Json::Null, json!(86_399_999))
        } else {
            (
                json!(-3_020_399_000_000i64),
                json!(86_400_000_000i64),
                json!(-500_000),
                json!(86_399_999_999i64),
            )
        };
        [
            ("id", Value::Int(1), json!(1)),
            ("t_min", Value::Time(t(true, 838, 59, 59, 0)), a),
            ("t_day", Value::Time(t(false, 24, 0, 0, 0)), b),
            ("t_neg", Value::Time(t(true, 0, 0, 0, 500_000)), c),
            ("t_last", Value::Time(t(false, 23, 59, 59, 999_999)), d),
        ]
    };
    for (mode, connect) in [
        (TimePrecision::AdaptiveTimeMicroseconds, false),
        (TimePrecision::Connect, true),
    ] {
        let mapping = TypeMapping {
            time_precision_mode: mode,
            ..TypeMapping::default()
        };
        let cases = cases(connect);
        assert_eq!(encode(mapping, &cases).0, expected(&cases), "{mode:?}");
    }
}

#[test]
fn binary_handling_modes_leave_bits_alone() {
    for (mode, want) in [
        (BinaryHandling::Bytes, json!("+/8A")),
        (BinaryHandling::Base64, json!("+/8A")),
        (BinaryHandling::Base64UrlSafe, json!("-_8A")),
        (BinaryHandling::Hex, json!("fbff00")),
    ] {
        let mapping = TypeMapping {
            binary_handling_mode: mode,
            ..TypeMapping::default()
        };
        let cases = [
            ("id", Value::Int(1), json!(1)),
            ("c_blob", Value::Bytes(vec![0xfb, 0xff, 0x00]), want.clone()),
            (
                "c_binary",
                Value::Text {
                    bytes: vec![0xfb, 0xff, 0x00],
                    collation: 63,
                },
                want,
            ),
            (
                "c_bit16",
                Value::Bit {
                    bytes: vec![0x00, 0xff],
                    bits: 16,
                },
                json!("/wA="),
            ),
        ];
        assert_eq!(encode(mapping, &cases).0, expected(&cases), "{mode:?}");
    }
}

/// Keys use the same encodings as the images, in snapshot records too.
#[test]
fn keys_and_snapshot_rows_use_the_format() {
    let table = TableId::new("shop", "days");
    let rows = vec![row(
        &["day", "amount"],
        vec![
            Value::Date(date(2024, 1, 31)),
            Value::Decimal("1.28".into()),
        ],
    )];
    let chunk = SnapshotChunk {
        table: &table,
        key: &[0],
        rows: &rows,
        types: None,
        chunk_id: "c1",
        coordinates: coords(),
        first_of_table: false,
        first_of_snapshot: false,
        last_of_table: false,
        last_of_snapshot: false,
        incremental: false,
    };
    let recs = debezium_builder(TypeMapping::default())
        .snapshot_records(&chunk, &ctx())
        .unwrap();
    assert_eq!(json_of(&recs[0].key), json!({"day": 19_753}));
    assert_eq!(
        json_of(&recs[0].value)["after"],
        json!({"day": 19_753, "amount": "AIA="})
    );
    assert_eq!(json_of(&recs[0].value)["op"], "r");
}
