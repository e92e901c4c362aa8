//! Row decoding against go-mysql's captured TABLE_MAP/ROWS bodies (see
//! `../shared/testdata/external/go-mysql/NOTES.md`) and synthetic images.

use capstan_core::change::Value;

use super::{decode_rows, DecodeOptions};
use crate::mysql::event::Event;
use crate::mysql::event_reader::EventReader;
use crate::mysql::test_support::decode;

const TABLE_MAP: u8 = 19;
const WRITE_V2: u8 = 30;
const UPDATE_V2: u8 = 31;

fn rows_of(table_map_hex: &str, rows: &[(u8, &str)], opts: DecodeOptions) -> Vec<Vec<Value>> {
    let mut reader = EventReader::new();
    let Event::TableMap(schema) = decode(&mut reader, TABLE_MAP, table_map_hex) else {
        panic!("not a table map");
    };
    let mut out = Vec::new();
    for (ty, h) in rows {
        let Event::Rows(ev) = decode(&mut reader, *ty, h) else {
            panic!("not a rows event");
        };
        for row in decode_rows(&schema, &ev, &opts).unwrap() {
            for image in [row.before, row.after].into_iter().flatten() {
                out.push(image.into_full().unwrap());
            }
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::Text { bytes, .. } | Value::Bytes(bytes) => {
            String::from_utf8(bytes.clone()).unwrap()
        }
        other => other.to_sql_text().unwrap_or_else(|| "NULL".into()),
    }
}

#[test]
fn trailing_nulls() {
    let rows = rows_of(
        "d3010000000001000474657374000a66756e6e797461626c650001010001",
        &[
            (WRITE_V2, "d301000000000100020001fffe01fffe02"),
            (WRITE_V2, "d301000000000100020001fffe01fe02ff"),
        ],
        DecodeOptions::default(),
    );
    let got: Vec<Value> = rows.into_iter().map(|mut r| r.remove(0)).collect();
    // Read from the bytes: `fe 01 | ff | fe 02` then `fe 01 | fe 02 | ff` (a set null-bitmap
    // bit is NULL). vectors.json lists the two events' expectations the other way round.
    assert_eq!(
        got,
        vec![
            Value::Int(1),
            Value::Null,
            Value::Int(2),
            Value::Int(1),
            Value::Int(2),
            Value::Null
        ]
    );
}

#[test]
fn json_and_decimal() {
    let rows = rows_of(
        "6d00000000000100047465737400037431300002f5f603040a0003",
        &[
            (WRITE_V2, "6d00000000000100020002fffd8000000001"),
            (WRITE_V2, "6d00000000000100020002fffc29000000000200280012000400160004000c1a000c21006b6579316b6579320676616c7565310676616c7565328000000001"),
        ],
        DecodeOptions::default(),
    );
    assert_eq!(rows[0], vec![Value::Null, Value::Decimal("1".into())]);
    assert_eq!(
        rows[1],
        vec![
            Value::Json(r#"{"key1":"value1","key2":"value2"}"#.into()),
            Value::Decimal("1".into())
        ]
    );
}

#[test]
fn enum_and_set_without_member_metadata() {
    let strict = DecodeOptions::default();
    let mut reader = EventReader::new();
    let Event::TableMap(schema) = decode(
        &mut reader,
        TABLE_MAP,
        "e70e000000000100057474657374000461736574000203fe02f80303",
    ) else {
        panic!()
    };
    let Event::Rows(ev) = decode(
        &mut reader,
        WRITE_V2,
        "e70e000000000100020002fffc01000000050000",
    ) else {
        panic!()
    };
    // no SET_STR_VALUE metadata: halts by default
    assert_eq!(
        decode_rows(&schema, &ev, &strict).unwrap_err().code(),
        "table_map_metadata_missing"
    );
    let lax = DecodeOptions {
        enum_set_index_fallback: true,
        ..DecodeOptions::default()
    };
    let rows = decode_rows(&schema, &ev, &lax).unwrap();
    let after = rows[0].after.clone().unwrap().into_full().unwrap();
    assert_eq!(after, vec![Value::Int(1), Value::UInt(5)]);

    let rows = rows_of(
        "840f00000000010005747465737400076e756d62657273000203fe02f70202",
        &[(
            WRITE_V2,
            "840f000000000100020002fffc010000000100fc020000000101",
        )],
        lax,
    );
    assert_eq!(rows[1], vec![Value::Int(2), Value::UInt(257)]);
}

#[test]
fn virtual_json_update_images() {
    let rows = rows_of(
        "6c00000000000100047465737400037431310004030ff503036400040f",
        &[
            (WRITE_V2, "6c00000000000100020004fff801000000027b7d050000000000000400"),
            (UPDATE_V2, "6c00000000000100020004fffff801000000027b7d050000000000000400f8010000000a7b2261223a313233347d0d0000000001000c000b00010005d20461"),
        ],
        DecodeOptions::default(),
    );
    let t: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(text).collect()).collect();
    assert_eq!(t[0], ["1", "{}", "{}", "NULL"]);
    assert_eq!(t[1], ["1", "{}", "{}", "NULL"]);
    assert_eq!(t[2], ["1", r#"{"a":1234}"#, r#"{"a":1234}"#, "NULL"]);
}

#[test]
fn truncated_image_halts_with_column() {
    let mut reader = EventReader::new();
    let Event::TableMap(schema) = decode(
        &mut reader,
        TABLE_MAP,
        "d3010000000001000474657374000a66756e6e797461626c650001010001",
    ) else {
        panic!()
    };
    // null bitmap says "not null" but the value byte is missing
    let Event::Rows(ev) = decode(&mut reader, WRITE_V2, "d301000000000100020001fffe") else {
        panic!()
    };
    let h = decode_rows(&schema, &ev, &DecodeOptions::default()).unwrap_err();
    assert_eq!(h.code(), "row_decode_failed");
}
