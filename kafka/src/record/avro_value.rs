//! A Connect value in its Debezium JSON form (what `debezium_value.rs` and the envelope write)
//! → the Avro value of the schema `avro_schema.rs` derived, following its [`AvroPlan`]. Pure.
//! Base64 text becomes bytes again (`bytes`, `decimal`); optional values become union branches.

use apache_avro::types::Value as Avro;
use apache_avro::Decimal;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::Value as Json;

use super::avro_schema::{AvroPlan, PlanField};

/// Why a value has no Avro form under its plan (value-free).
pub(crate) type ValueMismatch = &'static str;

/// The Avro value of `json` under `plan`.
pub(crate) fn avro_value(plan: &AvroPlan, json: &Json) -> Result<Avro, ValueMismatch> {
    const MISMATCH: &str = "a value does not match its avro schema";
    Ok(match plan {
        AvroPlan::Optional { inner, null_first } => {
            let (null, some) = if *null_first { (0, 1) } else { (1, 0) };
            if json.is_null() {
                Avro::Union(null, Box::new(Avro::Null))
            } else {
                Avro::Union(some, Box::new(avro_value(inner, json)?))
            }
        }
        AvroPlan::Int => Avro::Int(int(json)?),
        AvroPlan::Date => Avro::Date(int(json)?),
        AvroPlan::TimeMillis => Avro::TimeMillis(int(json)?),
        AvroPlan::Long => Avro::Long(json.as_i64().ok_or(MISMATCH)?),
        AvroPlan::TimestampMillis => Avro::TimestampMillis(json.as_i64().ok_or(MISMATCH)?),
        // f32 from the f64 JSON carries: the value was an f32 to begin with
        AvroPlan::Float => Avro::Float(json.as_f64().ok_or(MISMATCH)? as f32),
        AvroPlan::Double => Avro::Double(json.as_f64().ok_or(MISMATCH)?),
        AvroPlan::Boolean => Avro::Boolean(json.as_bool().ok_or(MISMATCH)?),
        AvroPlan::String => Avro::String(json.as_str().ok_or(MISMATCH)?.to_string()),
        AvroPlan::Bytes => Avro::Bytes(bytes(json)?),
        AvroPlan::Decimal => Avro::Decimal(Decimal::from(bytes(json)?)),
        AvroPlan::Array(items) => Avro::Array(
            json.as_array()
                .ok_or(MISMATCH)?
                .iter()
                .map(|v| avro_value(items, v))
                .collect::<Result<_, _>>()?,
        ),
        AvroPlan::Record(fields) => {
            let object = json.as_object().ok_or(MISMATCH)?;
            Avro::Record(
                fields
                    .iter()
                    .map(
                        |PlanField {
                             connect,
                             avro,
                             plan,
                         }| {
                            let v = object.get(connect).unwrap_or(&Json::Null);
                            avro_value(plan, v).map(|v| (avro.clone(), v))
                        },
                    )
                    .collect::<Result<_, _>>()?,
            )
        }
    })
}

fn int(json: &Json) -> Result<i32, ValueMismatch> {
    json.as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .ok_or("a value does not match its avro schema")
}

fn bytes(json: &Json) -> Result<Vec<u8>, ValueMismatch> {
    let text = json
        .as_str()
        .ok_or("a value does not match its avro schema")?;
    BASE64
        .decode(text)
        .map_err(|_| "a bytes value is not base64")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unions_pick_their_branch_and_bytes_decode() {
        let opt = |null_first| AvroPlan::Optional {
            inner: Box::new(AvroPlan::Int),
            null_first,
        };
        assert_eq!(
            avro_value(&opt(true), &Json::Null),
            Ok(Avro::Union(0, Box::new(Avro::Null)))
        );
        assert_eq!(
            avro_value(&opt(true), &json!(7)),
            Ok(Avro::Union(1, Box::new(Avro::Int(7))))
        );
        assert_eq!(
            avro_value(&opt(false), &Json::Null),
            Ok(Avro::Union(1, Box::new(Avro::Null)))
        );
        assert_eq!(
            avro_value(&AvroPlan::Decimal, &json!("/w==")),
            Ok(Avro::Decimal(Decimal::from(vec![0xff])))
        );
        assert_eq!(
            avro_value(&AvroPlan::Int, &json!(1i64 << 40)),
            Err("a value does not match its avro schema")
        );
    }
}
