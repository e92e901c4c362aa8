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
//! The position committed is the source's checkpoint together with its processed position
//! (`BinlogSource::position` / `processed`; they differ only while a MariaDB XA prepare holds
//! the checkpoint back, ADR-0008). A new owner starts the source from both
//! (`StartPosition::resume`): it reads the prepare again and skips what was already delivered
//! after it, so that window is not re-published (the exactly-once offsets record carries the
//! pair too).
//!
//! # Fencing
//!
//! Before every publish and every Raft write the runner checks that its node still holds the
//! lease (ADR-0004); without it the runner stops at once. Every Raft write carries the epoch;
//! a `StaleEpoch`/`Unowned` answer means another owner took over, and the runner stops without
//! a further write.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capstan_connectors::mysql::{AssemblerConfig, AssemblerOutput, BinlogSource};
use capstan_core::position::Position;
use capstan_kafka::publisher::Fence;
use capstan_kafka::record::RecordBuilder;
use capstan_raft_store::{Command, Epoch, Response, RunnerState};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use super::pipeline_spec::CheckedPipelineSpec;
use super::runner_deliver::Batch;
use super::runner_exit::RunnerExit;
use super::snapshot_driver::SnapshotDriver;
use crate::fault_point::FaultPoint;
use crate::metrics::Metrics;
use crate::node::Node;

/// Commit the checkpoint after this many transactions…
pub const CHECKPOINT_EVERY_TX: u64 = 1_000;
/// …or after this long, whichever comes first.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);
/// Bound on each blocking exactly-once call (init, commit, abort, offsets read).
pub(super) const EXACTLY_ONCE_OP_TIMEOUT: Duration = Duration::from_secs(30);
/// At most this many source transactions are published as one batch…
pub const MAX_BATCH_TX: usize = 500;
/// …and no more once the batch holds this many row changes (a single larger transaction
/// is still published whole: the batch bounds memory, the transaction is the source's).
pub const MAX_BATCH_ROWS: usize = 20_000;

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
}

/// Why a step stopped the runner.
type Step<T> = Result<T, RunnerExit>;

impl PipelineRunner {
    /// A runner for `name` at `epoch`, acting within the lease term `lease_term`.
    pub fn new(
        node: Arc<Node>,
        metrics: Arc<Metrics>,
        name: String,
        (epoch, lease_term): (Epoch, u64),
        spec: CheckedPipelineSpec,
    ) -> Self {
        PipelineRunner {
            node,
            metrics,
            name,
            epoch,
            lease_term,
            spec,
        }
    }

    /// Runs until `stop` turns true, the owner is fenced, or the pipeline halts.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> RunnerExit {
        let outcome = tokio::select! {
            exit = self.stream() => exit,
            _ = stop.wait_for(|s| *s) => RunnerExit::Stopped,
        };
        // a runner that lost its ownership while it ran (frozen, cut off) is fenced, whatever
        // error it then met: a deposed owner neither halts nor retries the pipeline
        let outcome = match outcome {
            RunnerExit::Failed { .. } | RunnerExit::Retry { .. } if !self.still_owner() => {
                let code = if self.node.holds_lease_term(self.lease_term) {
                    "stale_epoch"
                } else {
                    "lease_expired"
                };
                RunnerExit::Fenced { code: code.into() }
            }
            // stopped because its lease broke (the supervisor stops such runners): fenced
            RunnerExit::Stopped if !self.node.holds_lease_term(self.lease_term) => {
                RunnerExit::Fenced {
                    code: "lease_expired".into(),
                }
            }
            other => other,
        };
        let report = match &outcome {
            RunnerExit::Failed { code, detail } => {
                warn!(pipeline = %self.name, epoch = self.epoch, code = %code, detail = detail.as_deref().unwrap_or(""), "pipeline halted");
                Some((RunnerState::Failed, code, detail.clone()))
            }
            RunnerExit::Retry { code, detail } => {
                warn!(pipeline = %self.name, epoch = self.epoch, code = %code, detail = %detail, "transient fault: the pipeline will be retried");
                self.metrics.record_retry(&self.name);
                Some((RunnerState::Retrying, code, Some(detail.clone())))
            }
            RunnerExit::Stopped | RunnerExit::Fenced { .. } => None,
        };
        if let Some((state, code, detail)) = report {
            let _ = self
                .owner_write(Command::ReportStatus {
                    pipeline: self.name.clone(),
                    epoch: self.epoch,
                    state,
                    reason: Some(code.clone()),
                    detail,
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
        // `processed` is the source's checkpoint (what a restart resumes from); `delivered`
        // its processed position (what snapshot chunks go by), ahead of it only while a MariaDB
        // XA prepare is pending (ADR-0008). Both are committed, as one pair.
        let mut processed: Position = source.position().clone();
        let mut delivered: Position = source.processed().clone();
        let mut committed = (processed.clone(), delivered.clone());
        let (tx, mut rx) = mpsc::channel(256);
        let _source_task = AbortOnDrop(tokio::spawn(async move {
            loop {
                let item = source
                    .next()
                    .await
                    .map(|o| (o, source.position().clone(), source.processed().clone()));
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
            // so the processed position is at or before the chunk's position G. Chunks go by
            // the processed position (every transaction handed out, so gated), not by the
            // checkpoint: held back behind a pending MariaDB prepare (ADR-0008), the checkpoint
            // would keep a chunk waiting while later changes of its rows were gated, and
            // suppressed, past its G
            if let Some(driver) = snapshot.as_mut() {
                let backlog = !rx.is_empty();
                if driver.chunk_due_in(backlog) == Some(Duration::ZERO) {
                    let ready = driver
                        .read_chunk(&delivered, backlog)
                        .await
                        .map_err(RunnerExit::failed)?;
                    if ready.is_some() {
                        let batch = Batch {
                            items: Vec::new(),
                            ready,
                        };
                        self.deliver(
                            &records,
                            &mut sink,
                            batch,
                            &processed,
                            &delivered,
                            Some(driver),
                        )
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
                        let (output, position, handed_out) = match item {
                            Ok(ok) => ok,
                            Err(e) => {
                                if e.code() == "data_gap" {
                                    if let Some(driver) = snapshot.as_ref() {
                                        self.snapshot_mark_lost(driver).await;
                                        return Err(RunnerExit::failed("snapshot_data_gap"));
                                    }
                                }
                                return Err(RunnerExit::from_source(&e));
                            }
                        };
                        rows += change_count(&output);
                        processed = position;
                        items.push((output, handed_out.clone()));
                        delivered = handed_out;
                        if items.len() < MAX_BATCH_TX && rows < MAX_BATCH_ROWS {
                            next = rx.try_recv().ok();
                        }
                    }
                    since_commit += items.len() as u64;
                    let batch = Batch { items, ready: None };
                    self.deliver(
                        &records,
                        &mut sink,
                        batch,
                        &processed,
                        &delivered,
                        snapshot.as_mut(),
                    )
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
            if due && (&processed, &delivered) != (&committed.0, &committed.1) {
                self.owner_write(Command::CommitCheckpoint {
                    pipeline: self.name.clone(),
                    epoch: self.epoch,
                    position: processed.clone(),
                    processed: (delivered != processed).then(|| delivered.clone()),
                })
                .await?;
                committed = (processed.clone(), delivered.clone());
                since_commit = 0;
                last_commit = Instant::now();
            }
        }
    }

    /// This node holds its lease (in the runner's term) and still owns the pipeline at this
    /// runner's epoch.
    fn still_owner(&self) -> bool {
        self.node.holds_lease_term(self.lease_term)
            && self.node.state.read(|s| {
                s.pipeline(&self.name)
                    .is_some_and(|r| r.owner() == Some(self.node.id) && r.epoch() == self.epoch)
            })
    }

    /// The at-least-once publisher's fence, asked before every record is enqueued: it holds
    /// while this node holds its lease without a break since the runner started (ADR-0004: an
    /// owner without a valid lease publishes nothing), so a batch stops mid-way when the lease
    /// runs out during it, and a frozen owner that renews on waking stays stopped.
    pub(super) fn publish_fence(&self) -> Fence {
        let node = self.node.clone();
        let term = self.lease_term;
        Arc::new(move || {
            let holds = node.holds_lease_term(term);
            if holds {
                FaultPoint::PublishLeaseChecked.hit();
            }
            holds
        })
    }

    pub(super) fn require_lease(&self) -> Step<()> {
        if self.node.holds_lease_term(self.lease_term) {
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
            detail: None,
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

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
