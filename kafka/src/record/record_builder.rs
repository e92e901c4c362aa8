//! Transactions and snapshot chunks → Kafka records. Pure: no I/O, no clock (the caller
//! passes `now_ms`), so the same input always gives the same bytes.
//!
//! Per change of a streamed transaction, in binlog order:
//!
//! - insert → `c`; update → `u`; delete → `d`, then a tombstone (same key, null value) when
//!   tombstones are on and the table has a key;
//! - an update that changes the primary key → `d` (old key) + tombstone + `c` (new key), so a
//!   compacted topic forgets the old key.
//!
//! With a transaction topic configured, a `BEGIN` event precedes and an `END` event (event
//! counts per data collection) follows the transaction's data events. A transaction with no
//! changes produces no records at all.

use std::sync::Arc;

use capstan_core::change::{Change, Op, Row, TableId, Transaction};
use capstan_core::position::Flavor;

use super::charset_decoder::DecodeFailure;
use super::envelope::{
    DataCollectionCount, Envelope, OrderedObject, Source, TransactionBlock, TransactionEvent,
    TransactionKey,
};
use super::json_value::{json_value, ValueFailure};
use super::kafka_record::{
    KafkaRecord, HEADER_EPOCH, HEADER_PIPELINE, HEADER_POSITION, HEADER_RECORD, HEADER_ROW,
};
use super::topic_template::TopicTemplate;
use crate::SinkError;

/// `source.version` of every event.
pub const SOURCE_VERSION: &str = concat!("capstan-", env!("CARGO_PKG_VERSION"));

/// The record-shaping settings of one pipeline (checked; see `config::SinkConfig`).
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Topic naming; its prefix is also `source.name`.
    pub topics: TopicTemplate,
    /// The source flavour (`source.connector` is `mysql` or `mariadb`).
    pub flavor: Flavor,
    /// Emit a tombstone after each delete (and after the delete half of a key change).
    pub tombstones_on_delete: bool,
    /// The transaction-metadata topic, when enabled.
    pub transaction_topic: Option<String>,
}

/// Who is publishing, and when: inputs that are not part of the change itself.
#[derive(Clone, Copy, Debug)]
pub struct RecordContext<'a> {
    /// Pipeline name (the `capstan.pipeline` header).
    pub pipeline: &'a str,
    /// The owner epoch of this worker (the `capstan.epoch` header).
    pub epoch: u64,
    /// Processing time, milliseconds since the Unix epoch (top-level `ts_ms`).
    pub now_ms: u64,
}

/// Where in the source's binlog the data came from (`source.server_id`, `file`, `pos`).
#[derive(Clone, Copy, Debug)]
pub struct BinlogCoordinates<'a> {
    /// The originating server id.
    pub server_id: u32,
    /// The binlog file name (empty when unknown).
    pub file: &'a str,
    /// The byte position of the transaction (or of the snapshot's read point).
    pub pos: u64,
}

/// The rows of one snapshot chunk of one table.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotChunk<'a> {
    /// The table.
    pub table: &'a TableId,
    /// Primary-key column indexes, in key order (empty for a keyless table).
    pub key: &'a [usize],
    /// The rows, in primary-key order.
    pub rows: &'a [Row],
    /// A stable identity of the chunk (for the `capstan.position` header: `snapshot:<id>`).
    pub chunk_id: &'a str,
    /// The binlog coordinates of the snapshot's read point.
    pub coordinates: BinlogCoordinates<'a>,
    /// True for the last chunk of the whole snapshot: its last row says `snapshot: "last"`.
    pub last_of_snapshot: bool,
}

/// Maps transactions and snapshot chunks to Kafka records.
#[derive(Clone, Debug)]
pub struct RecordBuilder {
    options: RecordOptions,
}

/// Per-call state: the records so far, the header values shared by all of them, and the
/// running counters of the `transaction` block.
struct Emitter<'a> {
    ctx: RecordContext<'a>,
    position: String,
    records: Vec<KafkaRecord>,
    total_order: u64,
    collections: Vec<(String, u64)>,
}

impl<'a> Emitter<'a> {
    fn new(ctx: RecordContext<'a>, position: String) -> Self {
        Emitter {
            ctx,
            position,
            records: Vec::new(),
            total_order: 0,
            collections: Vec::new(),
        }
    }

    fn headers(&self, row: Option<usize>) -> Vec<(String, Vec<u8>)> {
        let mut h = vec![
            (
                HEADER_PIPELINE.to_string(),
                self.ctx.pipeline.as_bytes().to_vec(),
            ),
            (
                HEADER_EPOCH.to_string(),
                self.ctx.epoch.to_string().into_bytes(),
            ),
            (
                HEADER_POSITION.to_string(),
                self.position.as_bytes().to_vec(),
            ),
        ];
        if let Some(row) = row {
            h.push((HEADER_ROW.to_string(), row.to_string().into_bytes()));
        }
        h.push((
            HEADER_RECORD.to_string(),
            self.records.len().to_string().into_bytes(),
        ));
        h
    }

    fn push(
        &mut self,
        topic: &str,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        row: Option<usize>,
        ts: u64,
    ) {
        let headers = self.headers(row);
        self.records.push(KafkaRecord {
            topic: topic.to_string(),
            key,
            value,
            headers,
            timestamp_ms: i64::try_from(ts).ok(),
        });
    }

    /// Counts one data event of `collection`; returns (total_order, data_collection_order).
    fn count(&mut self, collection: &str) -> (u64, u64) {
        self.total_order += 1;
        let n = match self.collections.iter_mut().find(|(c, _)| c == collection) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                self.collections.push((collection.to_string(), 1));
                1
            }
        };
        (self.total_order, n)
    }
}

fn serialize<T: serde::Serialize>(value: &T, table: &TableId) -> Result<Vec<u8>, SinkError> {
    serde_json::to_vec(value).map_err(|_| SinkError::MalformedChange {
        table: table.to_string(),
        reason: "event could not be serialised",
    })
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
fn image(row: &Row, table: &TableId) -> Result<OrderedObject, SinkError> {
    row.iter()
        .map(|(name, v)| {
            json_value(v)
                .map(|j| (name.to_string(), j))
                .map_err(|f| value_error(f, table, name))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(OrderedObject)
}

/// The key object of a row (`None` for a keyless table).
fn key_object(
    row: &Row,
    key: &[usize],
    table: &TableId,
) -> Result<Option<OrderedObject>, SinkError> {
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
        let j = json_value(v).map_err(|f| value_error(f, table, name))?;
        pairs.push((name.clone(), j));
    }
    Ok(Some(OrderedObject(pairs)))
}

fn missing(table: &TableId, reason: &'static str) -> SinkError {
    SinkError::MalformedChange {
        table: table.to_string(),
        reason,
    }
}

/// One data event to emit (borrowing the images).
struct Event<'e> {
    op: &'static str,
    before: Option<&'e OrderedObject>,
    after: Option<&'e OrderedObject>,
    key: Option<&'e OrderedObject>,
}

impl RecordBuilder {
    /// A builder for checked options.
    pub fn new(options: RecordOptions) -> Self {
        RecordBuilder { options }
    }

    /// The options this builder uses.
    pub fn options(&self) -> &RecordOptions {
        &self.options
    }

    /// The topic of `table`.
    pub fn topic_for(&self, table: &TableId) -> Result<String, SinkError> {
        self.options
            .topics
            .render(&table.schema, &table.table)
            .map_err(|reason| SinkError::InvalidTopic {
                table: table.to_string(),
                reason,
            })
    }

    fn connector(&self) -> &'static str {
        self.options.flavor.as_str()
    }

    /// The records of one committed transaction (see the module documentation for the
    /// order). Empty when the transaction has no changes.
    pub fn transaction_records(
        &self,
        tx: &Transaction,
        coordinates: &BinlogCoordinates<'_>,
        ctx: &RecordContext<'_>,
    ) -> Result<Vec<KafkaRecord>, SinkError> {
        if tx.changes.is_empty() {
            return Ok(Vec::new());
        }
        let gtid = tx.gtid.to_string();
        let commit_ms = tx.committed_at_micros / 1000;
        let mut em = Emitter::new(*ctx, gtid.clone());
        if let Some(topic) = &self.options.transaction_topic {
            let key = serialize(&TransactionKey { id: &gtid }, &tx.changes[0].table)?;
            let begin = TransactionEvent {
                status: "BEGIN",
                id: &gtid,
                event_count: None,
                data_collections: None,
                ts_ms: commit_ms,
            };
            let value = serialize(&begin, &tx.changes[0].table)?;
            em.push(topic, Some(key), Some(value), None, commit_ms);
        }
        let mut topics: Vec<(Arc<TableId>, String)> = Vec::new();
        for (row_index, change) in tx.changes.iter().enumerate() {
            let topic = match topics.iter().find(|(t, _)| **t == *change.table) {
                Some((_, topic)) => topic.clone(),
                None => {
                    let topic = self.topic_for(&change.table)?;
                    topics.push((change.table.clone(), topic.clone()));
                    topic
                }
            };
            self.change_records(
                &mut em,
                change,
                &topic,
                row_index,
                &gtid,
                coordinates,
                commit_ms,
            )?;
        }
        if let Some(topic) = &self.options.transaction_topic {
            let table = &tx.changes[0].table;
            let key = serialize(&TransactionKey { id: &gtid }, table)?;
            let end = TransactionEvent {
                status: "END",
                id: &gtid,
                event_count: Some(em.total_order),
                data_collections: Some(
                    em.collections
                        .iter()
                        .map(|(c, n)| DataCollectionCount {
                            data_collection: c.clone(),
                            event_count: *n,
                        })
                        .collect(),
                ),
                ts_ms: commit_ms,
            };
            let value = serialize(&end, table)?;
            em.push(topic, Some(key), Some(value), None, commit_ms);
        }
        Ok(em.records)
    }

    #[allow(clippy::too_many_arguments)]
    fn change_records(
        &self,
        em: &mut Emitter<'_>,
        change: &Change,
        topic: &str,
        row_index: usize,
        gtid: &str,
        coordinates: &BinlogCoordinates<'_>,
        commit_ms: u64,
    ) -> Result<(), SinkError> {
        let table = &*change.table;
        let before = change
            .before
            .as_ref()
            .map(|r| image(r, table))
            .transpose()?;
        let after = change.after.as_ref().map(|r| image(r, table)).transpose()?;
        let before_key = match &change.before {
            Some(r) => key_object(r, &change.key, table)?,
            None => None,
        };
        let after_key = match &change.after {
            Some(r) => key_object(r, &change.key, table)?,
            None => None,
        };
        let mut events: Vec<Event<'_>> = Vec::with_capacity(2);
        match change.op {
            Op::Insert => {
                let after = after
                    .as_ref()
                    .ok_or_else(|| missing(table, "insert without after image"))?;
                events.push(Event {
                    op: "c",
                    before: None,
                    after: Some(after),
                    key: after_key.as_ref(),
                });
            }
            Op::Delete => {
                let before = before
                    .as_ref()
                    .ok_or_else(|| missing(table, "delete without before image"))?;
                events.push(Event {
                    op: "d",
                    before: Some(before),
                    after: None,
                    key: before_key.as_ref(),
                });
            }
            Op::Update => {
                let before = before
                    .as_ref()
                    .ok_or_else(|| missing(table, "update without before image"))?;
                let after = after
                    .as_ref()
                    .ok_or_else(|| missing(table, "update without after image"))?;
                if before_key != after_key {
                    events.push(Event {
                        op: "d",
                        before: Some(before),
                        after: None,
                        key: before_key.as_ref(),
                    });
                    events.push(Event {
                        op: "c",
                        before: None,
                        after: Some(after),
                        key: after_key.as_ref(),
                    });
                } else {
                    events.push(Event {
                        op: "u",
                        before: Some(before),
                        after: Some(after),
                        key: after_key.as_ref(),
                    });
                }
            }
        }
        let collection = table.to_string();
        for event in events {
            let (total_order, collection_order) = em.count(&collection);
            let envelope = Envelope {
                before: event.before,
                after: event.after,
                source: Source {
                    version: SOURCE_VERSION,
                    connector: self.connector(),
                    name: self.options.topics.prefix(),
                    ts_ms: commit_ms,
                    snapshot: "false",
                    db: &table.schema,
                    table: &table.table,
                    server_id: coordinates.server_id,
                    gtid: Some(gtid),
                    file: coordinates.file,
                    pos: coordinates.pos,
                    row: row_index,
                },
                op: event.op,
                ts_ms: em.ctx.now_ms,
                transaction: Some(TransactionBlock {
                    id: gtid,
                    total_order,
                    data_collection_order: collection_order,
                }),
            };
            let key = event.key.map(|k| serialize(k, table)).transpose()?;
            let value = serialize(&envelope, table)?;
            em.push(topic, key.clone(), Some(value), Some(row_index), commit_ms);
            if event.op == "d" && self.options.tombstones_on_delete && key.is_some() {
                em.push(topic, key, None, Some(row_index), commit_ms);
            }
        }
        Ok(())
    }

    /// The records (`op: "r"`) of one snapshot chunk, in row order. No transaction metadata
    /// and no tombstones: a snapshot only reads.
    pub fn snapshot_records(
        &self,
        chunk: &SnapshotChunk<'_>,
        ctx: &RecordContext<'_>,
    ) -> Result<Vec<KafkaRecord>, SinkError> {
        let table = chunk.table;
        let topic = self.topic_for(table)?;
        let mut em = Emitter::new(*ctx, format!("snapshot:{}", chunk.chunk_id));
        let last_row = chunk.rows.len().checked_sub(1);
        for (row_index, row) in chunk.rows.iter().enumerate() {
            let after = image(row, table)?;
            let key = key_object(row, chunk.key, table)?;
            let snapshot = if chunk.last_of_snapshot && Some(row_index) == last_row {
                "last"
            } else {
                "true"
            };
            let envelope = Envelope {
                before: None,
                after: Some(&after),
                source: Source {
                    version: SOURCE_VERSION,
                    connector: self.connector(),
                    name: self.options.topics.prefix(),
                    ts_ms: ctx.now_ms,
                    snapshot,
                    db: &table.schema,
                    table: &table.table,
                    server_id: chunk.coordinates.server_id,
                    gtid: None,
                    file: chunk.coordinates.file,
                    pos: chunk.coordinates.pos,
                    row: row_index,
                },
                op: "r",
                ts_ms: ctx.now_ms,
                transaction: None,
            };
            let key = key.as_ref().map(|k| serialize(k, table)).transpose()?;
            let value = serialize(&envelope, table)?;
            em.push(&topic, key, Some(value), Some(row_index), ctx.now_ms);
        }
        Ok(em.records)
    }
}
