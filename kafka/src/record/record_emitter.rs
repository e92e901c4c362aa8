//! The per-call state of [`super::RecordBuilder`]: records so far, the header values they all
//! share, the counters of the `transaction` block; and the row-image → JSON helpers that turn
//! value failures into value-free errors.

use std::borrow::Cow;

use capstan_core::change::{ColumnTypes, Row, TableId};

use super::charset_decoder::DecodeFailure;
use super::envelope::{Cell, OrderedObject};
use super::json_value::ValueFailure;
use super::kafka_record::{
    KafkaRecord, HEADER_EPOCH, HEADER_PIPELINE, HEADER_POSITION, HEADER_RECORD, HEADER_ROW,
};
use super::record_builder::RecordContext;
use super::registry_schema::PendingSchemas;
use super::topic_router::PHYSICAL_TABLE_KEY_FIELD;
use super::value_encoding::ValueEncoding;
use crate::SinkError;

/// Where the records of a transaction handed out in parts stand after the parts so far: the
/// record count (the `capstan.record` header goes on from it) and the counters of the
/// `transaction` block. A fresh one (`Default`) for each transaction. Serializable: an
/// exactly-once offsets record carries it, so a new owner numbers the rest of a transaction
/// committed in slices as the old one would have.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransactionProgress {
    records: usize,
    total_order: u64,
    collections: Vec<(String, u64)>,
    /// A part with changes was emitted (and its BEGIN, with a transaction topic).
    pub(super) begun: bool,
    /// The table of the first change: the END event is serialized for it.
    #[serde(with = "shared_table")]
    pub(super) table: Option<std::sync::Arc<TableId>>,
}

/// `Option<Arc<TableId>>` as an optional table (serde's `rc` feature is not enabled).
mod shared_table {
    use std::sync::Arc;

    use capstan_core::change::TableId;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        table: &Option<Arc<TableId>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        table.as_deref().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Arc<TableId>>, D::Error> {
        Ok(Option::<TableId>::deserialize(d)?.map(Arc::new))
    }
}

/// A record's key, value (none: a tombstone) and the registry schemas they still need.
pub(super) type Payload = (Option<Vec<u8>>, Option<Vec<u8>>, Option<PendingSchemas>);

/// Per-call state: the records so far, the header values shared by all of them, and the
/// running counters of the `transaction` block.
pub(super) struct Emitter<'a> {
    pub(super) ctx: RecordContext<'a>,
    position: String,
    /// The epoch as the header carries it (decimal), formatted once.
    epoch: Vec<u8>,
    pub(super) records: Vec<KafkaRecord>,
    /// Records of the same transaction emitted by earlier calls (its earlier parts).
    earlier: usize,
    pub(super) total_order: u64,
    pub(super) collections: Vec<(String, u64)>,
    /// The producer's `message.max.bytes`: a larger record is refused here, by name.
    max_record_bytes: usize,
}

impl<'a> Emitter<'a> {
    pub(super) fn new(ctx: RecordContext<'a>, position: String, max_record_bytes: usize) -> Self {
        Emitter {
            epoch: ctx.epoch.to_string().into_bytes(),
            ctx,
            position,
            max_record_bytes,
            records: Vec::new(),
            earlier: 0,
            total_order: 0,
            collections: Vec::new(),
        }
    }

    /// Goes on where the earlier parts of the same transaction left off.
    pub(super) fn resume(mut self, progress: &mut TransactionProgress) -> Self {
        self.earlier = progress.records;
        self.total_order = progress.total_order;
        self.collections = std::mem::take(&mut progress.collections);
        self
    }

    /// Records where this call leaves off, for the next part, and returns the records.
    pub(super) fn finish(self, progress: &mut TransactionProgress) -> Vec<KafkaRecord> {
        progress.records = self.earlier + self.records.len();
        progress.total_order = self.total_order;
        progress.collections = self.collections;
        self.records
    }

    fn headers(&self, row: Option<usize>) -> Vec<(Cow<'static, str>, Vec<u8>)> {
        // capstan's five, and a key change's header: one allocation for the list
        let mut h = Vec::with_capacity(6);
        h.extend([
            (
                HEADER_PIPELINE.into(),
                self.ctx.pipeline.as_bytes().to_vec(),
            ),
            (HEADER_EPOCH.into(), self.epoch.clone()),
            (HEADER_POSITION.into(), self.position.as_bytes().to_vec()),
        ]);
        if let Some(row) = row {
            h.push((HEADER_ROW.into(), row.to_string().into_bytes()));
        }
        h.push((
            HEADER_RECORD.into(),
            (self.earlier + self.records.len()).to_string().into_bytes(),
        ));
        h
    }

    /// Adds a record of `table`; one Kafka would refuse for its size (the producer's
    /// `message.max.bytes`, checked as librdkafka does) is an error naming the table, the
    /// topic and both sizes, never a retried delivery.
    pub(super) fn push(
        &mut self,
        table: &TableId,
        topic: &str,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        row: Option<usize>,
        ts: u64,
    ) -> Result<(), SinkError> {
        self.push_with_header(table, topic, (key, value, None), row, ts, None)
    }

    /// [`Self::push`] of a key, a value and the registry schemas they still need, with one
    /// more header after capstan's own (a key change's `__debezium.oldkey` /
    /// `__debezium.newkey`).
    pub(super) fn push_with_header(
        &mut self,
        table: &TableId,
        topic: &str,
        (key, value, registry): Payload,
        row: Option<usize>,
        ts: u64,
        extra: Option<(&'static str, Vec<u8>)>,
    ) -> Result<(), SinkError> {
        let mut headers = self.headers(row);
        if let Some((name, v)) = extra {
            headers.push((name.into(), v));
        }
        let record = KafkaRecord {
            topic: topic.to_string(),
            key,
            value,
            headers,
            timestamp_ms: i64::try_from(ts).ok(),
            registry,
        };
        let bytes = record.max_wire_size();
        if bytes > self.max_record_bytes {
            return Err(SinkError::RecordTooLarge {
                table: table.to_string(),
                topic: topic.to_string(),
                bytes,
                limit: self.max_record_bytes,
            });
        }
        self.records.push(record);
        Ok(())
    }

    /// The room a record value is serialised into to start with: a little over the last
    /// value, so a run of like records is written without growing the buffer.
    pub(super) fn value_capacity(&self) -> usize {
        self.records
            .iter()
            .rev()
            .find_map(|r| r.value.as_ref())
            .map_or(256, |v| v.len() + v.len() / 8 + 16)
    }

    /// Counts one data event of `table`; returns (total_order, data_collection_order).
    pub(super) fn count(&mut self, table: &TableId) -> (u64, u64) {
        self.total_order += 1;
        // `schema.table`, compared without formatting it per event
        let named = |c: &str| {
            c.strip_prefix(table.schema.as_str())
                .and_then(|rest| rest.strip_prefix('.'))
                == Some(table.table.as_str())
        };
        let n = match self.collections.iter_mut().find(|(c, _)| named(c)) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                self.collections.push((table.to_string(), 1));
                1
            }
        };
        (self.total_order, n)
    }
}

pub(super) fn serialize<T: serde::Serialize>(
    value: &T,
    table: &TableId,
) -> Result<Vec<u8>, SinkError> {
    serialize_sized(value, table, 128)
}

/// [`serialize`] into a buffer of `capacity` bytes to start with.
pub(super) fn serialize_sized<T: serde::Serialize>(
    value: &T,
    table: &TableId,
    capacity: usize,
) -> Result<Vec<u8>, SinkError> {
    let mut buffer = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut buffer, value).map_err(|_| SinkError::MalformedChange {
        table: table.to_string(),
        reason: "event could not be serialised",
    })?;
    // a small value after a large one gives back the room it did not use: the byte budgets
    // count lengths, so what a record holds stays near its length
    if buffer.capacity() > 2 * buffer.len() + 1024 {
        buffer.shrink_to_fit();
    }
    Ok(buffer)
}

fn value_error(failure: ValueFailure, table: &TableId, column: &str) -> SinkError {
    let (table, column) = (table.to_string(), column.to_string());
    match failure {
        ValueFailure::NonFinite => SinkError::NonFiniteNumber { table, column },
        ValueFailure::Text(DecodeFailure::Unsupported(charset)) => SinkError::UnsupportedCharset {
            table,
            column,
            charset,
        },
        ValueFailure::Text(DecodeFailure::Invalid(charset)) => SinkError::InvalidText {
            table,
            column,
            charset,
        },
    }
}

/// A row image as an ordered JSON object.
pub(super) fn image<'r>(
    row: &'r Row,
    table: &TableId,
    encoding: &ValueEncoding,
    types: Option<&ColumnTypes>,
) -> Result<OrderedObject<'r>, SinkError> {
    row.iter()
        .enumerate()
        .map(|(i, (name, v))| {
            encoding
                .encode_cell(v, types.and_then(|t| t.get(i)))
                .map(|j| (name, j))
                .map_err(|f| value_error(f, table, name))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(OrderedObject)
}

/// The key object of a row (`None` for a keyless table). A `routed` row's key ends with
/// [`PHYSICAL_TABLE_KEY_FIELD`]: its table, so the shards of a routed topic keep their keys
/// apart.
pub(super) fn key_object<'r>(
    row: &'r Row,
    key: &[usize],
    table: &TableId,
    encoding: &ValueEncoding,
    types: Option<&ColumnTypes>,
    routed: bool,
) -> Result<Option<OrderedObject<'r>>, SinkError> {
    if key.is_empty() {
        return Ok(None);
    }
    let mut pairs = Vec::with_capacity(key.len());
    for &i in key {
        let (Some(name), Some(v)) = (row.columns().get(i), row.get(i)) else {
            return Err(SinkError::MalformedChange {
                table: table.to_string(),
                reason: "key column index out of range",
            });
        };
        let j = encoding
            .encode_cell(v, types.and_then(|t| t.get(i)))
            .map_err(|f| value_error(f, table, name))?;
        pairs.push((name.as_str(), j));
    }
    if routed {
        pairs.push((
            PHYSICAL_TABLE_KEY_FIELD,
            Cell::Json(serde_json::Value::String(table.to_string())),
        ));
    }
    Ok(Some(OrderedObject(pairs)))
}

pub(super) fn missing(table: &TableId, reason: &'static str) -> SinkError {
    SinkError::MalformedChange {
        table: table.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_holds_about_its_length_whatever_room_it_was_given() {
        let table = TableId::new("s", "t");
        let small = serialize_sized(&"x", &table, 1 << 20).unwrap();
        assert_eq!(small, b"\"x\"");
        assert!(
            small.capacity() <= 2 * small.len() + 1024,
            "{}",
            small.capacity()
        );
        let text = "y".repeat(5000);
        let large = serialize_sized(&text, &table, 5200).unwrap();
        assert_eq!(large.len(), 5002);
        assert_eq!(
            large.capacity(),
            5200,
            "room a little over the length is kept"
        );
    }
}
