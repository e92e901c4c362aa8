//! [`ExactlyOncePublisher`]: one Kafka transaction per batch, carrying the batch's rows and
//! the pipeline's offsets record.
//!
//! # Why this is exactly once
//!
//! A batch is the records of one or more source transactions (or of one snapshot chunk),
//! together with the checkpoint that covers them. `publish` writes, inside one Kafka
//! transaction, the rows and then an offsets record `{pipeline, epoch, checkpoint}` to the
//! compacted offsets topic, and commits. Kafka makes the commit atomic across partitions and
//! topics: a read_committed consumer sees all of the batch's rows *and* the offsets record, or
//! none of them. So at every instant the latest committed offsets record of a pipeline names
//! exactly what has been published.
//!
//! The owner records the checkpoint in Raft only *after* the commit. If it dies between the
//! two, Raft lags; [`ResumePlan`] therefore resumes from whichever checkpoint covers the
//! other, which after such a crash is the Kafka one.
//!
//! # Fencing, and why it happens before the read
//!
//! [`ExactlyOncePublisher::open`] first calls `init_transactions` for the pipeline's
//! `transactional.id` (derived from the pipeline name, so every owner of the pipeline uses the
//! same one), and only then reads the offsets topic. `init_transactions` bumps the id's epoch:
//!
//! 1. the previous owner's producer — perhaps a zombie that lost its lease but is still
//!    running — is fenced: its next send or commit fails, so it can never commit again;
//! 2. the transaction it left open is aborted, so its half-written rows never become visible,
//!    and the offsets topic's last stable offset moves past it.
//!
//! After that, the committed content of the offsets topic can no longer change behind the new
//! owner's back, so the offsets record it reads is final. Reading *before* fencing would race
//! with a zombie's last commit and could resume from a checkpoint one batch too old (a
//! duplicate).
//!
//! # A source transaction larger than memory
//!
//! A source transaction handed out in slices is committed slice by slice: each slice's records
//! go into a Kafka transaction of their own with an offsets record whose checkpoint stays
//! before the source transaction and names the point inside it
//! ([`Checkpoint::within`](super::Checkpoint), [`WithinTransaction`](super::WithinTransaction)).
//! One Kafka transaction for the whole source transaction would stay open for as long as it
//! takes to publish, and the broker aborts a transaction older than `transaction_timeout_ms`
//! (seen live: a 2M-row transaction never finished, its producer fenced at every try). So a
//! read_committed consumer sees such a transaction slice by slice, each slice exactly once;
//! an owner that dies between slices leaves its open slice to be aborted by the next owner's
//! `init_transactions`, and the next owner resumes inside the transaction, after the last
//! committed slice.
//!
//! # Failures
//!
//! A failed batch is aborted (best effort; if the abort fails too, the broker aborts it on
//! the transaction timeout or the next `init_transactions`). Nothing of it is visible, the
//! caller must not checkpoint it, and it may retry the same batch (a retriable error) with a
//! new transaction. A fenced publisher stops for good: [`SinkError::ProducerFenced`].

use super::checkpoint::Checkpoint;
use super::offsets_record::{OffsetsRecord, OFFSETS_RECORD_VERSION};
use super::resume_plan::ResumePlan;
use super::transactional_log::{TransactionalLog, TransactionalProducer};
use crate::record::KafkaRecord;
use crate::SinkError;

/// A step of one batch's transaction, reported to the hook of
/// [`ExactlyOncePublisher::with_step_hook`] right after it completed (tests crash there).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PublishStep {
    /// The batch's rows are acknowledged inside the open transaction (not reported for a
    /// batch without rows).
    RowsSent,
    /// The offsets record is acknowledged too; the transaction is not yet committed (not
    /// reported for a transaction without rows, so a crash here always leaves rows to abort).
    OffsetsSent,
    /// The transaction committed; the caller has not yet recorded it in Raft.
    Committed,
}

/// Publishes batches transactionally for one pipeline and one owner epoch.
pub struct ExactlyOncePublisher<P: TransactionalProducer> {
    producer: P,
    pipeline: String,
    epoch: u64,
    offsets_topic: String,
    incarnation: Option<String>,
    fenced: bool,
    /// A Kafka transaction is open.
    open: bool,
    step_hook: Option<fn(PublishStep)>,
}

impl<P: TransactionalProducer> std::fmt::Debug for ExactlyOncePublisher<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactlyOncePublisher")
            .field("pipeline", &self.pipeline)
            .field("epoch", &self.epoch)
            .field("offsets_topic", &self.offsets_topic)
            .field("fenced", &self.fenced)
            .finish()
    }
}

/// Who opens the publisher, and where the offsets live.
#[derive(Clone, Copy, Debug)]
pub struct OwnerIdentity<'a> {
    /// The pipeline name.
    pub pipeline: &'a str,
    /// This owner's epoch (from Raft).
    pub epoch: u64,
    /// The pipeline's `transactional.id` (see `CheckedSinkConfig::transactional_id`).
    pub transactional_id: &'a str,
    /// The compacted offsets topic.
    pub offsets_topic: &'a str,
    /// This life of the pipeline (Raft's incarnation id). Offsets records of another life are
    /// ignored: a pipeline deleted and created again, reset (`DELETE …/offsets`), or created
    /// by another cluster on the same Kafka starts over, whatever Kafka still holds.
    pub incarnation: Option<&'a str>,
}

impl<P: TransactionalProducer> ExactlyOncePublisher<P> {
    /// Becomes the pipeline's publisher: fences every earlier producer of the pipeline, reads
    /// the latest committed offsets record, and decides where to resume given the Raft
    /// checkpoint `raft`. See the module documentation for why the order matters.
    pub async fn open<L>(
        log: &L,
        owner: OwnerIdentity<'_>,
        raft: Checkpoint,
    ) -> Result<(Self, ResumePlan), SinkError>
    where
        L: TransactionalLog<Producer = P>,
    {
        let producer = log.init_producer(owner.transactional_id).await?;
        let last = log
            .latest_committed(owner.offsets_topic, owner.pipeline.as_bytes())
            .await?;
        let kafka = match OffsetsRecord::parse_latest(owner.pipeline, last.as_ref())? {
            Some(stale) if stale.incarnation.as_deref() != owner.incarnation => {
                tracing::info!(
                    pipeline = %owner.pipeline,
                    epoch = owner.epoch,
                    record_epoch = stale.epoch,
                    "offsets record of an earlier life of the pipeline ignored"
                );
                None
            }
            record => record.map(|r| r.checkpoint),
        };
        let plan = ResumePlan::decide(owner.pipeline, kafka, raft)?;
        tracing::info!(
            pipeline = %owner.pipeline,
            epoch = owner.epoch,
            source = ?plan.source,
            raft_behind = plan.raft_behind,
            "exactly-once publisher opened"
        );
        Ok((
            ExactlyOncePublisher {
                producer,
                pipeline: owner.pipeline.to_string(),
                epoch: owner.epoch,
                offsets_topic: owner.offsets_topic.to_string(),
                incarnation: owner.incarnation.map(str::to_string),
                fenced: false,
                open: false,
                step_hook: None,
            },
            plan,
        ))
    }

    /// Publishes `records` and the offsets record for `checkpoint` in one Kafka transaction.
    /// `Ok` means committed: the caller may now record `checkpoint` in Raft.
    pub async fn publish(
        &mut self,
        records: &[KafkaRecord],
        checkpoint: &Checkpoint,
    ) -> Result<(), SinkError> {
        self.usable()?;
        let offsets = OffsetsRecord {
            version: OFFSETS_RECORD_VERSION,
            pipeline: self.pipeline.clone(),
            epoch: self.epoch,
            checkpoint: checkpoint.clone(),
            incarnation: self.incarnation.clone(),
        }
        .to_record(&self.offsets_topic)?;
        let result = self.transaction(records, offsets).await;
        self.failed(&result).await;
        result
    }

    /// Refuses a publish once fenced.
    fn usable(&self) -> Result<(), SinkError> {
        if self.fenced {
            return Err(SinkError::ProducerFenced);
        }
        Ok(())
    }

    /// After a failed step: a fenced publisher stops for good; otherwise the open transaction
    /// is aborted (nothing of it becomes visible) and the next batch begins a new one.
    async fn failed(&mut self, result: &Result<(), SinkError>) {
        if let Err(e) = result {
            self.open = false;
            if *e == SinkError::ProducerFenced {
                self.fenced = true;
            } else if let Err(abort) = self.producer.abort().await {
                // Left open: the broker aborts it on timeout or at the next owner's init.
                tracing::warn!(pipeline = %self.pipeline, code = abort.code(), "abort failed");
                if abort == SinkError::ProducerFenced {
                    self.fenced = true;
                }
            }
        }
    }

    /// Begins a transaction, sends `records` and then the offsets record in it, and commits.
    async fn transaction(
        &mut self,
        records: &[KafkaRecord],
        offsets: KafkaRecord,
    ) -> Result<(), SinkError> {
        let hook = self.step_hook.unwrap_or(|_| {});
        if !self.open {
            self.producer.begin().await?;
            self.open = true;
        }
        self.producer.send(records).await?;
        // a batch may carry no rows (only a position to record, when the transactions it read
        // touched no captured table): there are none to be acknowledged then
        if !records.is_empty() {
            hook(PublishStep::RowsSent);
        }
        self.producer.send(std::slice::from_ref(&offsets)).await?;
        if !records.is_empty() {
            hook(PublishStep::OffsetsSent);
        }
        self.producer.commit().await?;
        self.open = false;
        hook(PublishStep::Committed);
        Ok(())
    }

    /// Calls `hook` after each step of every batch's transaction (the worker's crash
    /// injection for tests).
    pub fn with_step_hook(mut self, hook: fn(PublishStep)) -> Self {
        self.step_hook = Some(hook);
        self
    }

    /// True once a newer owner fenced this publisher.
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The underlying producer (tests use it to simulate a crash).
    pub fn into_producer(self) -> P {
        self.producer
    }
}
