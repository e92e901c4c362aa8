//! One record ready for a producer.

use std::borrow::Cow;
use std::fmt;

use super::registry_schema::PendingSchemas;

/// Header: the pipeline that produced the record.
pub const HEADER_PIPELINE: &str = "capstan.pipeline";
/// Header: the owner epoch (decimal) of the worker that produced the record.
pub const HEADER_EPOCH: &str = "capstan.epoch";
/// Header: the source position of the record: the transaction's GTID, or `snapshot:<chunk>`
/// for a snapshot row.
pub const HEADER_POSITION: &str = "capstan.position";
/// Header: the index (decimal, from 0) of the row within its transaction or snapshot chunk.
pub const HEADER_ROW: &str = "capstan.row";
/// Header: the index (decimal, from 0) of the record among all records produced from the same
/// transaction or chunk. `(pipeline, position, record)` identifies a record: a consumer that
/// sees the triple twice has seen a duplicate.
pub const HEADER_RECORD: &str = "capstan.record";

/// Header (Debezium's): on the delete event (and its tombstone) of an update that changed the
/// key, the new key, as the JSON the record key of the matching create event carries.
pub const HEADER_DEBEZIUM_NEWKEY: &str = "__debezium.newkey";
/// Header (Debezium's): on the create event of an update that changed the key, the old key.
pub const HEADER_DEBEZIUM_OLDKEY: &str = "__debezium.oldkey";

/// One Kafka record: topic, optional key, optional value (none = tombstone), headers and a
/// create timestamp.
///
/// `Debug` shows topic, headers and sizes, never the key or value bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Destination topic.
    pub topic: String,
    /// Key bytes (JSON), `None` for a keyless table.
    pub key: Option<Vec<u8>>,
    /// Value bytes (JSON), `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers, in order (capstan's names are static: not copied per record).
    pub headers: Vec<(Cow<'static, str>, Vec<u8>)>,
    /// Create timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
    /// `format: avro`: the registry schemas whose ids the key and value (Avro datums) still
    /// need; the runtime frames them and clears this before the record is sent. `None` for a
    /// record ready to send.
    pub registry: Option<PendingSchemas>,
}

impl KafkaRecord {
    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The headers with owned names, as a consumer reads them back.
    pub fn headers_owned(&self) -> Vec<(String, Vec<u8>)> {
        self.headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    /// The value of header `name` as text, if present and UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// An upper bound of the size librdkafka compares with `message.max.bytes`: the record's
    /// v2 wire size (key, value, each header with its length prefixes, and the record's own
    /// fields at their largest).
    pub fn max_wire_size(&self) -> usize {
        /// Length, attributes, timestamp and offset deltas, key and value lengths, header count.
        const RECORD_OVERHEAD: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;
        /// A header's two length prefixes.
        const HEADER_OVERHEAD: usize = 5 + 5;
        RECORD_OVERHEAD
            + self.approximate_size()
            + self.headers.len() * HEADER_OVERHEAD
            + self
                .registry
                .as_ref()
                .map_or(0, PendingSchemas::framing_bytes)
    }

    /// Approximate size on the wire (key + value + headers), for batching decisions.
    pub fn approximate_size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>()
    }
}

impl fmt::Debug for KafkaRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, Option<&str>)> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_ref(), std::str::from_utf8(v).ok()))
            .collect();
        f.debug_struct("KafkaRecord")
            .field("topic", &self.topic)
            .field("key_len", &self.key.as_ref().map(Vec::len))
            .field("value_len", &self.value.as_ref().map(Vec::len))
            .field("headers", &headers)
            .field("timestamp_ms", &self.timestamp_ms)
            .field("registry", &self.registry)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_key_and_value() {
        let r = KafkaRecord {
            topic: "t".into(),
            key: Some(b"{\"id\":\"secret-key\"}".to_vec()),
            value: Some(b"secret-value".to_vec()),
            headers: vec![(HEADER_ROW.into(), b"3".to_vec())],
            timestamp_ms: None,
            registry: None,
        };
        let s = format!("{r:?}");
        assert!(!s.contains("secret"), "{s}");
        assert_eq!(r.header_str(HEADER_ROW), Some("3"));
    }
}
