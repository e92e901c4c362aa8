//! The runner of one pipeline on its owner: checkpoint from Raft → binlog source → Kafka →
//! checkpoint back to Raft, carrying the owner's epoch on every write.
//!
//! # Order of effects, and what a crash costs
//!
//! A transaction's records are published and *acknowledged* by Kafka before the position that
//! covers it may be committed to Raft; commits are batched (every [`CHECKPOINT_EVERY_TX`]
//! transactions or [`CHECKPOINT_EVERY`], whichever first). A crash between the two re-publishes
//! at most the un-checkpointed tail on the next owner — at-least-once, each duplicate carrying
//! the same `capstan.position`/`capstan.record` headers. Nothing is ever skipped: the position
//! only covers what was acknowledged (or deliberately filtered).
//!
//! # Fencing
//!
//! Before every publish and every Raft write the runner checks that its node still holds the
//! lease (ADR-0004); without it the runner stops at once. Every Raft write carries the epoch;
//! a `StaleEpoch`/`Unowned` answer means another owner took over, and the runner stops without
//! a further write.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capstan_connectors::mysql::{
    detect_flavor, AssemblerConfig, AssemblerOutput, BinlogSource, SourceClient, StartPosition,
    TableFilter,
};
use capstan_core::change::{SchemaChange, TableId};
use capstan_core::position::Position;
use capstan_core::snapshot::ReadyChunk;
use capstan_kafka::config::DeliveryMode;
use capstan_kafka::exactly_once::{
    Checkpoint, CheckpointSource, ExactlyOncePublisher, KafkaTransactionalLog, OwnerIdentity,
};
use capstan_kafka::publisher::KafkaPublisher;
use capstan_kafka::record::{
    BinlogCoordinates, KafkaRecord, RecordBuilder, RecordContext, SnapshotChunk,
};
use capstan_kafka::Consequence;
use capstan_raft_store::{Command, Epoch, Response, RunnerState};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use super::pipeline_spec::{CheckedPipelineSpec, StartAt};
use super::runner_exit::RunnerExit;
use super::runner_sink::RunnerSink;
use super::snapshot_driver::{ChunkRows, PreparedSnapshot, SnapshotDriver};
use super::table_run::ProgressWrite;
use crate::fault_point::FaultPoint;
use crate::metrics::Metrics;
use crate::node::Node;

/// Commit the checkpoint after this many transactions…
pub const CHECKPOINT_EVERY_TX: u64 = 1_000;
/// …or after this long, whichever comes first.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);
/// Bound on each blocking exactly-once call (init, commit, abort, offsets read).
const EXACTLY_ONCE_OP_TIMEOUT: Duration = Duration::from_secs(30);
/// At most this many source transactions are published as one batch…
pub const MAX_BATCH_TX: usize = 500;
/// …and no more once the batch holds this many row changes (a single larger transaction
/// is still published whole: the batch bounds memory, the transaction is the source's).
pub const MAX_BATCH_ROWS: usize = 20_000;

/// One pipeline incarnation: a name, an owner epoch, a checked definition.
#[derive(Debug)]
pub struct PipelineRunner {
    pub(super) node: Arc<Node>,
    metrics: Arc<Metrics>,
    pub(super) name: String,
    pub(super) epoch: Epoch,
    pub(super) spec: CheckedPipelineSpec,
}

/// Why a step stopped the runner.
type Step<T> = Result<T, RunnerExit>;

impl PipelineRunner {
    /// A runner for `name` at `epoch`.
    pub fn new(
        node: Arc<Node>,
        metrics: Arc<Metrics>,
        name: String,
        epoch: Epoch,
        spec: CheckedPipelineSpec,
    ) -> Self {
        PipelineRunner {
            node,
            metrics,
            name,
            epoch,
            spec,
        }
    }

    /// Runs until `stop` turns true, the owner is fenced, or the pipeline halts.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> RunnerExit {
        let outcome = tokio::select! {
            exit = self.stream() => exit,
            _ = stop.wait_for(|s| *s) => RunnerExit::Stopped,
        };
        if let RunnerExit::Failed { code } = &outcome {
            warn!(pipeline = %self.name, epoch = self.epoch, code = %code, "pipeline halted");
            let _ = self
                .owner_write(Command::ReportStatus {
                    pipeline: self.name.clone(),
                    epoch: self.epoch,
                    state: RunnerState::Failed,
                    reason: Some(code.clone()),
                })
                .await;
        }
        outcome
    }

    async fn stream(&self) -> RunnerExit {
        match self.stream_inner().await {
            Ok(never) => match never {},
            Err(exit) => exit,
        }
    }

    async fn stream_inner(&self) -> Step<std::convert::Infallible> {
        self.report(RunnerState::Starting).await?;
        // the snapshot first: on the first start it commits the stream floor P0 as the
        // checkpoint, which the start position below then resumes from
        let mut prepared = match &self.spec.snapshot {
            Some(snap) => self.snapshot_prepare(snap).await?,
            None => None,
        };
        let start = self.start_position().await?;
        let (mut sink, start) = self.open_sink(start, prepared.as_mut()).await?;
        let mut snapshot = match prepared {
            Some(p) if !p.is_complete() => {
                let mut driver = SnapshotDriver::new(p).await.map_err(RunnerExit::failed)?;
                driver.set_kafka_chunks(sink.snapshot_chunks());
                Some(driver)
            }
            _ => None,
        };
        let assembler = AssemblerConfig {
            filter: self.spec.tables.clone(),
            xa: self.spec.xa,
            ..AssemblerConfig::default()
        };
        let mut source = BinlogSource::start(self.spec.source.clone(), start, assembler)
            .await
            .map_err(|e| RunnerExit::failed(e.code()))?;
        if let Some(driver) = snapshot.as_mut() {
            // the chunks must come from the server the stream reads
            driver
                .bind_source(self.spec.source.clone(), source.server_identity())
                .await
                .map_err(RunnerExit::failed)?;
        }
        let mut options = self.spec.sink.record_options.clone();
        options.flavor = source.flavor();
        let records = RecordBuilder::new(options);
        if snapshot.is_some() {
            self.report(RunnerState::Snapshotting).await?;
            info!(pipeline = %self.name, epoch = self.epoch, flavor = %source.flavor(), "snapshotting");
        } else {
            self.report(RunnerState::Streaming).await?;
            info!(pipeline = %self.name, epoch = self.epoch, flavor = %source.flavor(), "streaming");
        }

        // The source runs in its own task: reading the binlog is not cancel-safe, the channel
        // is, so the loop below can wake for checkpoint deadlines without tearing a frame.
        let mut committed: Position = source.position().clone();
        let mut processed = committed.clone();
        let (tx, mut rx) = mpsc::channel(256);
        let _source_task = AbortOnDrop(tokio::spawn(async move {
            loop {
                let item = source.next().await.map(|o| (o, source.position().clone()));
                let end = item.is_err();
                if tx.send(item).await.is_err() || end {
                    break;
                }
            }
        }));
        let mut since_commit = 0u64;
        let mut last_commit = Instant::now();
        let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
        loop {
            // a snapshot chunk, when one is due: read while the stream waits in the channel,
            // so the processed position is at or before the chunk's position G
            if let Some(driver) = snapshot.as_mut() {
                if driver.chunk_due_in(!rx.is_empty()) == Some(Duration::ZERO) {
                    let ready = driver
                        .read_chunk(&processed)
                        .await
                        .map_err(RunnerExit::failed)?;
                    if ready.is_some() {
                        let batch = Batch {
                            items: Vec::new(),
                            ready,
                        };
                        self.deliver(&records, &mut sink, batch, &processed, Some(driver))
                            .await?;
                    }
                }
            }
            let wait = snapshot
                .as_ref()
                .and_then(|d| d.chunk_due_in(!rx.is_empty()))
                .unwrap_or(CHECKPOINT_EVERY);
            tokio::select! {
                item = rx.recv() => {
                    let Some(item) = item else {
                        return Err(RunnerExit::failed("source_stopped"));
                    };
                    // take whatever else is already waiting, up to a bound, and publish it as
                    // one batch: one round of acknowledgements instead of one per transaction
                    let mut items = Vec::new();
                    let mut rows = 0;
                    let mut next = Some(item);
                    while let Some(item) = next.take() {
                        let (output, position) = match item {
                            Ok(ok) => ok,
                            Err(e) => {
                                if e.code() == "data_gap" {
                                    if let Some(driver) = snapshot.as_ref() {
                                        self.snapshot_mark_lost(driver).await;
                                        return Err(RunnerExit::failed("snapshot_data_gap"));
                                    }
                                }
                                return Err(RunnerExit::failed(e.code()));
                            }
                        };
                        rows += change_count(&output);
                        processed = position.clone();
                        items.push((output, position));
                        if items.len() < MAX_BATCH_TX && rows < MAX_BATCH_ROWS {
                            next = rx.try_recv().ok();
                        }
                    }
                    since_commit += items.len() as u64;
                    let batch = Batch { items, ready: None };
                    self.deliver(&records, &mut sink, batch, &processed, snapshot.as_mut())
                        .await?;
                }
                _ = tick.tick() => {}
                _ = tokio::time::sleep(wait) => {}
            }
            if snapshot.as_ref().is_some_and(SnapshotDriver::is_complete) {
                if let Some(done) = snapshot.take() {
                    let (p50, p99) = done.lock_hold_percentiles().unwrap_or_default();
                    info!(
                        pipeline = %self.name,
                        epoch = self.epoch,
                        suppressed = done.suppressed,
                        lock_hold_p50_us = p50.as_micros() as u64,
                        lock_hold_p99_us = p99.as_micros() as u64,
                        "snapshot complete; streaming"
                    );
                }
                self.report(RunnerState::Streaming).await?;
            }
            let due = since_commit >= CHECKPOINT_EVERY_TX
                || (since_commit > 0 && last_commit.elapsed() >= CHECKPOINT_EVERY);
            if due && processed != committed {
                self.owner_write(Command::CommitCheckpoint {
                    pipeline: self.name.clone(),
                    epoch: self.epoch,
                    position: processed.clone(),
                })
                .await?;
                committed = processed.clone();
                since_commit = 0;
                last_commit = Instant::now();
            }
        }
    }

    /// Publishes the records of a batch (in order; gated by the snapshot while one runs, with
    /// a chunk at the point its position is processed) and waits for Kafka's acknowledgement
    /// of every one of them. Around a chunk: its `delivered_pk` is committed to Raft before
    /// the publish, its `pk_cursor` after.
    async fn deliver(
        &self,
        records: &RecordBuilder,
        sink: &mut RunnerSink,
        batch_in: Batch,
        position: &Position,
        mut snapshot: Option<&mut SnapshotDriver>,
    ) -> Step<()> {
        let ctx = RecordContext {
            pipeline: &self.name,
            epoch: self.epoch,
            now_ms: now_ms(),
        };
        let coordinates = BinlogCoordinates {
            server_id: 0,
            file: "",
            pos: 0,
        };
        let mut batch = Vec::new();
        let (mut rows, mut transactions, mut last_commit_micros) = (0u64, 0u64, None);
        let Batch { items, mut ready } = batch_in;
        if let (Some(chunk), Some(driver)) = (&ready, snapshot.as_deref()) {
            batch.extend(self.chunk_records(records, chunk, driver, &ctx, &coordinates)?);
        }
        if let Some(driver) = snapshot.as_deref_mut() {
            driver
                .resolve_weights(items.iter().map(|(o, _)| o))
                .await
                .map_err(RunnerExit::failed)?;
        }
        for (output, after) in items {
            let output = match snapshot.as_deref_mut() {
                Some(driver) => driver.gate(output).map_err(RunnerExit::failed)?,
                None => output,
            };
            match &output {
                AssemblerOutput::Transaction(tx) => {
                    rows += tx.changes.len() as u64;
                    transactions += 1;
                    last_commit_micros = Some(tx.committed_at_micros);
                    let records = records
                        .transaction_records(tx, &coordinates, &ctx)
                        .map_err(|e| RunnerExit::failed(e.code()))?;
                    batch.extend(records);
                }
                // a DDL of a captured table (or of a captured table's database) goes to the
                // schema-change topic, in binlog order with the rows around it
                AssemblerOutput::SchemaChange { change, gtid, .. }
                    if ddl_is_captured(&self.spec.tables, change) =>
                {
                    let records = records
                        .schema_change_records(change, gtid, &coordinates, &ctx)
                        .map_err(|e| RunnerExit::failed(e.code()))?;
                    batch.extend(records);
                }
                // filtered transactions and other DDL only advance the position
                AssemblerOutput::SchemaChange { .. } | AssemblerOutput::PositionAdvanced { .. } => {
                }
            }
            if let Some(driver) = snapshot.as_deref_mut() {
                if let Some(chunk) = driver.take_ready(&after) {
                    batch.extend(self.chunk_records(
                        records,
                        &chunk,
                        driver,
                        &ctx,
                        &coordinates,
                    )?);
                    ready = Some(chunk);
                }
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
        let bytes: u64 = batch.iter().map(|r| r.approximate_size() as u64).sum();
        sink.publish(batch, position, kafka_progress)
            .await
            .map_err(|e| match e.consequence() {
                Consequence::Fenced => RunnerExit::Fenced {
                    code: e.code().to_string(),
                },
                _ => RunnerExit::failed(e.code()),
            })?;
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
        }
        if let Some(committed) = last_commit_micros {
            // commit-to-acknowledgement lag of the newest transaction of the batch
            let lag = now_ms().saturating_sub(committed / 1000) as f64 / 1000.0;
            self.metrics.set_lag_seconds(&self.name, lag);
        }
        Ok(())
    }

    /// Opens the publisher. In exactly-once mode this fences every earlier producer of the
    /// pipeline first, then resumes from whichever of the Kafka offsets record and the Raft
    /// checkpoint is ahead (bringing Raft up to date when it lags).
    async fn open_sink(
        &self,
        start: StartPosition,
        snapshot: Option<&mut PreparedSnapshot>,
    ) -> Step<(RunnerSink, StartPosition)> {
        let sink = &self.spec.sink;
        if sink.delivery == DeliveryMode::AtLeastOnce {
            let publisher =
                KafkaPublisher::new(&sink.producer).map_err(|e| RunnerExit::failed(e.code()))?;
            return Ok((RunnerSink::AtLeastOnce(publisher), start));
        }
        let raft_position = match start {
            StartPosition::Checkpoint(p) => p,
            StartPosition::Current => {
                let mut client =
                    SourceClient::open(&self.spec.source, self.spec.source.stream_timeout)
                        .await
                        .map_err(|e| RunnerExit::failed(e.code()))?;
                client
                    .positions()
                    .await
                    .map_err(|e| RunnerExit::failed(e.code()))?
                    .executed()
            }
        };
        let log = KafkaTransactionalLog::new(
            sink.producer.clone(),
            sink.transaction_timeout_ms,
            EXACTLY_ONCE_OP_TIMEOUT,
        );
        let transactional_id = sink.transactional_id(&self.name);
        self.require_lease()?;
        let (publisher, plan) = ExactlyOncePublisher::open(
            &log,
            OwnerIdentity {
                pipeline: &self.name,
                epoch: self.epoch,
                transactional_id: &transactional_id,
                offsets_topic: &sink.offsets_topic,
            },
            Checkpoint {
                position: raft_position,
                snapshot: snapshot
                    .as_deref()
                    .map(PreparedSnapshot::kafka_progress)
                    .unwrap_or_default(),
            },
        )
        .await
        .map_err(|e| RunnerExit::failed(e.code()))?;
        info!(
            pipeline = %self.name,
            epoch = self.epoch,
            source = ?plan.source,
            raft_behind = plan.raft_behind,
            "exactly-once resume point decided"
        );
        if plan.raft_behind {
            self.owner_write(Command::CommitCheckpoint {
                pipeline: self.name.clone(),
                epoch: self.epoch,
                position: plan.checkpoint.position.clone(),
            })
            .await?;
        }
        let mut progress = plan.checkpoint.snapshot;
        if let Some(prepared) = snapshot {
            // a chunk committed in Kafka whose Raft write was lost: Kafka is the authority
            let from_kafka = matches!(plan.source, CheckpointSource::Kafka);
            if from_kafka && !progress.tables.is_empty() {
                for write in prepared
                    .adopt_kafka(&progress)
                    .map_err(RunnerExit::failed)?
                {
                    self.progress_write(write).await?;
                }
            }
            let chunks = progress.chunks_committed;
            progress = prepared.kafka_progress();
            progress.chunks_committed = chunks;
        }
        Ok((
            RunnerSink::ExactlyOnce(Box::new(publisher), progress),
            StartPosition::Checkpoint(plan.checkpoint.position),
        ))
    }

    /// Where the dump starts: the replicated checkpoint, else what the definition asks for.
    async fn start_position(&self) -> Step<StartPosition> {
        let checkpoint = self
            .node
            .state
            .read(|s| s.pipeline(&self.name).and_then(|r| r.checkpoint().cloned()));
        if let Some(position) = checkpoint {
            return Ok(StartPosition::Checkpoint(position));
        }
        Ok(match &self.spec.start {
            StartAt::Current => StartPosition::Current,
            StartAt::Position(p) => StartPosition::Checkpoint(p.clone()),
            StartAt::Checkpoint => {
                // empty checkpoint: all retained history, in the server's flavour
                let client = SourceClient::open(&self.spec.source, self.spec.source.stream_timeout)
                    .await
                    .map_err(|e| RunnerExit::failed(e.code()))?;
                let flavor = detect_flavor(client.server_version());
                StartPosition::Checkpoint(Position::empty(flavor))
            }
        })
    }

    /// The records of a chunk: its rows (`op: r`), then the table's completion marker after
    /// its last chunk.
    fn chunk_records(
        &self,
        records: &RecordBuilder,
        chunk: &ReadyChunk<ChunkRows>,
        driver: &SnapshotDriver,
        ctx: &RecordContext<'_>,
        coordinates: &BinlogCoordinates<'_>,
    ) -> Step<Vec<KafkaRecord>> {
        let table = driver
            .table(&chunk.table)
            .ok_or_else(|| RunnerExit::failed("snapshot_table_not_found"))?;
        // record keys as the stream gives them: the primary key; none for a table keyed
        // by a unique key only
        let key: Vec<usize> = if table.key.from_unique_key {
            Vec::new()
        } else {
            table.key.columns.iter().map(|c| c.position).collect()
        };
        let done = driver.rows_done(&chunk.table);
        let chunk_id = format!("{}/{done}", chunk.table);
        let spec = SnapshotChunk {
            table: &chunk.table,
            key: &key,
            rows: &chunk.payload.rows,
            chunk_id: &chunk_id,
            coordinates: *coordinates,
            last_of_table: chunk.last,
            last_of_snapshot: chunk.last && driver.is_complete(),
        };
        let mut out = records
            .snapshot_records(&spec, ctx)
            .map_err(|e| RunnerExit::failed(e.code()))?;
        if chunk.last {
            let rows = done + chunk.payload.rows.len() as u64;
            out.push(
                records
                    .snapshot_complete_record(&chunk.table, rows, ctx)
                    .map_err(|e| RunnerExit::failed(e.code()))?,
            );
        }
        Ok(out)
    }

    async fn progress_write(&self, write: ProgressWrite) -> Step<()> {
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

    fn require_lease(&self) -> Step<()> {
        if self.node.holds_lease() {
            Ok(())
        } else {
            Err(RunnerExit::Fenced {
                code: "lease_expired".into(),
            })
        }
    }

    async fn report(&self, state: RunnerState) -> Step<()> {
        self.owner_write(Command::ReportStatus {
            pipeline: self.name.clone(),
            epoch: self.epoch,
            state,
            reason: None,
        })
        .await
    }

    /// A write that only the current owner may make: lease checked first, epoch carried,
    /// fencing answers stop the runner. Retriable Raft errors (no leader for a moment) are
    /// retried while the lease lasts.
    pub(super) async fn owner_write(&self, command: Command) -> Step<()> {
        loop {
            self.require_lease()?;
            match self.node.write(command.clone()).await {
                Ok(Response::Applied) => return Ok(()),
                Ok(r) if r.is_fenced() => {
                    info!(pipeline = %self.name, epoch = self.epoch, code = r.code(), "owner fenced");
                    return Err(RunnerExit::Fenced {
                        code: r.code().to_string(),
                    });
                }
                Ok(r) => return Err(RunnerExit::failed(r.code())),
                Err(e) if e.is_retriable() => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(RunnerExit::failed(e.code())),
            }
        }
    }
}

/// True when a schema change concerns what the pipeline captures: a captured table, or (for a
/// database-level statement) a database the capture list names.
fn ddl_is_captured(filter: &TableFilter, change: &SchemaChange) -> bool {
    let Some(schema) = change.schema.as_deref() else {
        return matches!(filter, TableFilter::All);
    };
    match change.table.as_deref() {
        Some(table) => filter.admits(&TableId::new(schema, table)),
        None => match filter {
            TableFilter::All | TableFilter::AllExcept(_) => true,
            TableFilter::Only(tables) => tables.iter().any(|t| t.schema == schema),
        },
    }
}

/// One batch for [`PipelineRunner::deliver`]: stream outputs with the position after each,
/// and a chunk already due before the first of them.
struct Batch {
    items: Vec<(AssemblerOutput, Position)>,
    ready: Option<ReadyChunk<ChunkRows>>,
}

/// Row changes an output carries.
fn change_count(output: &AssemblerOutput) -> usize {
    match output {
        AssemblerOutput::Transaction(tx) => tx.changes.len(),
        _ => 0,
    }
}

/// Aborts the task when dropped (the runner stopped, or failed).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
