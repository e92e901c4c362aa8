//! One record as a consumer saw it.

use std::fmt;

/// A consumed record. `Debug` shows where it was and its header names, never key or value.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes (`None` for a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers in order (a header without a value has an empty one).
    pub headers: Vec<(String, Vec<u8>)>,
}

impl ConsumedRecord {
    /// The value of header `name` as text, if present and UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

impl fmt::Debug for ConsumedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumedRecord")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .field("key_len", &self.key.as_ref().map(Vec::len))
            .field("value_len", &self.value.as_ref().map(Vec::len))
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}
