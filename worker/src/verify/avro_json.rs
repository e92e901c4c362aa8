//! [`avro_json`]: an Avro datum's value as JSON, so `capstan verify` compares the records of an
//! `avro` pipeline exactly as it compares JSON ones (digests of canonical JSON). Both sides of
//! the comparison — the records built from the source and those read from the topic — go
//! through this one mapping, so it needs to be deterministic and lossless, not Debezium's JSON
//! rendering: records and maps become objects, unions their branch, bytes, fixed and decimals
//! (their two's-complement bytes) lowercase hex, floats that are not finite a string.

use apache_avro::types::Value as Avro;
use serde_json::{Map, Number, Value};

fn hex(bytes: &[u8]) -> Value {
    Value::String(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number)
}

/// See the module documentation.
pub fn avro_json(value: &Avro) -> Value {
    match value {
        Avro::Null => Value::Null,
        Avro::Boolean(b) => Value::Bool(*b),
        Avro::Int(n) | Avro::Date(n) | Avro::TimeMillis(n) => Value::from(*n),
        Avro::Long(n)
        | Avro::TimeMicros(n)
        | Avro::TimestampMillis(n)
        | Avro::TimestampMicros(n)
        | Avro::TimestampNanos(n)
        | Avro::LocalTimestampMillis(n)
        | Avro::LocalTimestampMicros(n)
        | Avro::LocalTimestampNanos(n) => Value::from(*n),
        Avro::Float(f) => float(f64::from(*f)),
        Avro::Double(f) => float(*f),
        Avro::Bytes(b) | Avro::Fixed(_, b) => hex(b),
        Avro::String(s) | Avro::Enum(_, s) => Value::String(s.clone()),
        Avro::Union(_, inner) => avro_json(inner),
        Avro::Array(items) => Value::Array(items.iter().map(avro_json).collect()),
        Avro::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), avro_json(v)))
                .collect::<Map<_, _>>(),
        ),
        Avro::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), avro_json(v)))
                .collect::<Map<_, _>>(),
        ),
        Avro::Decimal(d) => match <Vec<u8>>::try_from(d) {
            Ok(bytes) => hex(&bytes),
            Err(_) => Value::String("decimal".into()),
        },
        Avro::BigDecimal(d) => Value::String(d.to_string()),
        Avro::Duration(d) => Value::String(format!("{d:?}")),
        Avro::Uuid(u) => Value::String(u.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::reader::datum::GenericDatumReader;
    use apache_avro::writer::datum::GenericDatumWriter;
    use apache_avro::Schema;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_datum_reads_back_as_the_json_of_its_fields() {
        let schema = Schema::parse_str(
            r#"{"type": "record", "name": "Envelope", "fields": [
                {"name": "after", "type": ["null", {"type": "record", "name": "Value", "fields": [
                    {"name": "id", "type": "int"},
                    {"name": "big", "type": "long"},
                    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                               "precision": 8, "scale": 2}},
                    {"name": "ratio", "type": "float"},
                    {"name": "bits", "type": "bytes"},
                    {"name": "note", "type": ["null", "string"]}
                ]}]},
                {"name": "op", "type": "string"}
            ]}"#,
        )
        .unwrap();
        let value = Avro::Record(vec![
            (
                "after".into(),
                Avro::Union(
                    1,
                    Box::new(Avro::Record(vec![
                        ("id".into(), Avro::Int(7)),
                        ("big".into(), Avro::Long(-5_000_000_000)),
                        (
                            "price".into(),
                            Avro::Decimal(apache_avro::Decimal::from(vec![0x30, 0x39])),
                        ),
                        ("ratio".into(), Avro::Float(0.5)),
                        ("bits".into(), Avro::Bytes(vec![0x01, 0xff])),
                        ("note".into(), Avro::Union(0, Box::new(Avro::Null))),
                    ])),
                ),
            ),
            ("op".into(), Avro::String("r".into())),
        ]);
        let datum = GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(value)
            .unwrap();
        let read = GenericDatumReader::builder(&schema)
            .build()
            .unwrap()
            .read_value(&mut datum.as_slice())
            .unwrap();
        assert_eq!(
            avro_json(&read),
            json!({"after": {"id": 7, "big": -5_000_000_000_i64, "price": "3039",
                             "ratio": 0.5, "bits": "01ff", "note": null},
                   "op": "r"})
        );
    }

    #[test]
    fn floats_that_json_cannot_hold_are_strings() {
        assert_eq!(avro_json(&Avro::Double(f64::NAN)), json!("NaN"));
        assert_eq!(avro_json(&Avro::Float(f32::INFINITY)), json!("inf"));
    }
}
