//! Binary-protocol values of a chunk row → the [`Value`]s the binlog decoder produces for the
//! same row. Pure.
//!
//! The session reads character data untranscoded (`character_set_results = NULL`) and
//! TIMESTAMPs in UTC (`time_zone = '+00:00'`), so: integers by the column's signedness,
//! DECIMAL as the server's exact text (scale digits included), FLOAT/DOUBLE as is, character
//! columns as their stored bytes with the column's collation id, `BINARY(n)` with its trailing
//! `0x00` padding stripped (the binlog carries it stripped), temporals with the column's
//! fractional precision (TIMESTAMP as seconds since the epoch, zero dates kept), BIT as its
//! big-endian bytes and width, ENUM/SET as member text, JSON as the server's JSON text,
//! spatial values split into SRID and WKB, VECTOR as little-endian f32s.

use capstan_core::change::{Date, DateTime, Time, Value};
use mysql_common::constants::{ColumnFlags, ColumnType};
use mysql_common::packets::Column;
use mysql_common::Value as Wire;

use super::key::strip_trailing_zeros;
use super::table::ColKind;

/// Converts one value; `Err(reason)` (value-free) when the wire value does not fit the column.
pub(crate) fn convert(kind: ColKind, wire: Wire) -> Result<Value, &'static str> {
    if let Wire::NULL = wire {
        return Ok(Value::Null);
    }
    Ok(match (kind, wire) {
        (ColKind::Int { unsigned: false }, Wire::Int(v)) => Value::Int(v),
        (ColKind::Int { unsigned: false }, Wire::UInt(v)) => {
            Value::Int(i64::try_from(v).map_err(|_| "signed integer out of range")?)
        }
        (ColKind::Int { unsigned: true }, Wire::UInt(v)) => Value::UInt(v),
        (ColKind::Int { unsigned: true }, Wire::Int(v)) => {
            Value::UInt(u64::try_from(v).map_err(|_| "unsigned integer out of range")?)
        }
        (ColKind::Year, Wire::Int(v)) => {
            Value::Year(u16::try_from(v).map_err(|_| "year out of range")?)
        }
        (ColKind::Year, Wire::UInt(v)) => {
            Value::Year(u16::try_from(v).map_err(|_| "year out of range")?)
        }
        (ColKind::Decimal, Wire::Bytes(b)) => {
            Value::Decimal(String::from_utf8(b).map_err(|_| "decimal not ascii")?)
        }
        (ColKind::Float, Wire::Float(v)) => Value::Float(v),
        (ColKind::Double, Wire::Double(v)) => Value::Double(v),
        (ColKind::Text { collation }, Wire::Bytes(bytes)) => Value::Text { bytes, collation },
        (ColKind::Bytes, Wire::Bytes(b)) => Value::Bytes(b),
        (ColKind::FixedBinary, Wire::Bytes(b)) => Value::Bytes(strip_trailing_zeros(&b).to_vec()),
        (ColKind::Bit { bits }, Wire::Bytes(b)) => {
            let want = usize::from(bits.div_ceil(8));
            if b.len() > want {
                return Err("bit value wider than the column");
            }
            let mut bytes = vec![0u8; want - b.len()];
            bytes.extend_from_slice(&b);
            Value::Bit { bytes, bits }
        }
        (ColKind::Enum, Wire::Bytes(b)) => Value::Enum(member_text(b)),
        (ColKind::Set, Wire::Bytes(b)) => Value::Set(member_text(b)),
        (ColKind::Json, Wire::Bytes(b)) => Value::Json(json_as_binlog(&b)?),
        (ColKind::Geometry, Wire::Bytes(b)) => {
            if b.len() < 4 {
                return Err("geometry shorter than its srid");
            }
            let (srid, wkb) = b.split_at(4);
            Value::Geometry {
                srid: u32::from_le_bytes([srid[0], srid[1], srid[2], srid[3]]),
                wkb: wkb.to_vec(),
            }
        }
        (ColKind::Vector, Wire::Bytes(b)) => {
            if b.len() % 4 != 0 {
                return Err("vector length not a multiple of 4");
            }
            Value::Vector(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )
        }
        (ColKind::Date, Wire::Date(year, month, day, 0, 0, 0, 0)) => {
            Value::Date(Date { year, month, day })
        }
        (ColKind::DateTime { fsp }, Wire::Date(year, month, day, hour, minute, second, micros)) => {
            Value::DateTime(DateTime {
                date: Date { year, month, day },
                hour,
                minute,
                second,
                micros,
                fsp,
            })
        }
        (ColKind::Timestamp { fsp }, Wire::Date(y, mo, d, h, mi, s, micros)) => {
            let seconds = if (y, mo, d) == (0, 0, 0) {
                0
            } else {
                let days = days_from_civil(i64::from(y), i64::from(mo), i64::from(d));
                let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
                u32::try_from(secs).map_err(|_| "timestamp out of range")?
            };
            Value::Timestamp {
                seconds,
                micros,
                fsp,
            }
        }
        (ColKind::Time { fsp }, Wire::Time(negative, days, hours, minutes, seconds, micros)) => {
            Value::Time(Time {
                negative,
                hours: days * 24 + u32::from(hours),
                minutes,
                seconds,
                micros,
                fsp,
            })
        }
        _ => return Err("wire value does not fit the column type"),
    })
}

/// The server's JSON text in the binlog decoder's form: compact, object members sorted by
/// key bytes, serde_json's string escaping and number text (the decoder renders binary JSON
/// that way; the server's own text has spaces and its own float format).
///
/// Common documents (strings without escapes, integers, no duplicate keys) take a direct
/// re-spacing pass ([`json_fast`]) whose output equals the serde_json round trip; anything
/// else goes through serde_json.
fn json_as_binlog(text: &[u8]) -> Result<String, &'static str> {
    if let Some(out) = json_fast(text) {
        return Ok(out);
    }
    json_via_serde(text)
}

fn json_via_serde(text: &[u8]) -> Result<String, &'static str> {
    let value: serde_json::Value = serde_json::from_slice(text).map_err(|_| "json unreadable")?;
    let mut out = String::with_capacity(text.len());
    write_sorted(&value, &mut out)?;
    Ok(out)
}

fn write_sorted(v: &serde_json::Value, out: &mut String) -> Result<(), &'static str> {
    match v {
        serde_json::Value::Object(map) => {
            let mut members: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).map_err(|_| "json key")?);
                out.push(':');
                write_sorted(v, out)?;
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(v, out)?;
            }
            out.push(']');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).map_err(|_| "json scalar")?),
    }
    Ok(())
}

/// ENUM/SET member text the way the binlog decoder reads member names: UTF-8, else one char
/// per byte.
fn member_text(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.as_bytes().iter().map(|&b| char::from(b)).collect(),
    }
}

/// Deepest nesting [`json_fast`] handles itself (serde_json refuses beyond 128).
const JSON_FAST_DEPTH: usize = 64;

/// [`json_via_serde`]'s output without building a `serde_json::Value`, or `None` when the
/// document holds anything whose rendering this pass does not reproduce exactly: a string or
/// key with an escape or a control character, a number other than a plain integer of at most
/// 18 digits (serde_json reads wider ones, fractions and exponents as f64 and prints them its
/// own way), a duplicate key (serde_json keeps the last), nesting beyond
/// [`JSON_FAST_DEPTH`], invalid UTF-8 or malformed text (serde_json names the error).
fn json_fast(text: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut p = JsonPass {
        text,
        at: 0,
        out: &mut out,
        members: Vec::new(),
    };
    p.value(0)?;
    p.skip_ws();
    if p.at != text.len() {
        return None;
    }
    // whole tokens of the input and ASCII punctuation were written: the output is UTF-8
    // exactly when every string of the input is (serde_json's condition; outside strings
    // only ASCII parses)
    String::from_utf8(out).ok()
}

struct JsonPass<'a, 'o> {
    text: &'a [u8],
    at: usize,
    out: &'o mut Vec<u8>,
    /// Scratch for sorting an object's members: (key, start, end) of each member's output.
    members: Vec<(&'a [u8], usize, usize)>,
}

impl<'a> JsonPass<'a, '_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        self.skip_ws();
        match *self.text.get(self.at)? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => {
                let s = self.string()?;
                self.out.push(b'"');
                self.out.extend_from_slice(s);
                self.out.push(b'"');
                Some(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.integer(),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.text.get(self.at..self.at + word.len())? != word {
            return None;
        }
        self.at += word.len();
        self.out.extend_from_slice(word);
        Some(())
    }

    /// `-?(0|[1-9][0-9]{0,17})`, not `-0`, not followed by a fraction or exponent.
    fn integer(&mut self) -> Option<()> {
        let start = self.at;
        let negative = self.text.get(self.at) == Some(&b'-');
        if negative {
            self.at += 1;
        }
        let digits = self.at;
        while let Some(b'0'..=b'9') = self.text.get(self.at) {
            self.at += 1;
        }
        let n = self.at - digits;
        if n == 0 || n > 18 {
            return None;
        }
        if self.text[digits] == b'0' && (n > 1 || negative) {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.text.get(self.at) {
            return None;
        }
        self.out.extend_from_slice(&self.text[start..self.at]);
        Some(())
    }

    /// The content of a string without escapes or control characters (`at` on its quote).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.at += 1;
        let start = self.at;
        loop {
            match *self.text.get(self.at)? {
                b'"' => break,
                b'\\' => return None,
                c if c < 0x20 => return None,
                _ => self.at += 1,
            }
        }
        let s = &self.text[start..self.at];
        self.at += 1;
        Some(s)
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > JSON_FAST_DEPTH {
            return None;
        }
        self.at += 1;
        self.out.push(b'[');
        self.skip_ws();
        if self.text.get(self.at) == Some(&b']') {
            self.at += 1;
            self.out.push(b']');
            return Some(());
        }
        loop {
            self.value(depth)?;
            self.skip_ws();
            match *self.text.get(self.at)? {
                b',' => {
                    self.at += 1;
                    self.out.push(b',');
                }
                b']' => {
                    self.at += 1;
                    self.out.push(b']');
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if depth > JSON_FAST_DEPTH {
            return None;
        }
        self.at += 1;
        self.out.push(b'{');
        let body = self.out.len();
        self.skip_ws();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
            self.out.push(b'}');
            return Some(());
        }
        let first = self.members.len();
        loop {
            self.skip_ws();
            if self.text.get(self.at) != Some(&b'"') {
                return None;
            }
            let key = self.string()?;
            self.skip_ws();
            if self.text.get(self.at) != Some(&b':') {
                return None;
            }
            self.at += 1;
            if self.members.len() > first {
                self.out.push(b',');
            }
            let start = self.out.len();
            self.out.push(b'"');
            self.out.extend_from_slice(key);
            self.out.extend_from_slice(b"\":");
            self.value(depth)?;
            self.members.push((key, start, self.out.len()));
            self.skip_ws();
            match *self.text.get(self.at)? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    break;
                }
                _ => return None,
            }
        }
        let members = &mut self.members[first..];
        if !members.windows(2).all(|w| w[0].0 < w[1].0) {
            members.sort_by(|a, b| a.0.cmp(b.0));
            if members.windows(2).any(|w| w[0].0 == w[1].0) {
                return None;
            }
            let written = self.out[body..].to_vec();
            self.out.truncate(body);
            for (i, &(_, start, end)) in members.iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                self.out
                    .extend_from_slice(&written[start - body..end - body]);
            }
        }
        self.members.truncate(first);
        self.out.push(b'}');
        Some(())
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// True if a result column's wire type is the one `kind` expects (schema-drift check).
pub(crate) fn wire_type_fits(kind: ColKind, col: &Column) -> bool {
    use ColumnType::*;
    let t = col.column_type();
    let flags = col.flags();
    let unsigned = flags.contains(ColumnFlags::UNSIGNED_FLAG);
    let stringy = matches!(
        t,
        MYSQL_TYPE_STRING
            | MYSQL_TYPE_VAR_STRING
            | MYSQL_TYPE_VARCHAR
            | MYSQL_TYPE_BLOB
            | MYSQL_TYPE_TINY_BLOB
            | MYSQL_TYPE_MEDIUM_BLOB
            | MYSQL_TYPE_LONG_BLOB
    );
    match kind {
        ColKind::Int { unsigned: u } => {
            u == unsigned
                && matches!(
                    t,
                    MYSQL_TYPE_TINY
                        | MYSQL_TYPE_SHORT
                        | MYSQL_TYPE_INT24
                        | MYSQL_TYPE_LONG
                        | MYSQL_TYPE_LONGLONG
                )
        }
        ColKind::Decimal => matches!(t, MYSQL_TYPE_NEWDECIMAL | MYSQL_TYPE_DECIMAL),
        ColKind::Float => t == MYSQL_TYPE_FLOAT,
        ColKind::Double => t == MYSQL_TYPE_DOUBLE,
        ColKind::Year => t == MYSQL_TYPE_YEAR,
        ColKind::Date => matches!(t, MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE),
        ColKind::Time { .. } => matches!(t, MYSQL_TYPE_TIME | MYSQL_TYPE_TIME2),
        ColKind::DateTime { .. } => matches!(t, MYSQL_TYPE_DATETIME | MYSQL_TYPE_DATETIME2),
        ColKind::Timestamp { .. } => matches!(t, MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_TIMESTAMP2),
        ColKind::Text { .. } | ColKind::Bytes | ColKind::FixedBinary => {
            stringy
                && !flags.intersects(ColumnFlags::ENUM_FLAG | ColumnFlags::SET_FLAG)
                && (matches!(kind, ColKind::Text { .. }) != (col.character_set() == 63))
        }
        ColKind::Enum => stringy && flags.contains(ColumnFlags::ENUM_FLAG),
        ColKind::Set => stringy && flags.contains(ColumnFlags::SET_FLAG),
        ColKind::Bit { .. } => t == MYSQL_TYPE_BIT,
        ColKind::Json => t == MYSQL_TYPE_JSON,
        ColKind::Geometry => t == MYSQL_TYPE_GEOMETRY,
        ColKind::Vector => t == MYSQL_TYPE_VECTOR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_the_column_signedness() {
        let u = ColKind::Int { unsigned: true };
        assert_eq!(convert(u, Wire::UInt(u64::MAX)), Ok(Value::UInt(u64::MAX)));
        assert_eq!(convert(u, Wire::Int(5)), Ok(Value::UInt(5)));
        assert!(convert(u, Wire::Int(-1)).is_err());
        let s = ColKind::Int { unsigned: false };
        assert_eq!(convert(s, Wire::Int(-5)), Ok(Value::Int(-5)));
        assert_eq!(convert(s, Wire::NULL), Ok(Value::Null));
    }

    #[test]
    fn temporals() {
        let ts = convert(
            ColKind::Timestamp { fsp: 2 },
            Wire::Date(2022, 4, 20, 22, 18, 4, 120_000),
        );
        assert_eq!(
            ts,
            Ok(Value::Timestamp {
                seconds: 1_650_493_084,
                micros: 120_000,
                fsp: 2
            })
        );
        let zero = convert(
            ColKind::Timestamp { fsp: 0 },
            Wire::Date(0, 0, 0, 0, 0, 0, 0),
        );
        assert_eq!(
            zero,
            Ok(Value::Timestamp {
                seconds: 0,
                micros: 0,
                fsp: 0
            })
        );
        let t = convert(
            ColKind::Time { fsp: 3 },
            Wire::Time(true, 1, 2, 3, 4, 500_000),
        )
        .unwrap();
        assert_eq!(t.to_sql_text().unwrap(), "-26:03:04.500");
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn json_text_in_the_binlog_form() {
        let server = br#"{"s": "q\"uote\u0001", "a": {"b": -1e300}, "k": [1, 2.5, null, true, 18446744073709551615]}"#;
        assert_eq!(
            json_as_binlog(server).unwrap(),
            r#"{"a":{"b":-1e+300},"k":[1,2.5,null,true,18446744073709551615],"s":"q\"uote\u0001"}"#
        );
        assert!(json_as_binlog(b"{").is_err());
    }

    #[test]
    fn binary_bit_geometry_vector() {
        assert_eq!(
            convert(ColKind::FixedBinary, Wire::Bytes(vec![1, 0, 2, 0])),
            Ok(Value::Bytes(vec![1, 0, 2]))
        );
        assert_eq!(
            convert(ColKind::Bit { bits: 10 }, Wire::Bytes(vec![1])),
            Ok(Value::Bit {
                bytes: vec![0, 1],
                bits: 10
            })
        );
        assert_eq!(
            convert(ColKind::Geometry, Wire::Bytes(vec![1, 0, 0, 0, 9])),
            Ok(Value::Geometry {
                srid: 1,
                wkb: vec![9]
            })
        );
        let v = 1.5f32.to_le_bytes().to_vec();
        assert_eq!(
            convert(ColKind::Vector, Wire::Bytes(v)),
            Ok(Value::Vector(vec![1.5]))
        );
        assert!(convert(ColKind::Date, Wire::Int(1)).is_err());
    }

    #[test]
    fn json_fast_pass_matches_serde_json() {
        let cases: &[&[u8]] = &[
            br#"{"k": 123, "ok": true, "tags": ["a", "b"]}"#,
            br#"{"tags": ["a", "b"], "ok": false, "k": -5, "": null}"#,
            br#" { "b" : { "z" : 1 , "a" : [ ] } , "a" : { } } "#,
            br#"[1, "x\"y", 2]"#,
            br#"{"a": 1, "a": 2}"#,
            br#"{"a": 1.0}"#,
            br#"{"a": -0}"#,
            br#"[01]"#,
            br#"[1e5, 2E-1]"#,
            br#"[123456789012345678, -123456789012345678]"#,
            br#"[1234567890123456789, 18446744073709551615, 99999999999999999999]"#,
            b"\"caf\xc3\xa9 \x7f\"",
            b"\"a\tb\"",
            b"\"\xff\"",
            br#"{"x": [true, false, null, "", {}]}"#,
            br#"[1, 2"#,
            br#"[1] x"#,
            br#"truex"#,
            br#""#,
            br#"{"a" 1}"#,
            br#"{1: 2}"#,
            br#"[1,]"#,
        ];
        for text in cases {
            let want = json_via_serde(text);
            if let Some(fast) = json_fast(text) {
                assert_eq!(Ok(fast), want, "{}", String::from_utf8_lossy(text));
            }
            assert_eq!(json_as_binlog(text), want);
        }
        assert!(json_fast(br#"{"b": 1, "a": {"d": 2, "c": 3}}"#).is_some());
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(
            json_as_binlog(deep.as_bytes()),
            json_via_serde(deep.as_bytes())
        );
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn token() -> impl Strategy<Value = String> {
            let scalar = prop_oneof![
                Just("null".to_string()),
                Just("true".to_string()),
                Just("false".to_string()),
                prop::sample::select(vec![
                    "0",
                    "-0",
                    "7",
                    "-12",
                    "1.5",
                    "-2.50",
                    "1e3",
                    "1E-2",
                    "00",
                    "123456789012345678",
                    "-999999999999999999",
                    "1234567890123456789",
                    "18446744073709551615",
                    "-9223372036854775808",
                    "99999999999999999999",
                ])
                .prop_map(str::to_string),
                "[a-c\\\\\"é\u{1F600}\t ]{0,5}".prop_map(|s| {
                    // mostly valid strings: escape what JSON requires, sometimes not
                    let mut out = String::from("\"");
                    for c in s.chars() {
                        match c {
                            '"' => out.push_str("\\\""),
                            '\\' => out.push_str("\\\\"),
                            '\t' => out.push_str("\\t"),
                            c => out.push(c),
                        }
                    }
                    out.push('"');
                    out
                }),
            ];
            scalar.prop_recursive(4, 24, 4, |inner| {
                let ws = prop::sample::select(vec!["", " ", "\n  ", "\t"]);
                prop_oneof![
                    (prop::collection::vec(inner.clone(), 0..4), ws.clone())
                        .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!(",{w}")))),
                    (
                        prop::collection::vec(
                            (
                                prop::sample::select(vec!["a", "b", "ab", "", "B", "é"]),
                                inner
                            ),
                            0..4
                        ),
                        ws
                    )
                        .prop_map(|(members, w)| {
                            let m: Vec<String> = members
                                .into_iter()
                                .map(|(k, v)| format!("\"{k}\"{w}:{w}{v}"))
                                .collect();
                            format!("{{{w}{}{w}}}", m.join(&format!("{w},")))
                        }),
                ]
            })
        }

        proptest! {
            #[test]
            fn fast_pass_equals_serde_json(doc in token()) {
                let want = json_via_serde(doc.as_bytes());
                if let Some(fast) = json_fast(doc.as_bytes()) {
                    prop_assert_eq!(Ok(fast), want.clone());
                }
                prop_assert_eq!(json_as_binlog(doc.as_bytes()), want);
            }
        }
    }
}
