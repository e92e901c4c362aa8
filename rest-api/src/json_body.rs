//! Request bodies: JSON parsed by hand so that every failure is a 400 `{error_code, message,
//! field}` naming the field, whatever the content type, and never echoing a value.

use serde::de::DeserializeOwned;

use crate::api_error::ApiError;

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

/// Parses `bytes` as a `T`: unknown keys, wrong types and missing fields name the field.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value = parse_value(bytes)?;
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

/// serde's messages quote offending values (`string "…"`, ``integer `…` ``); keep only their
/// type. Names (unknown fields, expected variants) stay.
pub(crate) fn redact(message: &str) -> String {
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
