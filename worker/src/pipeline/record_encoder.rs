//! [`RecordEncoder`]: stream outputs → Kafka records, for one runner. Pure: the caller passes
//! the processing time.
//!
//! It keeps the account of a transaction handed out in slices ([`SlicedTransaction`]), so it
//! can run wherever the outputs pass first: on the source task, beside the publish of the
//! previous batch, when no snapshot gates the stream; on the runner (after the gate) while
//! one does.

use capstan_connectors::mysql::{AssemblerOutput, TableFilter};
use capstan_core::change::{SchemaChange, TableId};
use capstan_core::position::Flavor;
use capstan_kafka::exactly_once::WithinTransaction;
use capstan_kafka::record::{BinlogCoordinates, KafkaRecord, RecordBuilder, RecordContext};
use capstan_kafka::SinkError;
use sha2::{Digest, Sha256};

use super::sliced_transaction::{NotResumable, SlicedTransaction};

/// The records of one output and what they count for.
#[derive(Debug, Default)]
pub struct Encoded {
    /// In publishing order.
    pub records: Vec<KafkaRecord>,
    /// Row changes encoded.
    pub rows: u64,
    /// Source transactions completed (0 or 1).
    pub transactions: u64,
    /// Commit time of the completed transaction, microseconds since the Unix epoch.
    pub committed_at_micros: Option<u64>,
}

impl Encoded {
    /// Bytes the records hold (for byte budgets and metrics).
    pub fn bytes(&self) -> usize {
        self.records.iter().map(KafkaRecord::approximate_size).sum()
    }
}

/// Encodes the outputs of one runner's source, in order.
#[derive(Debug)]
pub struct RecordEncoder {
    builder: RecordBuilder,
    pipeline: String,
    epoch: u64,
    tables: TableFilter,
    /// A digest of `tables`: a checkpoint inside a transaction counts its changes under it.
    capture: String,
    sliced: Option<SlicedTransaction>,
}

/// A digest of a capture list (of its rendering by this build): which changes a transaction
/// hands out, and so how they are counted, depends on it.
pub fn capture_digest(tables: &TableFilter) -> String {
    let digest = Sha256::digest(format!("{tables:?}").as_bytes());
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// True when a schema change concerns what the pipeline captures: a captured table, or (for a
/// database-level statement) a database the capture list names.
pub fn ddl_is_captured(filter: &TableFilter, change: &SchemaChange) -> bool {
    let Some(schema) = change.schema.as_deref() else {
        return matches!(filter, TableFilter::All);
    };
    match change.table.as_deref() {
        Some(table) => filter.admits(&TableId::new(schema, table)),
        None => match filter {
            TableFilter::All | TableFilter::AllExcept(_) => true,
            TableFilter::Only(tables) => tables.iter().any(|t| t.schema == schema),
            TableFilter::Matching(patterns) => patterns.may_capture_in(schema),
        },
    }
}

impl RecordEncoder {
    /// An encoder for `pipeline` at `epoch`, capturing `tables`.
    pub fn new(builder: RecordBuilder, pipeline: &str, epoch: u64, tables: TableFilter) -> Self {
        RecordEncoder {
            builder,
            pipeline: pipeline.to_string(),
            epoch,
            capture: capture_digest(&tables),
            tables,
            sliced: None,
        }
    }

    /// Starts inside the transaction an exactly-once checkpoint is in: its replay is cut
    /// after the changes `within` names as committed, and its records numbered on from there.
    /// `Ok(false)` (and no account) when the checkpoint counted the changes under another
    /// capture list: the caller must then publish the transaction whole.
    pub fn resume_inside(
        &mut self,
        within: &WithinTransaction,
        flavor: Flavor,
    ) -> Result<bool, NotResumable> {
        if within.capture != self.capture {
            return Ok(false);
        }
        self.sliced = Some(SlicedTransaction::resumed(within, flavor)?);
        Ok(true)
    }

    /// The point inside the transaction handed out in slices after what was encoded, while
    /// one is open (exactly-once commits it with the slice).
    pub fn within(&self) -> Option<WithinTransaction> {
        self.sliced.as_ref().map(|s| s.within(&self.capture))
    }

    /// The record builder (snapshot chunks are built with it too).
    pub fn builder(&self) -> &RecordBuilder {
        &self.builder
    }

    /// Trims a replayed part of a sliced transaction to what was not handed on yet (see
    /// [`SlicedTransaction::admit`]); call before gating, then [`Self::encode`] the result.
    pub fn admit(&mut self, output: AssemblerOutput) -> Result<AssemblerOutput, NotResumable> {
        SlicedTransaction::admit(&mut self.sliced, output)
    }

    /// True while a transaction handed out in slices has not had its last part encoded.
    pub fn inside_transaction(&self) -> bool {
        self.sliced.is_some()
    }

    /// The records of an admitted (and, while a snapshot runs, gated) output: a transaction's
    /// or a slice's changes, or a captured DDL statement's schema-change event; nothing for
    /// the rest, which only advance the position.
    pub fn encode(&mut self, output: &AssemblerOutput, now_ms: u64) -> Result<Encoded, SinkError> {
        let ctx = RecordContext {
            pipeline: &self.pipeline,
            epoch: self.epoch,
            now_ms,
        };
        let mut out = Encoded::default();
        match output {
            AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx) => {
                let last = matches!(output, AssemblerOutput::Transaction(_));
                out.rows = tx.changes.len() as u64;
                let coordinates = BinlogCoordinates {
                    server_id: tx.origin.server_id,
                    file: &tx.origin.file,
                    pos: tx.origin.pos,
                };
                out.records = match self.sliced.as_mut() {
                    Some(open) => self.builder.transaction_part_records(
                        tx,
                        &mut open.records,
                        last,
                        &coordinates,
                        &ctx,
                    )?,
                    None => self.builder.transaction_records(tx, &coordinates, &ctx)?,
                };
                if last {
                    self.sliced = None;
                    out.transactions = 1;
                    out.committed_at_micros = Some(tx.committed_at_micros);
                }
            }
            // a DDL of a captured table (or of a captured table's database) goes to the
            // schema-change topic, in binlog order with the rows around it
            AssemblerOutput::SchemaChange {
                change,
                gtid,
                origin,
                ..
            } if ddl_is_captured(&self.tables, change) => {
                let coordinates = BinlogCoordinates {
                    server_id: origin.server_id,
                    file: &origin.file,
                    pos: origin.pos,
                };
                out.records =
                    self.builder
                        .schema_change_records(change, gtid, &coordinates, &ctx)?;
            }
            // filtered transactions and other DDL only advance the position
            AssemblerOutput::SchemaChange { .. } | AssemblerOutput::PositionAdvanced { .. } => {}
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {

    use capstan_core::change::{BinlogOrigin, Transaction, TransactionGtid};
    use capstan_core::position::Flavor;
    use capstan_kafka::record::{RecordOptions, TopicTemplate, DEFAULT_TOPIC_TEMPLATE};

    use super::*;

    fn builder() -> RecordBuilder {
        RecordBuilder::new(RecordOptions {
            topics: TopicTemplate::parse("cdc", DEFAULT_TOPIC_TEMPLATE).unwrap(),
            flavor: Flavor::Mysql,
            tombstones_on_delete: true,
            transaction_topic: Some("cdc.transaction".into()),
            max_record_bytes: 1_000_000,
            encoding: Default::default(),
            snapshot_marker_topic: Some("cdc.snapshot_complete".into()),
            message_keys: Default::default(),
            schemas: Default::default(),
        })
    }

    fn part(first: u64, ids: std::ops::Range<i64>) -> Transaction {
        crate::pipeline::sliced_transaction::tests::part(9, first, ids)
    }

    #[test]
    fn slices_replays_and_the_last_part_encode_as_the_whole_transaction_once() {
        let mut whole = RecordEncoder::new(builder(), "p", 3, TableFilter::All);
        let want = whole
            .encode(&AssemblerOutput::Transaction(part(0, 0..6)), 42)
            .unwrap();
        assert_eq!((want.rows, want.transactions), (6, 1));
        assert_eq!(want.committed_at_micros, Some(5_000_000));

        let mut e = RecordEncoder::new(builder(), "p", 3, TableFilter::All);
        let mut got = Vec::new();
        let outputs = [
            AssemblerOutput::Slice(part(0, 0..2)),
            AssemblerOutput::Slice(part(2, 2..4)),
            // the stream dropped: the source replays the transaction from its start
            AssemblerOutput::Slice(part(0, 0..3)),
            AssemblerOutput::Transaction(part(3, 3..6)),
        ];
        let mut inside = Vec::new();
        let mut transactions = 0;
        for output in outputs {
            let output = e.admit(output).unwrap();
            let encoded = e.encode(&output, 42).unwrap();
            transactions += encoded.transactions;
            got.extend(encoded.records);
            inside.push(e.inside_transaction());
        }
        assert_eq!(inside, vec![true, true, true, false]);
        assert_eq!(transactions, 1);
        assert!(got == want.records, "the parts' records are the whole's");
    }

    #[test]
    fn only_captured_ddl_becomes_a_record() {
        let gtid =
            TransactionGtid::Mysql("3e11fa47-71ca-11e1-9e33-c80aa9429562:9".parse().unwrap());
        let ddl = |schema: &str, table: &str| AssemblerOutput::SchemaChange {
            change: SchemaChange {
                kind: capstan_core::change::SchemaChangeKind::AlterTable,
                schema: Some(schema.into()),
                table: Some(table.into()),
                statement: None,
                structure: None,
            },
            gtid: gtid.clone(),
            completes_transaction: true,
            origin: BinlogOrigin {
                server_id: 7,
                file: "binlog.000002".into(),
                pos: 4242,
            },
        };
        let mut e = RecordEncoder::new(builder(), "p", 3, TableFilter::only([("db", "t")]));
        let records = e.encode(&ddl("db", "t"), 1).unwrap().records;
        assert_eq!(records.len(), 1);
        // the event's source names the binlog point of the statement's transaction
        let value: serde_json::Value =
            serde_json::from_slice(records[0].value.as_deref().unwrap()).unwrap();
        let source = &value["source"];
        assert_eq!(
            (&source["server_id"], &source["file"], &source["pos"]),
            (
                &serde_json::json!(7),
                &serde_json::json!("binlog.000002"),
                &serde_json::json!(4242)
            )
        );
        assert!(e.encode(&ddl("db", "u"), 1).unwrap().records.is_empty());
    }

    #[test]
    fn ddl_of_a_pattern_filter_is_captured_where_a_table_may_be() {
        use capstan_connectors::mysql::TablePatterns;
        use capstan_core::name_pattern::NamePattern;
        let filter = TableFilter::Matching(std::sync::Arc::new(TablePatterns {
            schemas_exclude: vec![NamePattern::exact("hr")],
            tables_include: vec![NamePattern::regex(r"shop\.orders_\d+").unwrap()],
            ..TablePatterns::default()
        }));
        let change = |schema: &str, table: Option<&str>| SchemaChange {
            kind: capstan_core::change::SchemaChangeKind::AlterTable,
            schema: Some(schema.into()),
            table: table.map(str::to_string),
            statement: None,
            structure: None,
        };
        assert!(ddl_is_captured(&filter, &change("shop", Some("orders_3"))));
        assert!(!ddl_is_captured(&filter, &change("shop", Some("orders"))));
        // a database-level statement: wherever a pattern could capture a table
        assert!(ddl_is_captured(&filter, &change("shop", None)));
        assert!(!ddl_is_captured(&filter, &change("hr", None)));
    }
}
