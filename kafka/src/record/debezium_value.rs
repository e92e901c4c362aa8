//! One column value → its JSON form in the Debezium formats: the encodings Debezium's MySQL
//! connector writes, as its JSON converter carries them with `schemas.enable=false`, under
//! the chosen [`TypeMapping`] (documented in `docs/event-format.md`; pinned by the golden
//! tests in `golden_debezium_types.rs`).
//!
//! What capstan cannot know from a value alone is documented there as an intended
//! difference: a zero date is null (Debezium writes the epoch for a NOT NULL column), a
//! `TINYINT(1)` declared `BOOLEAN` stays a number, a `POINT` column is a `Geometry`.

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE as BASE64_URL_SAFE};
use base64::Engine as _;
use capstan_core::change::{ColumnType, Date, DateTime, Time, Value};
use serde_json::{Number, Value as Json};

use super::charset_decoder::decode_text;
use super::epoch_days::days_from_civil;
use super::json_value::{
    float_number, push_fraction, timestamp_text, ValueFailure, BINARY_COLLATION,
};
use super::type_mapping::{
    BigintUnsignedHandling, BinaryHandling, DecimalHandling, TimePrecision, TypeMapping,
};

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// The Debezium JSON form of one column value, of the declared type `ty` when the source
/// gives it.
pub(crate) fn debezium_value(
    value: &Value,
    ty: Option<&ColumnType>,
    mapping: &TypeMapping,
) -> Result<Json, ValueFailure> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Int(v) => Json::from(*v),
        Value::UInt(v) => match mapping.bigint_unsigned_handling_mode {
            // Debezium reads BIGINT UNSIGNED as a Java long: above 2^63 - 1 it wraps
            BigintUnsignedHandling::Long => Json::from(*v as i64),
            // a BIGINT UNSIGNED is a Connect Decimal of scale 0; narrower unsigned columns
            // (and a column of unknown type) stay numbers
            BigintUnsignedHandling::Precise if ty.is_some_and(|t| mapping.bigint_as_decimal(t)) => {
                decimal(&v.to_string(), DecimalHandling::Precise)?
            }
            BigintUnsignedHandling::Precise => Json::from(*v),
        },
        Value::Decimal(s) => decimal(s, mapping.decimal_handling_mode)?,
        Value::Float(v) => Json::Number(float_number(*v)?),
        Value::Double(v) => Json::Number(Number::from_f64(*v).ok_or(ValueFailure::NonFinite)?),
        Value::Text { bytes, collation } => {
            if *collation == BINARY_COLLATION {
                binary(bytes, mapping.binary_handling_mode)
            } else {
                Json::String(decode_text(bytes, *collation).map_err(ValueFailure::Text)?)
            }
        }
        Value::Bytes(b) => binary(b, mapping.binary_handling_mode),
        Value::Enum(s) | Value::Set(s) | Value::Json(s) => Json::String(s.clone()),
        Value::Date(d) => date(d, mapping.time_precision_mode),
        Value::Time(t) => time(t, mapping.time_precision_mode),
        Value::DateTime(dt) => datetime(dt, mapping.time_precision_mode),
        Value::Timestamp {
            seconds,
            micros,
            fsp,
        } => {
            if *seconds == 0 && *micros == 0 {
                Json::Null
            } else {
                // io.debezium.time.ZonedTimestamp in UTC, with the column's fraction digits
                Json::String(timestamp_text(*seconds, *micros, *fsp))
            }
        }
        Value::Year(y) => Json::from(*y),
        Value::Bit { bytes, bits } => bits_value(bytes, *bits),
        Value::Geometry { srid, wkb } => {
            // io.debezium.data.geometry.Geometry: {wkb, srid}
            let mut m = serde_json::Map::new();
            m.insert("wkb".into(), Json::String(BASE64.encode(wkb)));
            m.insert("srid".into(), Json::from(*srid));
            Json::Object(m)
        }
        Value::Vector(v) => Json::Array(
            v.iter()
                .map(|f| float_number(*f).map(Json::Number))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// A `DECIMAL` under `decimal.handling.mode`.
fn decimal(text: &str, mode: DecimalHandling) -> Result<Json, ValueFailure> {
    Ok(match mode {
        DecimalHandling::Precise => Json::String(BASE64.encode(unscaled_twos_complement(text))),
        DecimalHandling::String => Json::String(text.to_string()),
        DecimalHandling::Double => {
            let v: f64 = text.parse().map_err(|_| ValueFailure::NonFinite)?;
            Json::Number(Number::from_f64(v).ok_or(ValueFailure::NonFinite)?)
        }
    })
}

/// The unscaled value of a decimal text (its digits without the point) as the shortest
/// big-endian two's-complement bytes: Kafka Connect's `Decimal` encoding.
fn unscaled_twos_complement(text: &str) -> Vec<u8> {
    let negative = text.starts_with('-');
    // magnitude, big-endian base 256
    let mut mag: Vec<u8> = Vec::new();
    for d in text.bytes().filter(u8::is_ascii_digit) {
        let mut carry = u32::from(d - b'0');
        for byte in mag.iter_mut().rev() {
            let v = u32::from(*byte) * 10 + carry;
            *byte = (v & 0xff) as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            mag.insert(0, (carry & 0xff) as u8);
            carry >>= 8;
        }
    }
    while mag.first() == Some(&0) {
        mag.remove(0);
    }
    if mag.is_empty() {
        return vec![0];
    }
    if !negative {
        if mag[0] & 0x80 != 0 {
            mag.insert(0, 0);
        }
        return mag;
    }
    // two's complement: invert and add one
    let mut out: Vec<u8> = mag.iter().map(|b| !b).collect();
    for byte in out.iter_mut().rev() {
        let (v, overflow) = byte.overflowing_add(1);
        *byte = v;
        if !overflow {
            break;
        }
    }
    if out[0] & 0x80 == 0 {
        out.insert(0, 0xff);
    }
    // the shortest form: drop a leading 0xff whose next byte already carries the sign
    while out.len() > 1 && out[0] == 0xff && out[1] & 0x80 != 0 {
        out.remove(0);
    }
    out
}

/// Binary data under `binary.handling.mode`.
fn binary(bytes: &[u8], mode: BinaryHandling) -> Json {
    Json::String(match mode {
        // bytes travel as base64 in JSON, exactly as the base64 mode's string
        BinaryHandling::Bytes | BinaryHandling::Base64 => BASE64.encode(bytes),
        BinaryHandling::Base64UrlSafe => BASE64_URL_SAFE.encode(bytes),
        BinaryHandling::Hex => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// BIT(1) is a boolean; wider BITs are io.debezium.data.Bits: little-endian bytes, as many as
/// the width needs.
fn bits_value(bytes: &[u8], bits: u16) -> Json {
    if bits == 1 {
        return Json::Bool(bytes.iter().any(|b| *b != 0));
    }
    let len = usize::from(bits).div_ceil(8);
    let mut le: Vec<u8> = bytes.iter().rev().copied().collect();
    le.resize(len, 0);
    Json::String(BASE64.encode(le))
}

/// A zero or partly-zero date (MySQL's `0000-00-00`, `2024-00-15`) has no calendar day.
fn is_zero_date(d: &Date) -> bool {
    d.month == 0 || d.day == 0
}

fn epoch_day(d: &Date) -> i64 {
    days_from_civil(i64::from(d.year), u32::from(d.month), u32::from(d.day))
}

/// `DATE`: days since the epoch (io.debezium.time.Date, or Connect's `Date`), or
/// io.debezium.time.IsoDate text; a zero date is null.
fn date(d: &Date, mode: TimePrecision) -> Json {
    if is_zero_date(d) {
        return Json::Null;
    }
    match mode {
        TimePrecision::Isostring => Json::String(format!("{d}Z")),
        _ => Json::from(epoch_day(d)),
    }
}

/// The signed microseconds of a `TIME` (a duration: may be negative or past 24 hours).
fn time_micros(t: &Time) -> i64 {
    let us = ((i64::from(t.hours) * 60 + i64::from(t.minutes)) * 60 + i64::from(t.seconds))
        * 1_000_000
        + i64::from(t.micros);
    if t.negative {
        -us
    } else {
        us
    }
}

/// `TIME`: microseconds (io.debezium.time.MicroTime), milliseconds (Connect's `Time`), or
/// io.debezium.time.IsoTime text (`HH:MM:SS[.f]Z`, fraction digits as needed).
fn time(t: &Time, mode: TimePrecision) -> Json {
    let us = time_micros(t);
    match mode {
        TimePrecision::AdaptiveTimeMicroseconds | TimePrecision::Microseconds => Json::from(us),
        // Connect's `Time` is a time of day in int32 milliseconds: a TIME outside
        // [00:00, 24:00) has none, and is null, as Debezium writes it
        TimePrecision::Connect if !(0..MICROS_PER_DAY).contains(&us) => Json::Null,
        TimePrecision::Connect => Json::from(us.div_euclid(1000)),
        TimePrecision::Isostring => {
            let mut s = format!(
                "{}{:02}:{:02}:{:02}",
                if t.negative { "-" } else { "" },
                t.hours,
                t.minutes,
                t.seconds
            );
            push_trimmed_fraction(&mut s, t.micros);
            s.push('Z');
            Json::String(s)
        }
    }
}

/// `DATETIME` (a local date-time, read as UTC): milliseconds or microseconds since the epoch
/// by mode and precision (io.debezium.time.Timestamp / MicroTimestamp, Connect's
/// `Timestamp`), or io.debezium.time.IsoTimestamp text; a zero date is null.
fn datetime(dt: &DateTime, mode: TimePrecision) -> Json {
    if is_zero_date(&dt.date) {
        return Json::Null;
    }
    let us = epoch_day(&dt.date) * MICROS_PER_DAY
        + ((i64::from(dt.hour) * 60 + i64::from(dt.minute)) * 60 + i64::from(dt.second))
            * 1_000_000
        + i64::from(dt.micros);
    let millis = us.div_euclid(1000);
    match mode {
        TimePrecision::AdaptiveTimeMicroseconds if dt.fsp <= 3 => Json::from(millis),
        TimePrecision::AdaptiveTimeMicroseconds | TimePrecision::Microseconds => Json::from(us),
        TimePrecision::Connect => Json::from(millis),
        TimePrecision::Isostring => {
            let mut s = format!(
                "{}T{:02}:{:02}:{:02}",
                dt.date, dt.hour, dt.minute, dt.second
            );
            push_trimmed_fraction(&mut s, dt.micros);
            s.push('Z');
            Json::String(s)
        }
    }
}

/// Appends `.` and the fraction of `micros` without trailing zeros (nothing for 0), as
/// ISO 8601 text writes it.
fn push_trimmed_fraction(s: &mut String, micros: u32) {
    if micros == 0 {
        return;
    }
    let mut digits = String::new();
    push_fraction(&mut digits, micros, 6);
    s.push_str(digits.trim_end_matches('0'));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        BASE64.encode(bytes)
    }

    #[test]
    fn decimal_unscaled_bytes_are_shortest_twos_complement() {
        // BigDecimal's unscaledValue().toByteArray() for the same values
        assert_eq!(unscaled_twos_complement("0.00"), vec![0]);
        assert_eq!(unscaled_twos_complement("1.27"), vec![0x7f]);
        assert_eq!(unscaled_twos_complement("1.28"), vec![0x00, 0x80]);
        assert_eq!(unscaled_twos_complement("-1.28"), vec![0x80]);
        assert_eq!(unscaled_twos_complement("-1.29"), vec![0xff, 0x7f]);
        assert_eq!(unscaled_twos_complement("-0.01"), vec![0xff]);
        assert_eq!(unscaled_twos_complement("-12.340"), vec![0xcf, 0xcc]);
        assert_eq!(unscaled_twos_complement("65535"), vec![0x00, 0xff, 0xff]);
        assert_eq!(unscaled_twos_complement("-65536"), vec![0xff, 0x00, 0x00]);
        // 10^64 - 1: wider than any machine integer
        let max = "9".repeat(64);
        let bytes = unscaled_twos_complement(&max);
        assert_eq!(bytes.len(), 27);
        assert_eq!(bytes[0], 0x18);
    }

    #[test]
    fn bits_are_little_endian_in_their_width() {
        assert_eq!(bits_value(&[1], 1), Json::Bool(true));
        assert_eq!(bits_value(&[0], 1), Json::Bool(false));
        assert_eq!(
            bits_value(&[0x01, 0x02], 10),
            Json::String(b64(&[0x02, 0x01]))
        );
        assert_eq!(bits_value(&[0x05], 3), Json::String(b64(&[0x05])));
        assert_eq!(
            bits_value(&[0x80, 0, 0, 0, 0, 0, 0, 0x01], 64),
            Json::String(b64(&[0x01, 0, 0, 0, 0, 0, 0, 0x80]))
        );
    }

    #[test]
    fn binary_modes() {
        let bytes = [0xfb, 0xff, 0x00];
        assert_eq!(binary(&bytes, BinaryHandling::Bytes), Json::from("+/8A"));
        assert_eq!(binary(&bytes, BinaryHandling::Base64), Json::from("+/8A"));
        assert_eq!(
            binary(&bytes, BinaryHandling::Base64UrlSafe),
            Json::from("-_8A")
        );
        assert_eq!(binary(&bytes, BinaryHandling::Hex), Json::from("fbff00"));
    }

    #[test]
    fn negative_times_and_fractions() {
        let t = Time {
            negative: true,
            hours: 838,
            minutes: 59,
            seconds: 59,
            micros: 0,
            fsp: 0,
        };
        assert_eq!(time_micros(&t), -3_020_399_000_000);
        // no time of day in Connect's int32 milliseconds
        assert_eq!(time(&t, TimePrecision::Connect), Json::Null);
        assert_eq!(
            time(&t, TimePrecision::Isostring),
            Json::from("-838:59:59Z")
        );
        let mut s = String::new();
        push_trimmed_fraction(&mut s, 120_000);
        assert_eq!(s, ".12");
    }
}
