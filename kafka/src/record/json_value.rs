//! One column value → its JSON form in the change event (documented in
//! `docs/event-format.md`; the golden tests in `golden_tests.rs` pin every variant).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use capstan_core::change::{DateTime, Value};
use serde_json::{Number, Value as Json};

use super::charset_decoder::{decode_text, DecodeFailure};

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
        Value::Date(d) => Json::String(d.to_string()),
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
const BINARY_COLLATION: u16 = 63;

/// A FLOAT as the shortest decimal that round-trips through `f32` (so `0.1f32` is `0.1`,
/// not `0.10000000149011612`).
fn float_number(v: f32) -> Result<Number, ValueFailure> {
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

/// `YYYY-MM-DDTHH:MM:SS[.f]`: ISO 8601 local date-time, zero dates kept as written.
fn datetime_text(dt: &DateTime) -> String {
    let mut s = format!(
        "{}T{:02}:{:02}:{:02}",
        dt.date, dt.hour, dt.minute, dt.second
    );
    push_fraction(&mut s, dt.micros, dt.fsp);
    s
}

/// `YYYY-MM-DDTHH:MM:SS[.f]Z` in UTC; MySQL's zero timestamp is `0000-00-00T00:00:00Z`.
fn timestamp_text(seconds: u32, micros: u32, fsp: u8) -> String {
    let mut s = if seconds == 0 && micros == 0 {
        "0000-00-00T00:00:00".to_string()
    } else {
        let days = i64::from(seconds / 86_400);
        let secs = seconds % 86_400;
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        )
    };
    push_fraction(&mut s, micros, fsp);
    s.push('Z');
    s
}

/// Appends `.` and the first `fsp` (1..=6) digits of `micros`.
fn push_fraction(s: &mut String, micros: u32, fsp: u8) {
    if fsp == 0 {
        return;
    }
    let digits = format!("{:06}", micros.min(999_999));
    s.push('.');
    s.push_str(digits.get(..usize::from(fsp.min(6))).unwrap_or(&digits));
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's
/// well-known civil-from-days algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(timestamp_text(2_147_483_647, 0, 0), "2038-01-19T03:14:07Z");
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
