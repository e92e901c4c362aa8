//! [`PipelineRunner::deliver`]: one batch of stream outputs (gated by the snapshot while one
//! runs, with a chunk at the point its position is processed) turned into records, published
//! and acknowledged, with the chunk's Raft progress written around the publish.

use capstan_connectors::mysql::AssemblerOutput;
use capstan_core::position::{Position, ResumePoint};
use capstan_core::snapshot::ReadyChunk;
use capstan_kafka::exactly_once::WithinTransaction;
use capstan_kafka::record::{
    BinlogCoordinates, KafkaRecord, RecordBuilder, RecordContext, SnapshotChunk,
};
use capstan_raft_store::Command;

use super::engine::delivery_ledger::Delivered;
use super::engine::runner_exit::RunnerExit;
use super::pipeline_runner::{now_ms, PipelineRunner};
use super::record_encoder::{Encoded, RecordEncoder};
use super::runner_sink::{RunnerSink, Sent};
use super::snapshot_driver::{ChunkRows, SnapshotDriver};
use super::table_run::ProgressWrite;
use crate::fault_point::FaultPoint;

type Step<T> = Result<T, RunnerExit>;

/// One batch for [`PipelineRunner::deliver`]: stream outputs with the processed position
/// after each (every transaction handed out; ahead of the checkpoint only while a MariaDB
/// prepare is pending), which a waiting chunk is published at, and a chunk already due
/// before the first of them.
pub(super) struct Batch {
    pub(super) items: Vec<(Payload, Position)>,
    pub(super) ready: Option<ReadyChunk<ChunkRows>>,
}

/// One stream output as the runner receives it from its source task.
#[derive(Debug)]
pub(super) enum Payload {
    /// To be gated (while a snapshot runs) and encoded here.
    Output(AssemblerOutput),
    /// Already encoded on the source task (no snapshot gates the stream).
    Encoded {
        /// Its records.
        encoded: Encoded,
        /// A transaction handed out in slices is still open after it: the point inside it.
        within: Option<WithinTransaction>,
    },
}

impl Payload {
    /// Records already encoded (0 for an output still to be encoded).
    fn encoded_len(&self) -> usize {
        match self {
            Payload::Encoded { encoded, .. } => encoded.records.len(),
            Payload::Output(_) => 0,
        }
    }
}

impl PipelineRunner {
    /// Publishes the records of a batch (in order; gated by the snapshot while one runs, with
    /// a chunk at the point its position is processed) and waits for Kafka's acknowledgement
    /// of every one of them. `point` is the source's checkpoint and processed position after
    /// the batch. Around a chunk: its `delivered_pk` is committed to
    /// Raft before the publish, its `pk_cursor` after.
    pub(super) async fn deliver(
        &self,
        encoder: &mut RecordEncoder,
        sink: &mut RunnerSink,
        batch_in: Batch,
        point: &ResumePoint,
        mut snapshot: Option<&mut SnapshotDriver>,
    ) -> Step<Delivered> {
        let now = now_ms();
        let ctx = RecordContext {
            pipeline: &self.name,
            epoch: self.epoch,
            now_ms: now,
        };
        let (mut rows, mut transactions, mut last_commit_micros) = (0u64, 0u64, None);
        let Batch { items, mut ready } = batch_in;
        // sized once for what is already encoded (a batch holds up to megabytes of records)
        let mut batch = Vec::with_capacity(items.iter().map(|(p, _)| p.encoded_len()).sum());
        if let (Some(chunk), Some(driver)) = (&ready, snapshot.as_deref()) {
            batch.extend(self.chunk_records(encoder.builder(), chunk, driver, &ctx)?);
        }
        if let Some(driver) = snapshot.as_deref_mut() {
            let outputs = items.iter().filter_map(|(p, _)| match p {
                Payload::Output(o) => Some(o),
                Payload::Encoded { .. } => None,
            });
            driver
                .resolve_weights(outputs)
                .await
                .map_err(RunnerExit::failed)?;
        }
        let mut within = None;
        for (payload, after) in items {
            let (encoded, inside) = match payload {
                // encoded on the source task (no snapshot gates this stream)
                Payload::Encoded { encoded, within } => (encoded, within),
                Payload::Output(output) => {
                    let output = encoder.admit(output).map_err(|e| RunnerExit::Failed {
                        code: e.code().to_string(),
                        detail: Some(e.to_string()),
                    })?;
                    // a transaction outside a waiting chunk's G: the chunk goes first (one
                    // per batch; one that cannot is dropped and read again)
                    let release = ready.is_none();
                    let before = snapshot
                        .as_deref_mut()
                        .and_then(|d| d.take_before(&output, release));
                    if let (Some(chunk), Some(driver)) = (before, snapshot.as_deref()) {
                        batch.extend(self.chunk_records(
                            encoder.builder(),
                            &chunk,
                            driver,
                            &ctx,
                        )?);
                        ready = Some(chunk);
                    }
                    let output = match snapshot.as_deref_mut() {
                        Some(driver) => driver.gate(output).map_err(RunnerExit::failed)?,
                        None => output,
                    };
                    let encoded = encoder
                        .encode(&output, now)
                        .map_err(|e| RunnerExit::from_sink(&e))?;
                    (encoded, encoder.within())
                }
            };
            rows += encoded.rows;
            transactions += encoded.transactions;
            last_commit_micros = encoded.committed_at_micros.or(last_commit_micros);
            batch.extend(encoded.records);
            within = inside;
            // the chunk whose position this transaction completed (the batch carries one)
            let due = match snapshot.as_deref_mut() {
                Some(d) if ready.is_none() => d.take_ready(&after),
                _ => None,
            };
            if let (Some(chunk), Some(driver)) = (due, snapshot.as_deref()) {
                batch.extend(self.chunk_records(encoder.builder(), &chunk, driver, &ctx)?);
                ready = Some(chunk);
            }
        }
        let mut kafka_progress = None;
        if let (Some(chunk), Some(driver)) = (&ready, snapshot.as_deref()) {
            if let Some(write) = driver.progress_before(chunk) {
                self.progress_write(write).await?;
            }
            kafka_progress = Some(driver.kafka_progress(Some(chunk)));
        }
        self.require_lease()?;
        if let Some(registrar) = self.registrar.get() {
            // format avro: the schema ids (looked up or registered once per schema)
            registrar
                .frame(&mut batch)
                .await
                .map_err(|e| RunnerExit::from_sink(&e))?;
        }
        let bytes: u64 = batch.iter().map(|r| r.approximate_size() as u64).sum();
        let inside_transaction = within.is_some();
        let sent = if let Some(within) = within {
            sink.publish_part(batch, point, within)
                .await
                .map(|()| Sent::Durable)
        } else if ready.is_none() {
            // no chunk's progress waits on this batch (a snapshot may run, but no chunk is in
            // it): it may stay in flight while the next is gated, encoded and enqueued behind
            // it; a batch with a chunk settles it first (the sink awaits in enqueue order)
            sink.send(batch, point).await
        } else {
            sink.publish(batch, point, kafka_progress)
                .await
                .map(|()| Sent::Durable)
        };
        let sent = sent.map_err(|e| RunnerExit::from_sink(&e))?;
        self.metrics
            .record_published(&self.name, rows, transactions, bytes);
        if let (Some(chunk), Some(driver)) = (&ready, snapshot.as_deref_mut()) {
            FaultPoint::SnapshotChunkPublished.hit();
            self.metrics
                .record_snapshot_rows(&self.name, chunk.payload.rows.len() as u64);
            if let Some(write) = driver.published(chunk) {
                self.progress_write(write).await?;
            }
        }
        if let Some(driver) = snapshot.as_deref() {
            self.metrics
                .set_snapshot_suppressed(&self.name, driver.suppressed);
            self.metrics
                .set_snapshot_read_ahead(&self.name, driver.read_ahead_counts());
        }
        Ok(match sent {
            Sent::InFlight => Delivered::InFlight {
                committed_at_micros: last_commit_micros,
            },
            Sent::Durable => {
                self.record_lag(last_commit_micros);
                if inside_transaction {
                    Delivered::InsideTransaction
                } else {
                    Delivered::Durable
                }
            }
        })
    }

    /// The commit-to-acknowledgement lag of the newest transaction acknowledged.
    pub(super) fn record_lag(&self, committed_at_micros: Option<u64>) {
        if let Some(committed) = committed_at_micros {
            let lag = now_ms().saturating_sub(committed / 1000) as f64 / 1000.0;
            self.metrics.set_lag_seconds(&self.name, lag);
        }
    }

    /// The records of a chunk: its rows (`op: r`), then the table's completion marker after
    /// its last chunk.
    fn chunk_records(
        &self,
        records: &RecordBuilder,
        chunk: &ReadyChunk<ChunkRows>,
        driver: &SnapshotDriver,
        ctx: &RecordContext<'_>,
    ) -> Step<Vec<KafkaRecord>> {
        let table = driver
            .table(&chunk.table)
            .ok_or_else(|| RunnerExit::failed("snapshot_table_not_found"))?;
        // the record key: the primary key, else the NOT NULL unique key the table is read by
        // (the binlog's table map names that key as the primary key too, so the stream's
        // changes carry the same key)
        let key: Vec<usize> = table.key.columns.iter().map(|c| c.position).collect();
        let done = driver.rows_done(&chunk.table);
        let chunk_id = format!("{}/{done}", chunk.table);
        let (first_of_table, first_of_snapshot) = driver.reads_from_start(&chunk.table);
        // the chunk's binlog point; a snapshot read has no originating server (Debezium: 0)
        let point = chunk.payload.point.as_ref();
        let coordinates = BinlogCoordinates {
            server_id: 0,
            file: point.map_or("", |p| p.file.as_str()),
            pos: point.map_or(0, |p| p.pos),
        };
        let spec = SnapshotChunk {
            table: &chunk.table,
            key: &key,
            rows: &chunk.payload.rows,
            types: Some(&table.types),
            chunk_id: &chunk_id,
            coordinates,
            first_of_table,
            first_of_snapshot,
            last_of_table: chunk.last,
            last_of_snapshot: chunk.last && driver.is_complete(),
            incremental: driver.is_incremental(&chunk.table),
        };
        let mut out = records
            .snapshot_records(&spec, ctx)
            .map_err(|e| RunnerExit::from_sink(&e))?;
        if chunk.last {
            let rows = done + chunk.payload.rows.len() as u64;
            out.push(
                records
                    .snapshot_complete_record(&chunk.table, rows, ctx)
                    .map_err(|e| RunnerExit::from_sink(&e))?,
            );
        }
        Ok(out)
    }

    pub(super) async fn progress_write(&self, write: ProgressWrite) -> Step<()> {
        self.owner_write(Command::CommitSnapshotProgress {
            pipeline: self.name.clone(),
            epoch: self.epoch,
            table: write.table,
            pk_cursor: write.pk_cursor,
            delivered_pk: write.delivered_pk,
            status: write.status,
            rows_done: write.rows_done,
            rows_estimated: write.rows_estimated,
        })
        .await
    }
}
