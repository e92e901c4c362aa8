//! Request bodies: JSON parsed by hand so that every failure is a 400 `{error_code, message,
//! field}` naming the field, whatever the content type, and never echoing a value.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::api_error::ApiError;

/// The largest request body the API reads (axum's default, stated): a pipeline definition is
/// further bounded by the Raft entry limit (1 MiB as json, `command_too_large`).
pub const BODY_LIMIT: usize = 2 << 20;

/// The body, or 413 `request_too_large` when it is over [`BODY_LIMIT`] (400 when it could not
/// be read at all).
pub(crate) fn read(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                format!("the request body is over the limit of {BODY_LIMIT} bytes"),
            )
        } else {
            ApiError::bad_request("unreadable_body", "the request body could not be read")
        }
    })
}

/// Parses `bytes` as a JSON document (any shape).
pub(crate) fn parse_value(bytes: &[u8]) -> Result<serde_json::Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "invalid_json",
            "the request body is empty; send a json document",
        )
        .with_field("(root)"));
    }
    // serde_json's syntax errors give a line and column and never quote the input
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("the request body is not valid json: {e}"),
        )
        .with_field("(root)")
    })
}

/// Parses `bytes` as a `T`: unknown keys, wrong types and missing fields name the field. A
/// top-level array is refused: serde would read it as a struct's fields in order
/// (`[true]` as `{"dry_run": true}`), which no request body of the API means.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut value = parse_value(bytes)?;
    if value.is_array() {
        return Err(ApiError::invalid_field(
            "invalid_request",
            "(root)",
            "must be a json object, not an array",
        ));
    }
    whole_floats_as_integers(&mut value);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "(root)".to_string()
        } else {
            path
        };
        ApiError::invalid_field("invalid_request", &field, redact(&e.inner().to_string()))
    })
}

/// JSON does not tell `4` from `4.0` (nor does the OpenAPI document: both are integers), but
/// serde refuses a float for an integer field: every float without a fraction that fits an
/// integer becomes one.
fn whole_floats_as_integers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 {
                if (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                    *value = Value::from(f as u64);
                } else if (-9_223_372_036_854_775_808.0..0.0).contains(&f) {
                    *value = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_floats_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_floats_as_integers),
        _ => {}
    }
}

/// serde's messages quote offending values (`string "…"`, ``integer `…` ``); keep only their
/// type. Names (unknown fields, expected variants) stay.
pub fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    loop {
        let quote = rest.find('"');
        let tick = ["integer `", "floating point `", "character `", "boolean `"]
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i + p.len() - 1, '`')))
            .min();
        let next = match (quote, tick) {
            (Some(q), Some((t, _))) if t < q => Some((t, '`')),
            (Some(q), _) => Some((q, '"')),
            (None, t) => t,
        };
        let Some((start, delim)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        match rest[start + 1..].find(delim) {
            Some(end) => {
                out.push_str("<redacted>");
                rest = &rest[start + 1 + end + 1..];
            }
            None => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Probe {
        id: u64,
        addr: String,
    }

    #[test]
    fn failures_name_the_field_and_hide_values() {
        let e = parse::<Probe>(br#"{"id": "hunter2", "addr": "x"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("id"));
        assert!(!e.message.contains("hunter2"), "{e}");
        let e = parse::<Probe>(br#"{"id": 1, "addr": 31337}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("addr"));
        assert!(!e.message.contains("31337"), "{e}");
        let e = parse::<Probe>(br#"{"id": 1, "addr": "x", "zzz": 1}"#).unwrap_err();
        assert!(e.message.contains("zzz"), "{e}");
        let e = parse::<Probe>(br#"{"id": 1}"#).unwrap_err();
        assert!(e.message.contains("addr"), "{e}");
        let e = parse::<Probe>(br#"{"id": 1, "#).unwrap_err();
        assert_eq!(e.error_code, "invalid_json");
        let e = parse::<Probe>(b"  ").unwrap_err();
        assert_eq!(e.error_code, "invalid_json");
        // serde would take an array for the fields in order
        let e = parse::<Probe>(br#"[1, "x"]"#).unwrap_err();
        assert_eq!(
            (e.error_code.as_str(), e.field.as_deref()),
            ("invalid_request", Some("(root)"))
        );
    }

    #[test]
    fn whole_floats_are_integers() {
        let p = parse::<Probe>(br#"{"id": 4.0, "addr": "x"}"#).unwrap();
        assert_eq!(p.id, 4);
        let e = parse::<Probe>(br#"{"id": 4.5, "addr": "x"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("id"));
        let e = parse::<Probe>(br#"{"id": -1.0, "addr": "x"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("id"));
    }

    #[test]
    fn redaction_keeps_names() {
        assert_eq!(
            redact("unknown field `pasword`, expected one of `host`, `port`"),
            "unknown field `pasword`, expected one of `host`, `port`"
        );
        assert_eq!(
            redact("invalid type: string \"s3cret\", expected u16"),
            "invalid type: string <redacted>, expected u16"
        );
    }
}
