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
//!
//! A DDL statement becomes one schema-change event on the topic named after the prefix
//! (Debezium's schema-change topic), keyed by its database.

use std::borrow::Cow;
use std::sync::Arc;

use capstan_core::change::{
    Change, ColumnTypes, Op, Row, SchemaChange, TableId, Transaction, TransactionGtid,
};
use capstan_core::position::Flavor;

use super::connect_schema::type_of_value;
use super::envelope::{
    DataCollectionCount, Envelope, OrderedObject, SchemaChangeEvent, SchemaChangeKey, Source,
    TransactionBlock, TransactionEvent, TransactionKey,
};
use super::kafka_record::{KafkaRecord, HEADER_DEBEZIUM_NEWKEY, HEADER_DEBEZIUM_OLDKEY};
use super::message_key::{key_columns, MessageKeys};
use super::record_emitter::{
    image, key_object, missing, serialize, serialize_sized, Emitter, Payload, TransactionProgress,
};
use super::registry_schema::PendingSchemas;
use super::schema_cache::{build_schemas, framed, SchemaCache, TableSchemas, TableVersion};
use super::schema_framing::SchemaFraming;
use super::table_change::table_changes;
use super::topic_template::TopicTemplate;
use super::type_mapping::TypeMapping;
use super::value_encoding::ValueEncoding;
use crate::SinkError;

/// `capstan.position` of a schema-change event is this prefix followed by the GTID of the
/// statement's transaction: MySQL's atomic `CREATE TABLE … SELECT` writes its rows under the
/// same GTID, and `(pipeline, position, record)` must stay unique.
pub const SCHEMA_CHANGE_POSITION_PREFIX: &str = "ddl:";

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
    /// The producer's `message.max.bytes`: a record larger than this is refused when it is
    /// built, naming its table ([`SinkError::RecordTooLarge`]), instead of failing delivery.
    pub max_record_bytes: usize,
    /// How column values are encoded (the sink's `format` and type mapping).
    pub encoding: ValueEncoding,
    /// The topic of the snapshot-complete markers: a control topic (the default,
    /// `<prefix>.snapshot_complete`), or `None` for each table's own topic (opt-in).
    pub snapshot_marker_topic: Option<String>,
    /// Per table, the columns of its record key instead of the change's or the chunk's key
    /// (`message_key_columns`, Debezium's `message.key.columns`).
    pub message_keys: MessageKeys,
    /// How each key and value carries its schema: not at all, wrapped with its Kafka Connect
    /// schema (`format: debezium_json_schema`, Debezium's JSON converter with
    /// `schemas.enable=true`), or as an Avro datum to be framed with its registry id
    /// (`format: avro`, Debezium's AvroConverter).
    pub schemas: SchemaFraming,
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
    /// The record key's column indexes, in key order: the primary key, else the NOT NULL
    /// unique key the table is read by (empty for a keyless table).
    pub key: &'a [usize],
    /// The rows, in primary-key order.
    pub rows: &'a [Row],
    /// The declared column types of the table (for the schema'd format; `None`: inferred
    /// from the values).
    pub types: Option<&'a ColumnTypes>,
    /// A stable identity of the chunk (for the `capstan.position` header: `snapshot:<id>`).
    pub chunk_id: &'a str,
    /// The binlog coordinates of the snapshot's read point.
    pub coordinates: BinlogCoordinates<'a>,
    /// True for the table's first chunk (read from its start): its first row says
    /// `snapshot: "first_in_data_collection"`.
    pub first_of_table: bool,
    /// True for the first chunk of the first table of the whole snapshot: its first row says
    /// `snapshot: "first"`.
    pub first_of_snapshot: bool,
    /// True for the table's last chunk: its last row says
    /// `snapshot: "last_in_data_collection"`.
    pub last_of_table: bool,
    /// True for the last chunk of the whole snapshot: its last row says `snapshot: "last"`.
    pub last_of_snapshot: bool,
    /// True for a chunk of an ad-hoc (incremental) snapshot: every row says
    /// `snapshot: "incremental"`, as Debezium's incremental snapshots do (the `last*` values
    /// are then not given).
    pub incremental: bool,
}

/// `source.snapshot` of a snapshot read, by Debezium's names: `incremental` for every row of
/// an ad-hoc snapshot; else a last row before a first one (a table of one row is "last"), the
/// whole snapshot before its table.
fn snapshot_flag(chunk: &SnapshotChunk<'_>, first_row: bool, last_row: bool) -> &'static str {
    match (first_row, last_row) {
        _ if chunk.incremental => "incremental",
        (_, true) if chunk.last_of_snapshot => "last",
        (_, true) if chunk.last_of_table => "last_in_data_collection",
        (true, _) if chunk.first_of_snapshot => "first",
        (true, _) if chunk.first_of_table => "first_in_data_collection",
        _ => "true",
    }
}

/// The value of a snapshot-completion marker.
#[derive(serde::Serialize)]
struct SnapshotCompleteValue<'a> {
    snapshot_complete: SnapshotCompleteBody<'a>,
}

#[derive(serde::Serialize)]
struct SnapshotCompleteBody<'a> {
    db: &'a str,
    table: &'a str,
    rows: u64,
}

/// The key of a snapshot-completion marker.
#[derive(serde::Serialize)]
struct SnapshotCompleteKey {
    snapshot_complete: String,
}

/// Maps transactions and snapshot chunks to Kafka records.
#[derive(Clone, Debug)]
pub struct RecordBuilder {
    options: RecordOptions,
    /// The schemas of the table versions seen (schema'd formats only).
    schemas: SchemaCache,
}

/// One data event to emit (borrowing the images).
struct Event<'e> {
    op: &'static str,
    before: Option<&'e OrderedObject<'e>>,
    after: Option<&'e OrderedObject<'e>>,
    key: Option<&'e OrderedObject<'e>>,
    /// A key change's header: the other half's key, under Debezium's header name.
    key_header: Option<(&'static str, &'e OrderedObject<'e>)>,
}

impl RecordBuilder {
    /// A builder for checked options.
    pub fn new(options: RecordOptions) -> Self {
        RecordBuilder {
            options,
            schemas: SchemaCache::default(),
        }
    }

    /// The schemas of a table version in the schema'd formats (`None` in the others):
    /// built once per table version when the source gave the column types, else inferred from
    /// `row`'s values.
    fn table_schemas(
        &self,
        topic: &str,
        row: Option<&Row>,
        types: Option<&ColumnTypes>,
        key: &[usize],
        routed: bool,
    ) -> Option<Arc<TableSchemas>> {
        if self.options.schemas == SchemaFraming::None {
            return None;
        }
        let row = row?;
        let mapping = match self.options.encoding {
            ValueEncoding::Debezium(m) => m,
            ValueEncoding::Capstan => TypeMapping::default(),
        };
        let inferred: ColumnTypes;
        let given = types.is_some();
        let types = match types {
            Some(t) => t,
            None => {
                inferred = row.values().iter().map(type_of_value).collect();
                &inferred
            }
        };
        let version = TableVersion {
            topic,
            columns: row.columns_arc(),
            types,
            key,
            routed,
            flavor: self.options.flavor,
            mapping: &mapping,
            framing: self.options.schemas,
        };
        Some(if given {
            self.schemas.get(&version)
        } else {
            Arc::new(build_schemas(&version))
        })
    }

    /// The key and value bytes of one data event in the pipeline's format, with the registry
    /// schemas they still need (`avro` only).
    fn encode_event(
        &self,
        schemas: Option<&TableSchemas>,
        key: Option<&OrderedObject<'_>>,
        envelope: &Envelope<'_>,
        table: &TableId,
        value_capacity: usize,
    ) -> Result<Payload, SinkError> {
        let Some(avro) = schemas.and_then(|s| s.avro.as_ref()) else {
            let key = key.map(|k| serialize(k, table)).transpose()?;
            let value = serialize_sized(envelope, table, value_capacity)?;
            let (key, value) = framed(schemas, key, value);
            return Ok((key, Some(value), None));
        };
        let failed = |reason: &'static str| SinkError::AvroEncodingFailed {
            table: table.to_string(),
            reason,
        };
        let avro = avro.as_ref().map_err(|r| failed(r))?;
        // written straight from the key and the envelope (no JSON tree in between)
        let key = match (key, &avro.key) {
            (Some(k), Some(subject)) => {
                let datum = subject.datum(k).map_err(failed)?;
                Some((datum, subject.registry.clone()))
            }
            (Some(_), None) => return Err(failed("a key without a key schema")),
            (None, _) => None,
        };
        let value = avro.value.datum(envelope).map_err(failed)?;
        let (key, key_schema) = key.unzip();
        Ok((
            key,
            Some(value),
            Some(PendingSchemas {
                key: key_schema,
                value: Some(avro.value.registry.clone()),
            }),
        ))
    }

    /// How many Connect schemas this builder (and its clones) built, for tests.
    #[cfg(test)]
    pub(crate) fn schemas_built(&self) -> u64 {
        self.schemas.built()
    }

    /// The options this builder uses.
    pub fn options(&self) -> &RecordOptions {
        &self.options
    }

    /// The topic of `table`: its routing rule's, else the template's.
    pub fn topic_for(&self, table: &TableId) -> Result<String, SinkError> {
        self.destination(table).map(|(topic, _)| topic)
    }

    /// The topic of `table` and whether a routing rule chose it (its keys then name the
    /// table, [`super::PHYSICAL_TABLE_KEY_FIELD`]).
    pub fn destination(&self, table: &TableId) -> Result<(String, bool), SinkError> {
        self.options
            .topics
            .destination(table)
            .map_err(|reason| SinkError::InvalidTopic {
                table: table.to_string(),
                reason,
            })
    }

    /// The schema-change topic: the topic prefix itself, as Debezium names it.
    pub fn schema_change_topic(&self) -> &str {
        self.options.topics.prefix()
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
        let mut progress = TransactionProgress::default();
        self.transaction_part_records(tx, &mut progress, true, coordinates, ctx)
    }

    /// The records of one part of a transaction handed out in parts (slices, then its last
    /// part, `last`), going on from `progress`: the parts' records together are exactly the
    /// records of the whole transaction. `tx.first_change` numbers the rows.
    pub fn transaction_part_records(
        &self,
        tx: &Transaction,
        progress: &mut TransactionProgress,
        last: bool,
        coordinates: &BinlogCoordinates<'_>,
        ctx: &RecordContext<'_>,
    ) -> Result<Vec<KafkaRecord>, SinkError> {
        if tx.changes.is_empty() && !(last && progress.begun) {
            return Ok(Vec::new());
        }
        let gtid = tx.gtid.to_string();
        let commit_ms = tx.committed_at_micros / 1000;
        let mut em =
            Emitter::new(*ctx, gtid.clone(), self.options.max_record_bytes).resume(progress);
        // a record per change at least, and the transaction's BEGIN and END
        em.records.reserve(tx.changes.len() + 2);
        if let (Some(topic), Some(change), false) = (
            &self.options.transaction_topic,
            tx.changes.first(),
            progress.begun,
        ) {
            let table = &change.table;
            let key = serialize(&TransactionKey { id: &gtid }, table)?;
            let begin = TransactionEvent {
                status: "BEGIN",
                id: &gtid,
                event_count: None,
                data_collections: None,
                ts_ms: commit_ms,
            };
            let value = serialize(&begin, table)?;
            em.push(table, topic, Some(key), Some(value), None, commit_ms)?;
        }
        if let Some(change) = tx.changes.first() {
            progress.begun = true;
            progress.table.get_or_insert_with(|| change.table.clone());
        }
        let mut topics: Vec<(Arc<TableId>, String, bool)> = Vec::new();
        let first = usize::try_from(tx.first_change).unwrap_or(usize::MAX);
        for (i, change) in tx.changes.iter().enumerate() {
            let (topic, routed) = match topics.iter().find(|(t, _, _)| **t == *change.table) {
                Some((_, topic, routed)) => (topic.clone(), *routed),
                None => {
                    let (topic, routed) = self.destination(&change.table)?;
                    topics.push((change.table.clone(), topic.clone(), routed));
                    (topic, routed)
                }
            };
            self.change_records(
                &mut em,
                change,
                (&topic, routed),
                first.saturating_add(i),
                &gtid,
                coordinates,
                commit_ms,
            )?;
        }
        if let (Some(topic), Some(table), true) = (
            &self.options.transaction_topic,
            progress.table.clone(),
            last,
        ) {
            let key = serialize(&TransactionKey { id: &gtid }, &table)?;
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
            let value = serialize(&end, &table)?;
            em.push(&table, topic, Some(key), Some(value), None, commit_ms)?;
        }
        Ok(em.finish(progress))
    }

    #[allow(clippy::too_many_arguments)]
    fn change_records(
        &self,
        em: &mut Emitter<'_>,
        change: &Change,
        (topic, routed): (&str, bool),
        row_index: usize,
        gtid: &str,
        coordinates: &BinlogCoordinates<'_>,
        commit_ms: u64,
    ) -> Result<(), SinkError> {
        let table = &*change.table;
        let before = change
            .before
            .as_ref()
            .map(|r| image(r, table, &self.options.encoding, change.types.as_ref()))
            .transpose()?;
        let after = change
            .after
            .as_ref()
            .map(|r| image(r, table, &self.options.encoding, change.types.as_ref()))
            .transpose()?;
        let key = match change.before.as_ref().or(change.after.as_ref()) {
            Some(r) => key_columns(&self.options.message_keys, table, r.columns(), &change.key)?,
            None => Cow::Borrowed(&change.key[..]),
        };
        let key_of = |r| {
            let encoding = &self.options.encoding;
            key_object(r, &key, table, encoding, change.types.as_ref(), routed)
        };
        let before_key = change.before.as_ref().map(key_of).transpose()?.flatten();
        let after_key = change.after.as_ref().map(key_of).transpose()?.flatten();
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
                    key_header: None,
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
                    key_header: None,
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
                    // as Debezium: the delete (and its tombstone) names the new key, the
                    // create the old one
                    events.push(Event {
                        op: "d",
                        before: Some(before),
                        after: None,
                        key: before_key.as_ref(),
                        key_header: after_key.as_ref().map(|k| (HEADER_DEBEZIUM_NEWKEY, k)),
                    });
                    events.push(Event {
                        op: "c",
                        before: None,
                        after: Some(after),
                        key: after_key.as_ref(),
                        key_header: before_key.as_ref().map(|k| (HEADER_DEBEZIUM_OLDKEY, k)),
                    });
                } else {
                    events.push(Event {
                        op: "u",
                        before: Some(before),
                        after: Some(after),
                        key: after_key.as_ref(),
                        key_header: None,
                    });
                }
            }
        }
        let schemas = self.table_schemas(
            topic,
            change.before.as_ref().or(change.after.as_ref()),
            change.types.as_ref(),
            &key,
            routed,
        );
        for event in events {
            let (total_order, collection_order) = em.count(table);
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
                    table: Some(&table.table),
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
            let (key, value, registry) = self.encode_event(
                schemas.as_deref(),
                event.key,
                &envelope,
                table,
                em.value_capacity(),
            )?;
            let key_header = event
                .key_header
                .map(|(name, k)| serialize(k, table).map(|v| (name, v)))
                .transpose()?;
            // a delete's tombstone follows it, with the same key and key header
            let tombstone = match &key {
                Some(k) if event.op == "d" && self.options.tombstones_on_delete => {
                    let registry = registry.as_ref().map(|r| PendingSchemas {
                        key: r.key.clone(),
                        value: None,
                    });
                    Some((k.clone(), registry, key_header.clone()))
                }
                _ => None,
            };
            em.push_with_header(
                table,
                topic,
                (key, value, registry),
                Some(row_index),
                commit_ms,
                key_header,
            )?;
            if let Some((key, registry, key_header)) = tombstone {
                em.push_with_header(
                    table,
                    topic,
                    (Some(key), None, registry),
                    Some(row_index),
                    commit_ms,
                    key_header,
                )?;
            }
        }
        Ok(())
    }

    /// The record of one DDL statement: a single schema-change event on
    /// [`Self::schema_change_topic`], keyed `{"databaseName": <schema>}` (`""` when the
    /// statement names no schema and no default database was set).
    ///
    /// `gtid` is the statement's transaction; `coordinates` its binlog coordinates. The event
    /// carries the statement text (`ddl`) only when `change.statement` is set, i.e. when the
    /// pipeline opted in; otherwise `ddl` is null. The DDL's commit time is not known here, so
    /// `source.ts_ms`, `ts_ms` and the record timestamp are all `ctx.now_ms`. The
    /// `capstan.position` header is [`SCHEMA_CHANGE_POSITION_PREFIX`] + the GTID.
    pub fn schema_change_records(
        &self,
        change: &SchemaChange,
        gtid: &TransactionGtid,
        coordinates: &BinlogCoordinates<'_>,
        ctx: &RecordContext<'_>,
    ) -> Result<Vec<KafkaRecord>, SinkError> {
        let gtid = gtid.to_string();
        let database = change.schema.as_deref().unwrap_or("");
        let table = change.table.as_deref();
        // only for a (value-free) serialisation error
        let id = TableId::new(database, table.unwrap_or(""));
        let event = SchemaChangeEvent {
            source: Source {
                version: SOURCE_VERSION,
                connector: self.connector(),
                name: self.options.topics.prefix(),
                ts_ms: ctx.now_ms,
                snapshot: "false",
                db: database,
                table,
                server_id: coordinates.server_id,
                gtid: Some(&gtid),
                file: coordinates.file,
                pos: coordinates.pos,
                row: 0,
            },
            ts_ms: ctx.now_ms,
            database_name: database,
            schema_name: None,
            table_name: table,
            kind: change.kind.as_str(),
            ddl: change.statement.as_deref(),
            table_changes: table_changes(change.kind, database, table, change.structure.as_ref()),
        };
        let key = serialize(
            &SchemaChangeKey {
                database_name: database,
            },
            &id,
        )?;
        let value = serialize(&event, &id)?;
        let mut em = Emitter::new(
            *ctx,
            format!("{SCHEMA_CHANGE_POSITION_PREFIX}{gtid}"),
            self.options.max_record_bytes,
        );
        em.push(
            &id,
            self.schema_change_topic(),
            Some(key),
            Some(value),
            None,
            ctx.now_ms,
        )?;
        Ok(em.records)
    }

    /// The records (`op: "r"`) of one snapshot chunk, in row order. No transaction metadata
    /// and no tombstones: a snapshot only reads.
    pub fn snapshot_records(
        &self,
        chunk: &SnapshotChunk<'_>,
        ctx: &RecordContext<'_>,
    ) -> Result<Vec<KafkaRecord>, SinkError> {
        let table = chunk.table;
        let (topic, routed) = self.destination(table)?;
        let mut em = Emitter::new(
            *ctx,
            format!("snapshot:{}", chunk.chunk_id),
            self.options.max_record_bytes,
        );
        let last_row = chunk.rows.len().checked_sub(1);
        let key_cols = match chunk.rows.first() {
            Some(r) => key_columns(&self.options.message_keys, table, r.columns(), chunk.key)?,
            None => Cow::Borrowed(chunk.key),
        };
        let schemas =
            self.table_schemas(&topic, chunk.rows.first(), chunk.types, &key_cols, routed);
        for (row_index, row) in chunk.rows.iter().enumerate() {
            let after = image(row, table, &self.options.encoding, chunk.types)?;
            let key = key_object(
                row,
                &key_cols,
                table,
                &self.options.encoding,
                chunk.types,
                routed,
            )?;
            let snapshot = snapshot_flag(chunk, row_index == 0, Some(row_index) == last_row);
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
                    table: Some(&table.table),
                    server_id: chunk.coordinates.server_id,
                    gtid: None,
                    file: chunk.coordinates.file,
                    pos: chunk.coordinates.pos,
                    // Debezium's snapshot reads say 0; the row's place is in `capstan.row`
                    row: 0,
                },
                op: "r",
                ts_ms: ctx.now_ms,
                transaction: None,
            };
            let payload = self.encode_event(
                schemas.as_deref(),
                key.as_ref(),
                &envelope,
                table,
                em.value_capacity(),
            )?;
            em.push_with_header(table, &topic, payload, Some(row_index), ctx.now_ms, None)?;
        }
        Ok(em.records)
    }

    /// The marker that closes a table's snapshot, published right after its last chunk (also
    /// for a table without rows, so a consumer waiting for "snapshot complete" never waits
    /// forever): key `{"snapshot_complete": "<db>.<table>"}`, value
    /// `{"snapshot_complete": {"db", "table", "rows"}}`, on the control topic
    /// ([`RecordOptions::snapshot_marker_topic`]), so table topics hold change events only;
    /// on the table's own topic when the pipeline opted in to that.
    pub fn snapshot_complete_record(
        &self,
        table: &TableId,
        rows: u64,
        ctx: &RecordContext<'_>,
    ) -> Result<KafkaRecord, SinkError> {
        let topic = match &self.options.snapshot_marker_topic {
            Some(topic) => topic.clone(),
            None => self.topic_for(table)?,
        };
        let mut em = Emitter::new(
            *ctx,
            format!("snapshot:{table}:complete"),
            self.options.max_record_bytes,
        );
        let key = serialize(
            &SnapshotCompleteKey {
                snapshot_complete: table.to_string(),
            },
            table,
        )?;
        let value = serialize(
            &SnapshotCompleteValue {
                snapshot_complete: SnapshotCompleteBody {
                    db: &table.schema,
                    table: &table.table,
                    rows,
                },
            },
            table,
        )?;
        em.push(table, &topic, Some(key), Some(value), None, ctx.now_ms)?;
        em.records
            .pop()
            .ok_or_else(|| missing(table, "snapshot marker"))
    }
}
