//! The runner of one pipeline on its owner: checkpoint from Raft → binlog source → Kafka →
//! checkpoint back to Raft, carrying the owner's epoch on every write.
//!
//! # Order of effects, and what a crash costs
//!
//! A transaction's records are published and *acknowledged* by Kafka before the position that
//! covers it may be committed to Raft; commits are batched (every
//! [`CHECKPOINT_EVERY_TX`](super::engine::delivery_ledger::CHECKPOINT_EVERY_TX) transactions or
//! [`CHECKPOINT_EVERY`], whichever first). Those decisions, and every other of the stream
//! loop (batches, snapshot chunks, how it ends), are the [`StreamEngine`]'s (pure, with its
//! `DeliveryLedger`); this loop executes its commands. A crash between the two re-publishes
//! at most the un-checkpointed tail on the next owner — at-least-once, each duplicate carrying
//! the same `capstan.position`/`capstan.record` headers. Nothing is ever skipped: the position
//! only covers what was acknowledged (or deliberately filtered). A runner that is *stopped*
//! (an operator's move, a pause, a worker's SIGTERM) settles its batch in flight and commits
//! what Kafka acknowledged before it ends ([`StreamEngine::stop`]), so the next owner
//! resumes where it stopped and replays nothing.
//!
//! The position committed is the source's checkpoint together with its processed position
//! (`BinlogSource::position` / `processed`; they differ only while a MariaDB XA prepare holds
//! the checkpoint back, ADR-0008). A new owner starts the source from both
//! (`StartPosition::resume`): it reads the prepare again and skips what was already delivered
//! after it, so that window is not re-published (the exactly-once offsets record carries the
//! pair too).
//!
//! # Stages and budgets
//!
//! The source runs on a task of its own: it reads and decodes the binlog and, when no snapshot
//! gates the stream, encodes the records too ([`RecordEncoder`]), so the next batch is built on
//! the second core while this loop awaits the acknowledgements of the one before. While a
//! snapshot runs, this loop encodes after the gate, and a batch without a chunk still stays in
//! flight while the next is gated, encoded and enqueued; a chunk's batch is awaited. What waits
//! between the two is bounded by bytes ([`SOURCE_BUFFER_BYTES`]), a batch by
//! [`MAX_BATCH_BYTES`](super::engine::stream_engine::MAX_BATCH_BYTES), and a transaction larger than [`SLICE_BYTES`] comes in slices whose
//! records are published as they come, the checkpoint moving only past its last part
//! (exactly-once commits each slice with a checkpoint naming the point inside the transaction,
//! `WithinTransaction`, and a new owner resumes there).
//!
//! # Fencing
//!
//! Before every publish and every Raft write the runner checks that its node still holds the
//! lease (ADR-0004); without it the runner stops at once. Every Raft write carries the epoch;
//! a `StaleEpoch`/`Unowned` answer means another owner took over, and the runner stops without
//! a further write.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capstan_connectors::mysql::{AssemblerConfig, BinlogSource};
use capstan_kafka::record::RecordBuilder;
use capstan_kafka::registry::SchemaRegistrar;
use capstan_raft_store::{Command, Epoch, RunnerState};
use tokio::sync::watch;
use tracing::{info, warn};

use super::engine::delivery_ledger::{LedgerAction, CHECKPOINT_EVERY};
use super::engine::runner_exit::RunnerExit;
use super::engine::stream_engine::{
    resume_point, Next, SourceEnd, StreamCommand, StreamEngine, Take, Taken,
};
use super::pipeline_spec::CheckedPipelineSpec;
use super::record_encoder::RecordEncoder;
use super::runner_deliver::Batch;
use super::runner_sink::RunnerSink;
use super::snapshot_driver::SnapshotDriver;
use super::source_link_gauge::SourceLinkGauge;
use super::source_task::{payload_rows, source_end, SourceTask};
use super::spec_secrets::{resolve_secrets, HostSecrets};
use crate::metrics::Metrics;
use crate::node::Node;

/// Bound on each blocking exactly-once call (init, commit, abort, offsets read).
pub(super) const EXACTLY_ONCE_OP_TIMEOUT: Duration = Duration::from_secs(30);
/// A transaction holding more decoded changes than this is handed out by the source in slices
/// of about this size (see `AssemblerOutput::Slice`), so no stage holds a large transaction
/// whole; exactly-once commits each slice on its own (`WithinTransaction`).
pub const SLICE_BYTES: usize = 8 << 20;
/// The decoded changes waiting between the source task and the publisher, at most.
pub const SOURCE_BUFFER_BYTES: usize = 32 << 20;
// an output's permits are capped at the source budget: a capped one still fills a batch
const _: () = assert!(SOURCE_BUFFER_BYTES >= super::engine::stream_engine::MAX_BATCH_BYTES);
/// Resolves once `stop` turns true (an error once its sender is gone). Maps the watch's
/// guard away, so a `select!` holding the result stays `Send`.
async fn wait_stop(stop: &mut watch::Receiver<bool>) -> Result<(), watch::error::RecvError> {
    stop.wait_for(|s| *s).await.map(|_| ())
}

/// How long a stopped runner may take to settle its batch in flight and commit its checkpoint
/// (within the supervisor's 2 s wait at shutdown).
const STOP_GRACE: Duration = Duration::from_millis(1500);

/// One pipeline incarnation: a name, an owner epoch, a checked definition.
#[derive(Debug)]
pub struct PipelineRunner {
    pub(super) node: Arc<Node>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) name: String,
    pub(super) epoch: Epoch,
    /// The term of this node's lease the runner started in: it may act only while that term
    /// lasts (a lease renewed after a break does not revive it; see `OwnerLease`).
    pub(super) lease_term: u64,
    pub(super) spec: CheckedPipelineSpec,
    /// The source's connection in the metrics, for this run.
    link: Arc<SourceLinkGauge>,
    /// `format: avro`: frames each batch's records with their schema ids before they are sent
    /// (created with the sink, once the secrets are resolved).
    pub(super) registrar: std::sync::OnceLock<Arc<SchemaRegistrar>>,
}

/// Why a step stopped the runner.
pub(super) type Step<T> = Result<T, RunnerExit>;

impl PipelineRunner {
    /// A runner for `name` at `epoch`, acting within the lease term `lease_term`.
    pub fn new(
        node: Arc<Node>,
        metrics: Arc<Metrics>,
        name: String,
        (epoch, lease_term): (Epoch, u64),
        spec: CheckedPipelineSpec,
    ) -> Self {
        let link = SourceLinkGauge::new(metrics.clone(), &name);
        PipelineRunner {
            node,
            metrics,
            name,
            epoch,
            lease_term,
            spec,
            link,
            registrar: std::sync::OnceLock::new(),
        }
    }

    /// Runs until `stop` turns true, the owner is fenced, or the pipeline halts.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> RunnerExit {
        self.metrics.runner_started(&self.name);
        // secrets given as references are read here, on the owner, and nowhere else; one that
        // is missing may appear (a mounted secret, a fixed environment on another worker), so
        // it is retried, visibly
        let resolved = resolve_secrets(self.spec.clone(), &HostSecrets);
        let outcome = match resolved {
            Ok(spec) => {
                self.spec = spec;
                let stream = self.stream(stop.clone());
                tokio::pin!(stream);
                let ended = tokio::select! {
                    exit = &mut stream => Some(exit),
                    _ = stop.wait_for(|s| *s) => None,
                };
                match ended {
                    Some(exit) => exit,
                    // the stream sees the stop too: it settles what Kafka holds and commits
                    // that as the checkpoint, so the next owner replays nothing; a stream
                    // still starting, or slow to settle, is dropped after the grace
                    None => tokio::time::timeout(STOP_GRACE, &mut stream)
                        .await
                        .unwrap_or(RunnerExit::Stopped),
                }
            }
            Err(e) => RunnerExit::Retry {
                code: e.code().to_string(),
                detail: e.to_string(),
            },
        };
        self.link.close();
        // a runner that lost its ownership while it ran (frozen, cut off) is fenced, whatever
        // error it then met (`RunnerExit::fenced_if_deposed`)
        let holds_lease = self.node.holds_lease_term(self.lease_term);
        let outcome = outcome.fenced_if_deposed(holds_lease, self.owns_at_epoch());
        if let Some((state, code, detail)) = outcome.report() {
            if state == RunnerState::Retrying {
                warn!(pipeline = %self.name, epoch = self.epoch, code = %code, detail = detail.unwrap_or(""), "transient fault: the pipeline will be retried");
                self.metrics.record_retry(&self.name, code);
            } else {
                warn!(pipeline = %self.name, epoch = self.epoch, code = %code, detail = detail.unwrap_or(""), "pipeline halted");
            }
            let _ = self
                .owner_write(Command::ReportStatus {
                    pipeline: self.name.clone(),
                    epoch: self.epoch,
                    state,
                    reason: Some(code.to_string()),
                    detail: detail.map(str::to_string),
                })
                .await;
        }
        outcome
    }

    async fn stream(&self, stop: watch::Receiver<bool>) -> RunnerExit {
        match self.stream_inner(stop).await {
            Ok(never) => match never {},
            Err(exit) => exit,
        }
    }

    async fn stream_inner(
        &self,
        mut stop: watch::Receiver<bool>,
    ) -> Step<std::convert::Infallible> {
        self.report(RunnerState::Starting).await?;
        // the snapshot first: on the first start it commits the stream floor P0 as the
        // checkpoint, which the start position below then resumes from
        let mut prepared = self.snapshot_start().await?;
        let start = self.start_position().await?;
        let (mut sink, start, within) = self.open_sink(start, prepared.as_mut()).await?;
        let mut snapshot = match prepared {
            Some(p) if !p.is_complete() => {
                let mut driver = SnapshotDriver::new(p).await.map_err(RunnerExit::failed)?;
                driver.set_kafka_chunks(sink.snapshot_chunks());
                Some(driver)
            }
            _ => None,
        };
        // a large transaction comes in slices, in both modes. Exactly-once commits each slice
        // in a Kafka transaction of its own, with a checkpoint inside the source transaction
        // (`WithinTransaction`): one Kafka transaction for a whole 2M-row source transaction
        // outlives the broker's `transaction_timeout_ms` and is aborted, its producer fenced
        // (seen live 2026-12-05)
        let assembler = AssemblerConfig {
            filter: self.spec.tables.clone(),
            columns: self.spec.source.columns.clone(),
            xa: self.spec.xa,
            slice_bytes: Some(SLICE_BYTES),
            ..AssemblerConfig::default()
        };
        let source = BinlogSource::start_observed(
            self.spec.source.clone(),
            start,
            assembler,
            self.link.observer(),
        )
        .await
        .map_err(|e| RunnerExit::from_source(&e))?;
        if let Some(driver) = snapshot.as_mut() {
            // the chunks must come from the server the stream reads
            driver
                .bind_source(self.spec.source.clone(), source.server_identity())
                .await
                .map_err(RunnerExit::failed)?;
        }
        let mut options = self.spec.sink.record_options.clone();
        options.flavor = source.flavor();
        let mut encoder = RecordEncoder::new(
            RecordBuilder::new(options),
            &self.name,
            self.epoch,
            self.spec.tables.clone(),
        );
        // with no snapshot to gate the stream, records are encoded on the source task, beside
        // the publish of the batch before (the second core); a snapshot keeps encoding here,
        // after its gate, for the rest of this incarnation
        let mut source_encoder = snapshot.is_none().then(|| {
            RecordEncoder::new(
                encoder.builder().clone(),
                &self.name,
                self.epoch,
                self.spec.tables.clone(),
            )
        });
        if let Some(within) = within {
            // exactly-once, inside a transaction committed in slices: the encoder that will
            // see its replay first cuts it after the committed slices
            let first = source_encoder.as_mut().unwrap_or(&mut encoder);
            let cut =
                first
                    .resume_inside(&within, source.flavor())
                    .map_err(|e| RunnerExit::Failed {
                        code: e.code().to_string(),
                        detail: Some(e.to_string()),
                    })?;
            if cut {
                info!(pipeline = %self.name, epoch = self.epoch, gtid = %within.gtid, next_change = within.next_change, "resuming inside a transaction committed in slices");
            } else {
                warn!(pipeline = %self.name, epoch = self.epoch, gtid = %within.gtid, next_change = within.next_change, "the capture list changed inside a transaction committed in slices: its committed slices are published again");
            }
        }
        if snapshot.is_some() {
            self.report(RunnerState::Snapshotting).await?;
            info!(pipeline = %self.name, epoch = self.epoch, flavor = %source.flavor(), "snapshotting");
        } else {
            self.report(RunnerState::Streaming).await?;
            info!(pipeline = %self.name, epoch = self.epoch, flavor = %source.flavor(), "streaming");
        }

        // The source runs in its own task (`SourceTask`: its channel is cancel-safe, reading
        // the binlog is not). Every decision of the loop is the engine's (pure,
        // `StreamEngine`); the loop reads, publishes and writes what it is told, and reports
        // back. The source's checkpoint
        // (what a restart resumes from) and its processed position (what snapshot chunks go
        // by; ahead only while a MariaDB XA prepare is pending, ADR-0008) travel as one pair.
        let start = resume_point(source.position(), source.processed())?;
        let mode = self.spec.snapshot.as_ref().map(|s| s.mode);
        let mut engine = StreamEngine::new(start, snapshot.is_some(), mode, Instant::now());
        let (_source_task, mut rx) = SourceTask::spawn(source, source_encoder);
        let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
        loop {
            let backlog = !rx.is_empty();
            let due = snapshot
                .as_ref()
                .and_then(|d| d.chunk_due_in(backlog, engine.point().processed()));
            let wait = match engine.next(backlog, encoder.inside_transaction(), due) {
                // read while the stream waits in the channel, so the processed position is
                // at or before the chunk's position G (chunks go by the processed position,
                // not the checkpoint: see `StreamEngine::next`)
                Next::ReadChunk { processed, backlog } => {
                    if let Some(driver) = snapshot.as_mut() {
                        // every chunk read that may go now goes, one batch each, before the
                        // stream is read again (a transaction would drop those it passes)
                        let mut ready = driver
                            .read_chunk(&processed, backlog)
                            .await
                            .map_err(RunnerExit::failed)?;
                        while ready.is_some() {
                            let batch = Batch {
                                items: Vec::new(),
                                ready,
                            };
                            let point = engine.point().clone();
                            self.deliver(&mut encoder, &mut sink, batch, &point, Some(driver))
                                .await?;
                            ready = driver.take_ready(&processed);
                        }
                    }
                    Duration::ZERO
                }
                Next::Wait(wait) => wait,
            };
            let commands = tokio::select! {
                item = rx.recv() => {
                    // take whatever else is already waiting, up to the engine's bound, and
                    // publish it as one batch
                    let mut items = Vec::new();
                    let mut permits = Vec::new();
                    let mut next = item;
                    let taken = loop {
                        let Some((item, permit)) = next.take() else {
                            break Err(engine.source_ended(SourceEnd::Closed));
                        };
                        // the permits are the output's size (capped at the source budget,
                        // which is above a batch's: the cap never hides a full batch)
                        let bytes = permit.num_permits();
                        permits.push(permit);
                        let (payload, checkpoint, processed) = match item {
                            Ok(ok) => ok,
                            Err(e) => break Err(engine.source_ended(source_end(e))),
                        };
                        let taken = Taken {
                            rows: payload_rows(&payload),
                            bytes,
                            checkpoint,
                            processed: processed.clone(),
                        };
                        items.push((payload, processed));
                        let mut take = engine.taken(taken, !rx.is_empty());
                        if take == Take::More {
                            match rx.try_recv() {
                                Ok(item) => next = Some(item),
                                Err(_) => take = engine.cut(),
                            }
                        }
                        match take {
                            Take::More => {}
                            Take::Publish(point) => break Ok(point),
                            Take::Halt(exit) => return Err(exit),
                        }
                    };
                    match taken {
                        Ok(point) => {
                            let batch = Batch { items, ready: None };
                            let outcome = self
                                .deliver(&mut encoder, &mut sink, batch, &point, snapshot.as_mut())
                                .await?;
                            drop(permits);
                            engine.published(outcome)
                        }
                        Err(commands) => commands,
                    }
                }
                _ = tick.tick() => Vec::new(),
                _ = tokio::time::sleep(wait) => Vec::new(),
                Ok(()) = wait_stop(&mut stop) => engine.stop(),
            };
            self.execute(&mut engine, &mut sink, snapshot.as_ref(), commands)
                .await?;
            // nothing waits behind the batch in flight: acknowledge it now rather than with
            // a batch that may be long in coming; else commit the checkpoint when due
            let complete = snapshot.as_ref().is_some_and(SnapshotDriver::is_complete);
            let commands = engine.idle(!rx.is_empty(), complete, Instant::now());
            if complete {
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
            }
            self.execute(&mut engine, &mut sink, snapshot.as_ref(), commands)
                .await?;
        }
    }

    /// Executes the engine's commands in order, and those they lead to; an exit ends the
    /// stream.
    async fn execute(
        &self,
        engine: &mut StreamEngine,
        sink: &mut RunnerSink,
        snapshot: Option<&SnapshotDriver>,
        commands: Vec<StreamCommand>,
    ) -> Step<()> {
        let mut queue = std::collections::VecDeque::from(commands);
        while let Some(command) = queue.pop_front() {
            match command {
                StreamCommand::Ledger(LedgerAction::Settle) => {
                    sink.settle().await.map_err(|e| RunnerExit::from_sink(&e))?;
                    queue.extend(engine.settled(Instant::now()));
                }
                StreamCommand::Ledger(LedgerAction::RecordLag {
                    committed_at_micros,
                }) => self.record_lag(Some(committed_at_micros)),
                StreamCommand::Ledger(LedgerAction::CommitCheckpoint(point)) => {
                    self.commit_checkpoint(&point).await?;
                    queue.extend(engine.committed(point, Instant::now()));
                }
                StreamCommand::MarkSnapshotLost => {
                    if let Some(driver) = snapshot {
                        self.snapshot_mark_lost(driver).await;
                    }
                }
                StreamCommand::Report(state) => self.report(state).await?,
                StreamCommand::Exit(exit) => return Err(exit),
            }
        }
        Ok(())
    }
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
