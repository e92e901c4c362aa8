//! Kafka Connect schemas of the `debezium_json_schema` format: what Debezium's MySQL connector
//! declares for each column type under a [`TypeMapping`] (its logical names
//! `io.debezium.time.*`, `io.debezium.data.*`, `org.apache.kafka.connect.data.Decimal` …),
//! and the key, row and envelope structs around them, as `JsonConverter` writes schemas with
//! `schemas.enable=true`. Pure: column types in, schema JSON out.

use capstan_core::change::{ColumnType, SqlType, Value};
use capstan_core::position::Flavor;
use serde_json::{json, Map, Value as Json};

use super::type_mapping::{BinaryHandling, DecimalHandling, TimePrecision, TypeMapping};

/// The `allowed` values of `source.snapshot` (Debezium's `io.debezium.data.Enum`).
const SNAPSHOT_VALUES: &str =
    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental";

/// One field of a struct schema: `schema` with `"field": name` added.
fn field(name: &str, schema: Json) -> Json {
    let mut schema = schema;
    if let Json::Object(m) = &mut schema {
        m.insert("field".into(), Json::String(name.to_string()));
    }
    schema
}

/// A primitive schema.
fn primitive(kind: &str, optional: bool) -> Json {
    json!({"type": kind, "optional": optional})
}

/// A logical (named) schema.
fn logical(kind: &str, optional: bool, name: &str, parameters: Option<Map<String, Json>>) -> Json {
    let mut m = Map::new();
    m.insert("type".into(), Json::from(kind));
    m.insert("optional".into(), Json::Bool(optional));
    m.insert("name".into(), Json::from(name));
    m.insert("version".into(), Json::from(1));
    if let Some(p) = parameters {
        m.insert("parameters".into(), Json::Object(p));
    }
    Json::Object(m)
}

fn params(pairs: &[(&str, String)]) -> Map<String, Json> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), Json::String(v.clone())))
        .collect()
}

/// The Connect schema Debezium's MySQL connector declares for a column of type `ty`.
pub(crate) fn column_schema(ty: &ColumnType, mapping: &TypeMapping) -> Json {
    let opt = ty.nullable;
    let time = mapping.time_precision_mode;
    match &ty.sql {
        SqlType::Int { .. } if mapping.bigint_as_decimal(ty) => logical(
            "bytes",
            opt,
            "org.apache.kafka.connect.data.Decimal",
            // 2^64 - 1 has 20 digits
            Some(params(&[
                ("scale", "0".to_string()),
                ("connect.decimal.precision", "20".to_string()),
            ])),
        ),
        SqlType::Int { bytes, unsigned } => primitive(
            match (bytes, unsigned) {
                (1, _) | (2, false) => "int16",
                (2, true) | (3, _) | (4, false) => "int32",
                _ => "int64",
            },
            opt,
        ),
        SqlType::Decimal { precision, scale } => match mapping.decimal_handling_mode {
            DecimalHandling::Precise => logical(
                "bytes",
                opt,
                "org.apache.kafka.connect.data.Decimal",
                Some(params(&[
                    ("scale", scale.to_string()),
                    ("connect.decimal.precision", precision.to_string()),
                ])),
            ),
            DecimalHandling::String => primitive("string", opt),
            DecimalHandling::Double => primitive("double", opt),
        },
        // Debezium's MySQL connector declares FLOAT as Connect's FLOAT32, DOUBLE as FLOAT64
        SqlType::Float => primitive("float", opt),
        SqlType::Double => primitive("double", opt),
        SqlType::Text => primitive("string", opt),
        SqlType::Bytes => match mapping.binary_handling_mode {
            BinaryHandling::Bytes => primitive("bytes", opt),
            _ => primitive("string", opt),
        },
        SqlType::Date => match time {
            TimePrecision::Connect => {
                logical("int32", opt, "org.apache.kafka.connect.data.Date", None)
            }
            TimePrecision::Isostring => logical("string", opt, "io.debezium.time.IsoDate", None),
            _ => logical("int32", opt, "io.debezium.time.Date", None),
        },
        SqlType::Time { .. } => match time {
            TimePrecision::Connect => {
                logical("int32", opt, "org.apache.kafka.connect.data.Time", None)
            }
            TimePrecision::Isostring => logical("string", opt, "io.debezium.time.IsoTime", None),
            _ => logical("int64", opt, "io.debezium.time.MicroTime", None),
        },
        // a zero date is null, so a DATETIME is optional even when declared NOT NULL
        SqlType::DateTime { fsp } => match time {
            TimePrecision::Connect => logical(
                "int64",
                true,
                "org.apache.kafka.connect.data.Timestamp",
                None,
            ),
            TimePrecision::Isostring => {
                logical("string", true, "io.debezium.time.IsoTimestamp", None)
            }
            TimePrecision::AdaptiveTimeMicroseconds if *fsp <= 3 => {
                logical("int64", true, "io.debezium.time.Timestamp", None)
            }
            _ => logical("int64", true, "io.debezium.time.MicroTimestamp", None),
        },
        SqlType::Timestamp { .. } => {
            logical("string", true, "io.debezium.time.ZonedTimestamp", None)
        }
        SqlType::Year => logical("int32", opt, "io.debezium.time.Year", None),
        SqlType::Bit { bits: 1 } => primitive("boolean", opt),
        SqlType::Bit { bits } => logical(
            "bytes",
            opt,
            "io.debezium.data.Bits",
            Some(params(&[("length", bits.to_string())])),
        ),
        SqlType::Enum { members } => logical(
            "string",
            opt,
            "io.debezium.data.Enum",
            Some(params(&[("allowed", members.join(","))])),
        ),
        SqlType::Set { members } => logical(
            "string",
            opt,
            "io.debezium.data.EnumSet",
            Some(params(&[("allowed", members.join(","))])),
        ),
        SqlType::Json => logical("string", opt, "io.debezium.data.Json", None),
        SqlType::Geometry => {
            let mut s = logical("struct", opt, "io.debezium.data.geometry.Geometry", None);
            s["fields"] = json!([
                field("wkb", primitive("bytes", false)),
                field("srid", primitive("int32", true)),
            ]);
            s["doc"] = Json::from("Geometry");
            s
        }
        SqlType::Vector => {
            let mut s = logical("array", opt, "io.debezium.data.FloatVector", None);
            s["items"] = primitive("float", false);
            s
        }
    }
}

/// The column type a value implies, for a column whose declared type the source did not
/// give: nullable, the widest type of its kind (a NULL value reads as text).
pub(crate) fn type_of_value(value: &Value) -> ColumnType {
    let sql = match value {
        Value::Null | Value::Text { .. } => SqlType::Text,
        Value::Int(_) | Value::UInt(_) => SqlType::Int {
            bytes: 8,
            unsigned: false,
        },
        Value::Decimal(s) => SqlType::Decimal {
            precision: 65,
            scale: s
                .split_once('.')
                .map_or(0, |(_, f)| u8::try_from(f.len()).unwrap_or(u8::MAX)),
        },
        Value::Float(_) => SqlType::Float,
        Value::Double(_) => SqlType::Double,
        Value::Bytes(_) => SqlType::Bytes,
        Value::Date(_) => SqlType::Date,
        Value::Time(t) => SqlType::Time { fsp: t.fsp },
        Value::DateTime(dt) => SqlType::DateTime { fsp: dt.fsp },
        Value::Timestamp { fsp, .. } => SqlType::Timestamp { fsp: *fsp },
        Value::Year(_) => SqlType::Year,
        Value::Bit { bits, .. } => SqlType::Bit { bits: *bits },
        Value::Enum(_) => SqlType::Enum {
            members: Vec::new().into(),
        },
        Value::Set(_) => SqlType::Set {
            members: Vec::new().into(),
        },
        Value::Json(_) => SqlType::Json,
        Value::Geometry { .. } => SqlType::Geometry,
        Value::Vector(_) => SqlType::Vector,
    };
    ColumnType {
        sql,
        nullable: true,
    }
}

/// A struct schema of `columns` (name, type), named `name`.
pub(crate) fn row_schema(
    name: &str,
    optional: bool,
    columns: &[(&str, &ColumnType)],
    mapping: &TypeMapping,
) -> Json {
    let fields: Vec<Json> = columns
        .iter()
        .map(|(n, ty)| field(n, column_schema(ty, mapping)))
        .collect();
    json!({"type": "struct", "fields": fields, "optional": optional, "name": name})
}

/// The schema of the `source` block (capstan's fields, typed as in Debezium's
/// `io.debezium.connector.mysql.Source`).
fn source_schema(flavor: Flavor) -> Json {
    let s = |n: &str| field(n, primitive("string", false));
    let mut snapshot = logical(
        "string",
        true,
        "io.debezium.data.Enum",
        Some(params(&[("allowed", SNAPSHOT_VALUES.to_string())])),
    );
    snapshot["default"] = Json::from("false");
    json!({
        "type": "struct",
        "fields": [
            s("version"),
            s("connector"),
            s("name"),
            field("ts_ms", primitive("int64", false)),
            field("snapshot", snapshot),
            s("db"),
            field("table", primitive("string", true)),
            field("server_id", primitive("int64", false)),
            field("gtid", primitive("string", true)),
            s("file"),
            field("pos", primitive("int64", false)),
            field("row", primitive("int32", false)),
        ],
        "optional": false,
        "name": format!("io.debezium.connector.{}.Source", flavor.as_str()),
        "version": 1,
    })
}

/// The envelope schema of a table's change events: `before` and `after` of `row` (a struct
/// schema from [`row_schema`], named `<topic>.Value`), `source`, `transaction`, `op`, `ts_ms`
/// (Debezium's field order),
/// named `<topic>.Envelope` (version 2, as Debezium's).
pub(crate) fn envelope_schema(topic: &str, row: &Json, flavor: Flavor) -> Json {
    let mut optional_row = row.clone();
    optional_row["optional"] = Json::Bool(true);
    json!({
        "type": "struct",
        "fields": [
            field("before", optional_row.clone()),
            field("after", optional_row),
            field("source", source_schema(flavor)),
            field("transaction", json!({
                "type": "struct",
                "fields": [
                    field("id", primitive("string", false)),
                    field("total_order", primitive("int64", false)),
                    field("data_collection_order", primitive("int64", false)),
                ],
                "optional": true,
                "name": "event.block",
                "version": 1,
            })),
            field("op", primitive("string", false)),
            field("ts_ms", primitive("int64", true)),
        ],
        "optional": false,
        "name": format!("{topic}.Envelope"),
        "version": 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(sql: SqlType, nullable: bool) -> ColumnType {
        ColumnType { sql, nullable }
    }

    #[test]
    fn float_is_connects_float32_and_double_its_float64_as_in_debezium() {
        let m = TypeMapping::default();
        assert_eq!(
            column_schema(&ty(SqlType::Float, true), &m),
            json!({"type": "float", "optional": true})
        );
        assert_eq!(
            column_schema(&ty(SqlType::Double, false), &m),
            json!({"type": "double", "optional": false})
        );
    }

    #[test]
    fn integer_widths_follow_debeziums_mysql_mapping() {
        let m = TypeMapping::default();
        let kind = |bytes, unsigned| {
            column_schema(&ty(SqlType::Int { bytes, unsigned }, false), &m)["type"].clone()
        };
        assert_eq!(kind(1, false), "int16");
        assert_eq!(kind(1, true), "int16");
        assert_eq!(kind(2, false), "int16");
        assert_eq!(kind(2, true), "int32");
        assert_eq!(kind(3, false), "int32");
        assert_eq!(kind(4, false), "int32");
        assert_eq!(kind(4, true), "int64");
        assert_eq!(kind(8, false), "int64");
        assert_eq!(kind(8, true), "int64");
    }

    #[test]
    fn logical_types_by_mode() {
        let m = TypeMapping::default();
        assert_eq!(
            column_schema(
                &ty(
                    SqlType::Decimal {
                        precision: 10,
                        scale: 2
                    },
                    true
                ),
                &m
            ),
            json!({"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
                   "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"}})
        );
        assert_eq!(
            column_schema(&ty(SqlType::DateTime { fsp: 3 }, false), &m)["name"],
            "io.debezium.time.Timestamp"
        );
        assert_eq!(
            column_schema(&ty(SqlType::DateTime { fsp: 6 }, false), &m)["name"],
            "io.debezium.time.MicroTimestamp"
        );
        let connect = TypeMapping {
            time_precision_mode: TimePrecision::Connect,
            ..m
        };
        assert_eq!(
            column_schema(&ty(SqlType::Time { fsp: 0 }, false), &connect),
            json!({"type": "int32", "optional": false, "name": "org.apache.kafka.connect.data.Time", "version": 1})
        );
        assert_eq!(
            column_schema(&ty(SqlType::Bit { bits: 12 }, false), &m)["parameters"],
            json!({"length": "12"})
        );
        assert_eq!(
            column_schema(&ty(SqlType::Bit { bits: 1 }, false), &m)["type"],
            "boolean"
        );
        let members: std::sync::Arc<[String]> = vec!["a".to_string(), "b".to_string()].into();
        assert_eq!(
            column_schema(&ty(SqlType::Enum { members }, true), &m)["parameters"]["allowed"],
            "a,b"
        );
    }
}
