//! Avro schemas of the `avro` format, derived from the Kafka Connect schemas that
//! `connect_schema.rs` builds (the `debezium_json_schema` format's), as Confluent's `AvroData`
//! (the AvroConverter Debezium is run with) derives them with its defaults
//! (`connect.meta.data=true`, `enhanced.avro.schema.support=false`):
//!
//! - `int8`/`int16` → `int` with `connect.type`; `int32` → `int`; `int64` → `long`;
//!   `float`/`double` (Connect's FLOAT32/FLOAT64) → `float`/`double`; `boolean`, `string`, `bytes` as they are;
//! - a struct → a `record` named after the Connect name (namespace: up to its last `.`), each
//!   field a record field; a named record met again is referenced by its full name;
//! - Connect's logical types → Avro's: `Decimal` → `bytes` with `logicalType: decimal`,
//!   `precision` (the `connect.decimal.precision` parameter, else 64) and `scale`; `Date` →
//!   `date`, `Time` → `time-millis`, `Timestamp` → `timestamp-millis`;
//! - the Connect name, version, parameters, doc and default as the properties `connect.name`,
//!   `connect.version`, `connect.parameters`, `connect.doc`, `connect.default` (so
//!   `io.debezium.time.*` and `io.debezium.data.*` keep their meaning);
//! - an optional schema → a union with `null`: `["null", T]` with field default `null`, or
//!   `[T, "null"]` with the Connect default when it has one.
//!
//! Names are adjusted as Debezium's `field.name.adjustment.mode=avro` and
//! `schema.name.adjustment.mode=avro` do: every character outside `[A-Za-z0-9_]` becomes `_`,
//! and a name starting with a digit gets a leading `_`.
//!
//! Alongside each schema an [`AvroPlan`] says how the Connect value (its Debezium JSON form)
//! becomes the Avro value (`avro_value.rs`). Pure: schema JSON in, schema JSON out.

use std::collections::HashSet;

use serde_json::{json, Map, Value as Json};

const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
const DATE: &str = "org.apache.kafka.connect.data.Date";
const TIME: &str = "org.apache.kafka.connect.data.Time";
const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// AvroData's precision of a `Decimal` without the `connect.decimal.precision` parameter.
const DEFAULT_DECIMAL_PRECISION: u64 = 64;

/// How a Connect value in its Debezium JSON form becomes an Avro value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AvroPlan {
    Int,
    Long,
    Float,
    Double,
    Boolean,
    String,
    /// Base64 in JSON, bytes in Avro.
    Bytes,
    /// Base64 of the unscaled two's-complement bytes in JSON; Avro's `decimal`.
    Decimal,
    Date,
    TimeMillis,
    TimestampMillis,
    Record(Vec<PlanField>),
    Array(Box<AvroPlan>),
    /// A union with `null`; `null_first`: `null` is branch 0 (else branch 1).
    Optional {
        inner: Box<AvroPlan>,
        null_first: bool,
    },
}

/// One record field: its Connect (JSON) name, its Avro name, its plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlanField {
    pub(crate) connect: String,
    pub(crate) avro: String,
    pub(crate) plan: AvroPlan,
}

/// Why a Connect schema has no Avro schema (value-free; never expected from capstan's own
/// Connect schemas).
pub(crate) type SchemaFailure = &'static str;

/// The Avro schema (JSON) of a Connect schema (JSON), and its plan.
pub(crate) fn avro_schema(connect: &Json) -> Result<(Json, AvroPlan), SchemaFailure> {
    let mut defined = HashSet::new();
    convert(connect, &mut defined)
}

/// An Avro name: characters outside `[A-Za-z0-9_]` become `_`, a leading digit gets a `_`.
pub(crate) fn avro_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        out.push('_');
    }
    out.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    out
}

/// A full name (`a.b.Value`) with each part adjusted by [`avro_name`].
fn avro_full_name(name: &str) -> String {
    name.split('.').map(avro_name).collect::<Vec<_>>().join(".")
}

fn convert(
    connect: &Json,
    defined: &mut HashSet<String>,
) -> Result<(Json, AvroPlan), SchemaFailure> {
    let kind = connect
        .get("type")
        .and_then(Json::as_str)
        .ok_or("connect schema without a type")?;
    let name = connect
        .get("name")
        .and_then(Json::as_str)
        .map(avro_full_name);
    let logical = name.as_deref();
    let mut avro = Map::new();
    let plan = match kind {
        "int8" | "int16" => {
            avro.insert("type".into(), json!("int"));
            avro.insert("connect.type".into(), json!(kind));
            AvroPlan::Int
        }
        "int32" => {
            avro.insert("type".into(), json!("int"));
            match logical {
                Some(DATE) => {
                    avro.insert("logicalType".into(), json!("date"));
                    AvroPlan::Date
                }
                Some(TIME) => {
                    avro.insert("logicalType".into(), json!("time-millis"));
                    AvroPlan::TimeMillis
                }
                _ => AvroPlan::Int,
            }
        }
        "int64" => {
            avro.insert("type".into(), json!("long"));
            if logical == Some(TIMESTAMP) {
                avro.insert("logicalType".into(), json!("timestamp-millis"));
                AvroPlan::TimestampMillis
            } else {
                AvroPlan::Long
            }
        }
        // JsonConverter's names of Connect's FLOAT32 and FLOAT64 (and Connect's own)
        "float" | "float32" => {
            avro.insert("type".into(), json!("float"));
            AvroPlan::Float
        }
        "double" | "float64" => {
            avro.insert("type".into(), json!("double"));
            AvroPlan::Double
        }
        "boolean" => {
            avro.insert("type".into(), json!("boolean"));
            AvroPlan::Boolean
        }
        "string" => {
            avro.insert("type".into(), json!("string"));
            AvroPlan::String
        }
        "bytes" => {
            avro.insert("type".into(), json!("bytes"));
            if logical == Some(DECIMAL) {
                let param = |p: &str| {
                    connect
                        .get("parameters")
                        .and_then(|m| m.get(p))
                        .and_then(Json::as_str)
                        .map(str::parse::<u64>)
                };
                let scale = param("scale")
                    .ok_or("decimal without a scale")?
                    .map_err(|_| "decimal scale is not a number")?;
                let precision = param("connect.decimal.precision")
                    .unwrap_or(Ok(DEFAULT_DECIMAL_PRECISION))
                    .map_err(|_| "decimal precision is not a number")?;
                avro.insert("scale".into(), json!(scale));
                avro.insert("precision".into(), json!(precision));
                avro.insert("logicalType".into(), json!("decimal"));
                AvroPlan::Decimal
            } else {
                AvroPlan::Bytes
            }
        }
        "array" => {
            let items = connect.get("items").ok_or("array without items")?;
            let (items, plan) = convert(items, defined)?;
            avro.insert("type".into(), json!("array"));
            avro.insert("items".into(), items);
            AvroPlan::Array(Box::new(plan))
        }
        "struct" => {
            let full = name.clone().unwrap_or_else(|| "ConnectDefault".into());
            let first = defined.insert(full.clone());
            let mut fields = Vec::new();
            let mut plans = Vec::new();
            for f in connect
                .get("fields")
                .and_then(Json::as_array)
                .ok_or("struct without fields")?
            {
                let field_name = f
                    .get("field")
                    .and_then(Json::as_str)
                    .ok_or("struct field without a name")?;
                let (schema, plan) = convert(f, defined)?;
                let mut field = Map::new();
                let avro_field = avro_name(field_name);
                field.insert("name".into(), json!(avro_field));
                field.insert("type".into(), schema);
                match f.get("default") {
                    Some(d) => {
                        field.insert("default".into(), d.clone());
                    }
                    None if is_optional(f) => {
                        field.insert("default".into(), Json::Null);
                    }
                    None => {}
                }
                fields.push(Json::Object(field));
                plans.push(PlanField {
                    connect: field_name.to_string(),
                    avro: avro_field,
                    plan,
                });
            }
            let plan = AvroPlan::Record(plans);
            if !first {
                // a named type is defined once; later uses name it
                return Ok((optional(connect, json!(full)), optional_plan(connect, plan)));
            }
            let (namespace, short) = match full.rsplit_once('.') {
                Some((ns, n)) => (Some(ns), n),
                None => (None, full.as_str()),
            };
            avro.insert("type".into(), json!("record"));
            avro.insert("name".into(), json!(short));
            if let Some(ns) = namespace {
                avro.insert("namespace".into(), json!(ns));
            }
            avro.insert("fields".into(), Json::Array(fields));
            plan
        }
        _ => return Err("connect schema of an unsupported type"),
    };
    // AvroData's Connect metadata
    if let Some(doc) = connect.get("doc") {
        avro.insert("connect.doc".into(), doc.clone());
    }
    if let Some(version) = connect.get("version") {
        avro.insert("connect.version".into(), version.clone());
    }
    if let Some(p) = connect.get("parameters") {
        avro.insert("connect.parameters".into(), p.clone());
    }
    if let Some(d) = connect.get("default") {
        avro.insert("connect.default".into(), d.clone());
    }
    if let Some(n) = &name {
        avro.insert("connect.name".into(), json!(n));
    }
    let schema = if avro.len() == 1 {
        // a primitive without properties is written as its name
        avro.remove("type").unwrap_or(Json::Null)
    } else {
        Json::Object(avro)
    };
    Ok((optional(connect, schema), optional_plan(connect, plan)))
}

/// `plan` as the union [`optional`] makes of its schema.
fn optional_plan(connect: &Json, plan: AvroPlan) -> AvroPlan {
    if is_optional(connect) {
        AvroPlan::Optional {
            inner: Box::new(plan),
            null_first: connect.get("default").is_none(),
        }
    } else {
        plan
    }
}

fn is_optional(connect: &Json) -> bool {
    connect.get("optional").and_then(Json::as_bool) == Some(true)
}

/// `schema` as a union with `null` when `connect` is optional: `null` first, unless the
/// Connect schema has a default (an Avro union's default is of its first branch).
fn optional(connect: &Json, schema: Json) -> Json {
    if !is_optional(connect) {
        schema
    } else if connect.get("default").is_none() {
        json!(["null", schema])
    } else {
        json!([schema, "null"])
    }
}

/// The Avro schema of a Connect schema, checked by parsing it as Avro (`apache_avro`).
pub(crate) fn parsed(schema: &Json) -> Result<apache_avro::Schema, SchemaFailure> {
    apache_avro::Schema::parse(schema).map_err(|_| "the derived avro schema does not parse")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_adjusted_as_debeziums_avro_mode() {
        assert_eq!(avro_name("order_id"), "order_id");
        assert_eq!(avro_name("order-id"), "order_id");
        assert_eq!(avro_name("café"), "caf_");
        assert_eq!(avro_name("1st"), "_1st");
        assert_eq!(avro_name(""), "_");
        assert_eq!(avro_full_name("my-app.shop.2024"), "my_app.shop._2024");
    }

    #[test]
    fn primitives_optional_and_defaults() {
        let (s, p) = avro_schema(&json!({"type": "int16", "optional": true})).unwrap();
        assert_eq!(s, json!(["null", {"type": "int", "connect.type": "int16"}]));
        assert_eq!(
            p,
            AvroPlan::Optional {
                inner: Box::new(AvroPlan::Int),
                null_first: true
            }
        );
        let (s, _) = avro_schema(&json!({"type": "int64", "optional": false})).unwrap();
        assert_eq!(s, json!("long"));
        let (s, p) =
            avro_schema(&json!({"type": "string", "optional": true, "default": "x"})).unwrap();
        assert_eq!(
            s,
            json!([{"type": "string", "connect.default": "x"}, "null"])
        );
        assert_eq!(
            p,
            AvroPlan::Optional {
                inner: Box::new(AvroPlan::String),
                null_first: false
            }
        );
    }

    #[test]
    fn a_record_used_twice_is_defined_once() {
        let row = json!({"type": "struct", "optional": true, "name": "a.b.Value",
                          "fields": [{"type": "int32", "optional": false, "field": "id"}]});
        let mut before = row.clone();
        before["field"] = json!("before");
        let mut after = row;
        after["field"] = json!("after");
        let env = json!({"type": "struct", "optional": false, "name": "a.b.Envelope",
                          "fields": [before, after]});
        let (s, _) = avro_schema(&env).unwrap();
        assert_eq!(
            s["fields"][0]["type"],
            json!(["null", {"type": "record", "name": "Value", "namespace": "a.b",
                             "fields": [{"name": "id", "type": "int"}],
                             "connect.name": "a.b.Value"}])
        );
        assert_eq!(s["fields"][1]["type"], json!(["null", "a.b.Value"]));
        assert_eq!(s["fields"][1]["default"], Json::Null);
        assert!(parsed(&s).is_ok());
    }
}
