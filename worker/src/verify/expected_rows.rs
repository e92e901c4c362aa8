//! [`ExpectedRows`]: what a table's topic should hold, per key, built from the records the
//! product's own record builder makes of the table's current rows (`op: "r"`, as a snapshot
//! would publish them). Pure: it keeps the digest of each row's identity and of its `after`
//! image, nothing else.

use std::collections::HashMap;

use serde_json::Value;

use super::row_digest::{row_identity, Digest};
use super::verify_error::VerifyError;

/// Per key, the digest of the `after` image the source holds.
#[derive(Debug, Default)]
pub struct ExpectedRows {
    rows: HashMap<Digest, Digest>,
}

impl ExpectedRows {
    /// Adds one record built from a source row. `key_columns` names the columns that identify
    /// a row without a record key. A record the builder made is always a keyed row event: a
    /// refusal here is a bug, reported naming the table.
    pub fn add(
        &mut self,
        table: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        key_columns: &[String],
    ) -> Result<(), VerifyError> {
        let bad = |reason: &'static str| VerifyError::SourceRecord {
            table: table.to_string(),
            reason,
        };
        let value: Value = value
            .and_then(|v| serde_json::from_slice(v).ok())
            .ok_or_else(|| bad("the record builder made a record without a json value"))?;
        let after = value
            .get("after")
            .filter(|a| a.is_object())
            .ok_or_else(|| bad("the record builder made a record without an after image"))?;
        let identity = row_identity(key, Some(after), key_columns)
            .ok_or_else(|| bad("a source row has no key to identify it by"))?;
        if self.rows.insert(identity, Digest::of_json(after)).is_some() {
            return Err(bad("two source rows have one key"));
        }
        Ok(())
    }

    /// Rows read.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The `after` digest of each key.
    pub fn rows(&self) -> &HashMap<Digest, Digest> {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(id: i64, note: &str) -> (Vec<u8>, Vec<u8>) {
        let key = json!({"id": id}).to_string().into_bytes();
        let value = json!({"before": null, "after": {"id": id, "note": note},
                           "source": {"ts_ms": 5}, "op": "r", "ts_ms": 6})
        .to_string()
        .into_bytes();
        (key, value)
    }

    #[test]
    fn keeps_one_after_digest_per_key() {
        let mut e = ExpectedRows::default();
        let cols = vec!["id".to_string()];
        for (id, note) in [(1, "a"), (2, "b")] {
            let (k, v) = record(id, note);
            e.add("db.t", Some(&k), Some(&v), &cols).unwrap();
        }
        assert_eq!(e.len(), 2);
        let key = Digest::of_json(&json!({"id": 2}));
        assert_eq!(
            e.rows().get(&key),
            Some(&Digest::of_json(&json!({"note": "b", "id": 2})))
        );
        let (k, v) = record(2, "again");
        let err = e.add("db.t", Some(&k), Some(&v), &cols).err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some("db.t: two source rows have one key".to_string())
        );
    }

    #[test]
    fn a_table_without_a_record_key_is_identified_by_its_key_columns() {
        let mut e = ExpectedRows::default();
        let (_, v) = record(3, "c");
        e.add("db.t", None, Some(&v), &["id".to_string()]).unwrap();
        assert!(e.rows().contains_key(&Digest::of_json(&json!({"id": 3}))));
        assert!(e.add("db.t", None, Some(&v), &[]).is_err());
    }
}
