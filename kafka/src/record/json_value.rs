//! One column value → its JSON form in the change event (documented in
//! `docs/event-format.md`; the golden tests in `golden_tests.rs` pin every variant).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use capstan_core::change::{DateTime, Value};
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
pub(super) fn timestamp_text(seconds: u32, micros: u32, fsp: u8) -> String {
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
pub(super) fn push_fraction(s: &mut String, micros: u32, fsp: u8) {
    if fsp == 0 {
        return;
    }
    let digits = format!("{:06}", micros.min(999_999));
    s.push('.');
    s.push_str(digits.get(..usize::from(fsp.min(6))).unwrap_or(&digits));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
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
