//! One column value → its JSON form in the change event (documented in
//! `docs/event-format.md`; the golden tests in `golden_tests.rs` pin every variant).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use capstan_core::change::{Date, DateTime, Value};
use serde_json::{Number, Value as Json};

use super::charset_decoder::{decode_text, DecodeFailure};
use super::epoch_days::civil_from_days;

/// Why a value has no JSON form. Never carries the value.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum ValueFailure {
    /// Text that cannot be decoded.
    Text(DecodeFailure),
    /// NaN or an infinity.
    NonFinite,
}

/// The JSON form of one column value.
pub(crate) fn json_value(value: &Value) -> Result<Json, ValueFailure> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Int(v) => Json::from(*v),
        Value::UInt(v) => Json::from(*v),
        Value::Decimal(s) | Value::Enum(s) | Value::Set(s) | Value::Json(s) => {
            Json::String(s.clone())
        }
        Value::Float(v) => Json::Number(float_number(*v)?),
        Value::Double(v) => Json::Number(Number::from_f64(*v).ok_or(ValueFailure::NonFinite)?),
        Value::Text { bytes, collation } => {
            if *collation == BINARY_COLLATION {
                Json::String(BASE64.encode(bytes))
            } else {
                Json::String(decode_text(bytes, *collation).map_err(ValueFailure::Text)?)
            }
        }
        Value::Bytes(b) => Json::String(BASE64.encode(b)),
        Value::Date(d) => Json::String(date_text(d)),
        Value::Time(t) => Json::String(t.to_string()),
        Value::DateTime(dt) => Json::String(datetime_text(dt)),
        Value::Timestamp {
            seconds,
            micros,
            fsp,
        } => Json::String(timestamp_text(*seconds, *micros, *fsp)),
        Value::Year(y) => Json::from(*y),
        Value::Bit { bytes, bits } => bit_json(bytes, *bits),
        Value::Geometry { srid, wkb } => {
            let mut m = serde_json::Map::new();
            m.insert("srid".into(), Json::from(*srid));
            m.insert("wkb".into(), Json::String(BASE64.encode(wkb)));
            Json::Object(m)
        }
        Value::Vector(v) => Json::Array(
            v.iter()
                .map(|f| float_number(*f).map(Json::Number))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// The binary pseudo-charset: a text value with it is bytes (base64).
pub(super) const BINARY_COLLATION: u16 = 63;

/// A FLOAT as the shortest decimal that round-trips through `f32` (so `0.1f32` is `0.1`,
/// not `0.10000000149011612`).
pub(super) fn float_number(v: f32) -> Result<Number, ValueFailure> {
    if !v.is_finite() {
        return Err(ValueFailure::NonFinite);
    }
    let shortest: f64 = v.to_string().parse().map_err(|_| ValueFailure::NonFinite)?;
    Number::from_f64(shortest).ok_or(ValueFailure::NonFinite)
}

/// BIT(1) is a boolean; wider BITs an unsigned integer (big-endian bytes, at most 64 bits).
fn bit_json(bytes: &[u8], bits: u16) -> Json {
    let n = bytes
        .iter()
        .rev()
        .take(8)
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    if bits == 1 {
        Json::Bool(n != 0)
    } else {
        Json::from(n)
    }
}

/// `YYYY-MM-DD`, zero dates kept as written (as `Date`'s `Display`, without its formatter).
fn date_text(d: &Date) -> String {
    let mut s = String::with_capacity(10);
    push_date(
        &mut s,
        u32::from(d.year),
        u32::from(d.month),
        u32::from(d.day),
    );
    s
}

/// `YYYY-MM-DDTHH:MM:SS[.f]`: ISO 8601 local date-time, zero dates kept as written.
fn datetime_text(dt: &DateTime) -> String {
    let mut s = String::with_capacity(26);
    let d = &dt.date;
    push_date(
        &mut s,
        u32::from(d.year),
        u32::from(d.month),
        u32::from(d.day),
    );
    s.push('T');
    push_clock(
        &mut s,
        u32::from(dt.hour),
        u32::from(dt.minute),
        u32::from(dt.second),
    );
    push_fraction(&mut s, dt.micros, dt.fsp);
    s
}

/// `YYYY-MM-DDTHH:MM:SS[.f]Z` in UTC; MySQL's zero timestamp is `0000-00-00T00:00:00Z`.
pub(super) fn timestamp_text(seconds: u32, micros: u32, fsp: u8) -> String {
    let mut s = String::with_capacity(27);
    if seconds == 0 && micros == 0 {
        s.push_str("0000-00-00T00:00:00");
    } else {
        let days = i64::from(seconds / 86_400);
        let secs = seconds % 86_400;
        let (y, m, d) = civil_from_days(days);
        // a u32 of seconds ends in 2106: the year is never negative
        push_date(&mut s, u32::try_from(y).unwrap_or(0), m, d);
        s.push('T');
        push_clock(&mut s, secs / 3600, (secs / 60) % 60, secs % 60);
    }
    push_fraction(&mut s, micros, fsp);
    s.push('Z');
    s
}

/// Appends `YYYY-MM-DD`.
fn push_date(s: &mut String, year: u32, month: u32, day: u32) {
    push_joined(s, [(year, 4), (month, 2), (day, 2)], '-');
}

/// Appends `HH:MM:SS`.
fn push_clock(s: &mut String, hour: u32, minute: u32, second: u32) {
    push_joined(s, [(hour, 2), (minute, 2), (second, 2)], ':');
}

/// Appends the padded `(number, width)` fields with `separator` between them.
fn push_joined(s: &mut String, fields: [(u32, usize); 3], separator: char) {
    for (i, (n, width)) in fields.into_iter().enumerate() {
        if i > 0 {
            s.push(separator);
        }
        push_padded(s, n, width);
    }
}

/// Appends `n` in decimal, zero-padded to at least `width` digits (as `{:0width$}`).
fn push_padded(s: &mut String, n: u32, width: usize) {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(n);
    for _ in digits.len()..width {
        s.push('0');
    }
    s.push_str(digits);
}

/// Appends `.` and the first `fsp` (1..=6) digits of `micros`.
pub(super) fn push_fraction(s: &mut String, micros: u32, fsp: u8) {
    if fsp == 0 {
        return;
    }
    let fsp = u32::from(fsp.min(6));
    s.push('.');
    push_padded(s, micros.min(999_999) / 10u32.pow(6 - fsp), fsp as usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(timestamp_text(2_147_483_647, 0, 0), "2038-01-19T03:14:07Z");
        assert_eq!(timestamp_text(0, 0, 0), "0000-00-00T00:00:00Z");
        assert_eq!(timestamp_text(1, 120, 6), "1970-01-01T00:00:01.000120Z");
        assert_eq!(
            timestamp_text(u32::MAX, 999_999, 3),
            "2106-02-07T06:28:15.999Z"
        );
    }

    #[test]
    fn dates_and_fractions_are_padded_as_the_formatter_pads_them() {
        for (y, m, d) in [
            (0, 0, 0),
            (7, 1, 2),
            (999, 12, 31),
            (2026, 11, 29),
            (9999, 9, 9),
        ] {
            let date = Date {
                year: y,
                month: m,
                day: d,
            };
            assert_eq!(date_text(&date), date.to_string());
        }
        for (micros, fsp, text) in [
            (0, 1, ".0"),
            (5, 6, ".000005"),
            (120_000, 2, ".12"),
            (999_999, 5, ".99999"),
            (1_500_000, 6, ".999999"),
            (42, 0, ""),
        ] {
            let mut s = String::new();
            push_fraction(&mut s, micros, fsp);
            assert_eq!(s, text, "{micros} {fsp}");
        }
        let mut s = String::new();
        push_padded(&mut s, u32::MAX, 2);
        assert_eq!(s, u32::MAX.to_string());
    }

    #[test]
    fn float_is_shortest() {
        assert_eq!(json_value(&Value::Float(0.1)).unwrap().to_string(), "0.1");
        assert_eq!(
            json_value(&Value::Double(f64::NAN)),
            Err(ValueFailure::NonFinite)
        );
        assert_eq!(
            json_value(&Value::Vector(vec![1.0, f32::INFINITY])),
            Err(ValueFailure::NonFinite)
        );
    }

    #[test]
    fn bits() {
        assert_eq!(bit_json(&[1], 1), Json::Bool(true));
        assert_eq!(bit_json(&[0x01, 0x02], 10), Json::from(258u64));
        assert_eq!(bit_json(&[0xff; 8], 64), Json::from(u64::MAX));
    }
}
