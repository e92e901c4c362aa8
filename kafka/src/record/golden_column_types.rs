//! Golden tests of the JSON form of every column type, and of value-free decoding errors.
//! When one of these changes, `docs/event-format.md` changes with it.

use capstan_core::change::{Date, DateTime, Op, TableId, Time, Value};
use serde_json::{json, Value as Json};

use super::golden_tests::{builder, change, coords, ctx, json_of, orders, row, text, tx};
use crate::SinkError;

/// Every `Value` variant, one column each, with its JSON form.
#[test]
fn every_column_type() {
    let cases: Vec<(&str, Value, Json)> = vec![
        ("c_null", Value::Null, Json::Null),
        ("c_int", Value::Int(-42), json!(-42)),
        (
            "c_bigint_unsigned",
            Value::UInt(u64::MAX),
            json!(18_446_744_073_709_551_615u64),
        ),
        (
            "c_decimal",
            Value::Decimal("-12.340".into()),
            json!("-12.340"),
        ),
        ("c_float", Value::Float(1.1), json!(1.1)),
        ("c_double", Value::Double(-2.5e-10), json!(-2.5e-10)),
        ("c_varchar", text("héllo"), json!("héllo")),
        (
            "c_latin1",
            Value::Text {
                bytes: b"caf\xe9".to_vec(),
                collation: 8,
            },
            json!("café"),
        ),
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
        (
            "c_date",
            Value::Date(Date {
                year: 2024,
                month: 2,
                day: 29,
            }),
            json!("2024-02-29"),
        ),
        (
            "c_zero_date",
            Value::Date(Date {
                year: 0,
                month: 0,
                day: 0,
            }),
            json!("0000-00-00"),
        ),
        (
            "c_time",
            Value::Time(Time {
                negative: true,
                hours: 838,
                minutes: 59,
                seconds: 59,
                micros: 500_000,
                fsp: 1,
            }),
            json!("-838:59:59.5"),
        ),
        (
            "c_datetime",
            Value::DateTime(DateTime {
                date: Date {
                    year: 2012,
                    month: 3,
                    day: 18,
                },
                hour: 11,
                minute: 30,
                second: 45,
                micros: 123_456,
                fsp: 6,
            }),
            json!("2012-03-18T11:30:45.123456"),
        ),
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
            "c_zero_timestamp",
            Value::Timestamp {
                seconds: 0,
                micros: 0,
                fsp: 0,
            },
            json!("0000-00-00T00:00:00Z"),
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
        (
            "c_bit12",
            Value::Bit {
                bytes: vec![0x0a, 0xbc],
                bits: 12,
            },
            json!(2748),
        ),
        ("c_enum", Value::Enum("medium".into()), json!("medium")),
        ("c_set", Value::Set("a,c".into()), json!("a,c")),
        (
            "c_json",
            Value::Json(r#"{"k": [1, 2]}"#.into()),
            json!(r#"{"k": [1, 2]}"#),
        ),
        (
            "c_point",
            Value::Geometry {
                srid: 4326,
                wkb: vec![1, 1, 0, 0, 0],
            },
            json!({"srid": 4326, "wkb": "AQEAAAA="}),
        ),
        (
            "c_vector",
            Value::Vector(vec![0.1, -2.0, 3.5]),
            json!([0.1, -2.0, 3.5]),
        ),
    ];
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let values: Vec<Value> = cases.iter().map(|c| c.1.clone()).collect();
    let expected: serde_json::Map<String, Json> = cases
        .iter()
        .map(|c| (c.0.to_string(), c.2.clone()))
        .collect();
    let t = tx(
        13,
        vec![change(
            &TableId::new("shop", "types"),
            Op::Insert,
            None,
            Some(row(&names, values)),
            &[1],
        )],
    );
    let recs = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap();
    assert_eq!(json_of(&recs[0].value)["after"], Json::Object(expected));
    assert_eq!(json_of(&recs[0].key), json!({"c_int": -42}));
    let raw = String::from_utf8(recs[0].value.clone().unwrap()).unwrap();
    assert!(
        raw.contains(r#""c_bigint_unsigned":18446744073709551615"#),
        "unsigned stays exact"
    );
}

#[test]
fn undecodable_text_is_a_value_free_error() {
    let bad = Value::Text {
        bytes: b"secret\xff".to_vec(),
        collation: 255,
    };
    let t = tx(
        14,
        vec![change(
            &orders(),
            Op::Insert,
            None,
            Some(row(&["id", "note"], vec![Value::Int(1), bad])),
            &[0],
        )],
    );
    let err = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap_err();
    assert_eq!(err.code(), "invalid_text");
    let msg = format!("{err} {err:?}");
    assert!(
        msg.contains("note") && msg.contains("utf8mb4") && !msg.contains("secret"),
        "{msg}"
    );

    let unknown = Value::Text {
        bytes: b"secret".to_vec(),
        collation: 0,
    };
    let t = tx(
        15,
        vec![change(
            &orders(),
            Op::Insert,
            None,
            Some(row(&["id", "note"], vec![Value::Int(1), unknown])),
            &[0],
        )],
    );
    let err = builder(true, false)
        .transaction_records(&t, &coords(), &ctx())
        .unwrap_err();
    assert_eq!(
        err,
        SinkError::UnsupportedCharset {
            table: "shop.orders".into(),
            column: "note".into(),
            charset: "unknown".into(),
        }
    );
}
