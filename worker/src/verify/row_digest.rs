//! [`Digest`]: 16 bytes of the SHA-256 of a JSON value's canonical text (object keys sorted,
//! no white space), so two encodings of one row image or key compare equal whatever their key
//! order. What `capstan verify` keeps per key instead of the values themselves; a report shows
//! its first 8 bytes in hex, never a value.

use std::fmt;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// 16 bytes of a SHA-256.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 16]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        let full = Sha256::digest(bytes);
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        Digest(out)
    }

    /// The digest of `value`'s canonical text ([`canonical_json`]).
    pub fn of_json(value: &Value) -> Self {
        let mut text = Vec::new();
        canonical_json(value, &mut text);
        Digest::of_bytes(&text)
    }

    /// The first 8 bytes.
    pub fn prefix(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out.copy_from_slice(&self.0[..8]);
        out
    }

    /// The first 8 bytes in hex: 16 characters, what a report shows.
    pub fn short(&self) -> String {
        self.0[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

/// Writes `value` as JSON with every object's keys in byte order and no white space: the same
/// text for the same value, whichever order its keys arrived in.
pub fn canonical_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                canonical_json(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(v, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // serde_json's escaping of a string cannot fail
    match serde_json::to_string(s) {
        Ok(text) => out.extend_from_slice(text.as_bytes()),
        Err(_) => out.extend_from_slice(b"\"\""),
    }
}

/// The identity of a row: the digest of its record key when it has one, else of the key
/// columns taken from its row image (`key_columns`, the table's primary key or the unique
/// key it is read by) — for a table with a primary key both give the same digest, since its
/// record key is exactly the object of those columns. `None` when neither is there.
pub fn row_identity(
    key: Option<&[u8]>,
    image: Option<&Value>,
    key_columns: &[String],
) -> Option<Digest> {
    if let Some(key) = key {
        return Some(match serde_json::from_slice::<Value>(key) {
            Ok(v) => Digest::of_json(&v),
            // not JSON: the bytes themselves are the identity
            Err(_) => Digest::of_bytes(key),
        });
    }
    let image = image?.as_object()?;
    if key_columns.is_empty() {
        return None;
    }
    let mut key = serde_json::Map::new();
    for column in key_columns {
        key.insert(column.clone(), image.get(column)?.clone());
    }
    Some(Digest::of_json(&Value::Object(key)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(v: &Value) -> String {
        let mut out = Vec::new();
        canonical_json(v, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn canonical_text_sorts_keys_at_every_level() {
        let v: Value =
            serde_json::from_str(r#"{"b": [1, {"z": null, "a": "x\"y"}], "a": 1.5, "c": true}"#)
                .unwrap();
        assert_eq!(
            text(&v),
            r#"{"a":1.5,"b":[1,{"a":"x\"y","z":null}],"c":true}"#
        );
        let reordered: Value =
            serde_json::from_str(r#"{"c": true, "a": 1.5, "b": [1, {"a": "x\"y", "z": null}]}"#)
                .unwrap();
        assert_eq!(Digest::of_json(&v), Digest::of_json(&reordered));
        assert_ne!(Digest::of_json(&v), Digest::of_json(&json!({"a": 1.5})));
    }

    #[test]
    fn the_short_form_is_16_hex_characters_of_sha256() {
        let d = Digest::of_json(&json!({"id": 1}));
        assert_eq!(d.short().len(), 16);
        assert_eq!(d, Digest::of_bytes(b"{\"id\":1}"));
        assert_eq!(format!("{d:?}"), d.short());
    }

    #[test]
    fn a_record_key_and_the_key_columns_of_the_image_are_one_identity() {
        let cols = vec!["id".to_string(), "line".to_string()];
        let image = json!({"note": "n", "line": 2, "id": 7});
        let from_key = row_identity(Some(br#"{"id":7,"line":2}"#), None, &cols);
        let from_image = row_identity(None, Some(&image), &cols);
        assert!(from_key.is_some());
        assert_eq!(from_key, from_image);
        // a key that is not JSON is its bytes
        assert_eq!(
            row_identity(Some(b"raw"), None, &cols),
            Some(Digest::of_bytes(b"raw"))
        );
        // no key and an image without the key columns: no identity
        assert_eq!(row_identity(None, Some(&json!({"id": 7})), &cols), None);
        assert_eq!(row_identity(None, None, &cols), None);
        assert_eq!(row_identity(None, Some(&image), &[]), None);
    }
}
