//! Where a runner's records go: the at-least-once publisher, or the exactly-once publisher
//! that commits each batch together with the pipeline's offsets record in one Kafka
//! transaction (ADR-0003).

use capstan_core::position::ResumePoint;
use capstan_kafka::exactly_once::{
    Checkpoint, ExactlyOncePublisher, KafkaTransactionalProducer, SnapshotProgress,
    WithinTransaction,
};
use capstan_kafka::publisher::{Acknowledgements, KafkaPublisher};
use capstan_kafka::record::KafkaRecord;
use capstan_kafka::SinkError;

/// How far [`RunnerSink::send`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Acknowledged (exactly-once: committed).
    Durable,
    /// Enqueued; every batch before it is acknowledged, its own acknowledgements are awaited
    /// with the next send, [`RunnerSink::settle`] or any publish.
    InFlight,
}

/// The publisher of one runner.
pub enum RunnerSink {
    /// Idempotent producer; a batch is done when every record is acknowledged. At most one
    /// batch may be in flight (enqueued, its acknowledgements not yet awaited) while the
    /// next is encoded and enqueued behind it.
    AtLeastOnce(KafkaPublisher, Option<Acknowledgements>),
    /// Transactional producer; a batch is done when its Kafka transaction committed. The
    /// snapshot progress last published rides along in every later offsets record.
    ExactlyOnce(
        Box<ExactlyOncePublisher<KafkaTransactionalProducer>>,
        SnapshotProgress,
    ),
}

impl std::fmt::Debug for RunnerSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunnerSink::AtLeastOnce(..) => f.write_str("RunnerSink::AtLeastOnce"),
            RunnerSink::ExactlyOnce(p, _) => write!(f, "RunnerSink::ExactlyOnce({p:?})"),
        }
    }
}

impl RunnerSink {
    /// Exactly-once: the snapshot chunks counted in the last offsets record (0 otherwise).
    pub fn snapshot_chunks(&self) -> u64 {
        match self {
            RunnerSink::AtLeastOnce(..) => 0,
            RunnerSink::ExactlyOnce(_, last) => last.chunks_committed,
        }
    }

    /// Publishes the records of a part of a transaction the source hands out in slices,
    /// without moving the checkpoint past the transaction: `point` stays before it, `within`
    /// names how far into it the records go. At-least-once: acknowledged (a restart replays
    /// the transaction whole); exactly-once: committed in a Kafka transaction of its own with
    /// the offsets record at `point` inside the transaction, so a new owner goes on after it.
    pub async fn publish_part(
        &mut self,
        records: Vec<KafkaRecord>,
        point: &ResumePoint,
        within: WithinTransaction,
    ) -> Result<(), SinkError> {
        match self {
            RunnerSink::AtLeastOnce(p, in_flight) => publish_now(p, in_flight, records).await,
            RunnerSink::ExactlyOnce(p, last) => {
                let checkpoint = Checkpoint::at(point.clone(), last.clone()).inside(Some(within));
                p.publish(&records, &checkpoint).await
            }
        }
    }

    /// Publishes `records`, which bring the checkpoint and the processed position to `point`
    /// (the processed position ahead only while a MariaDB XA prepare is pending, ADR-0008),
    /// and waits for them and for the batch in flight before them. In exactly-once mode the
    /// batch and the offsets record naming both commit atomically; a batch
    /// without records is still committed there, so the offsets record keeps up with
    /// filtered traffic. `snapshot` is the snapshot progress once this batch is published
    /// (exactly-once: committed with it; `None` keeps the last one).
    pub async fn publish(
        &mut self,
        records: Vec<KafkaRecord>,
        point: &ResumePoint,
        snapshot: Option<SnapshotProgress>,
    ) -> Result<(), SinkError> {
        match self {
            RunnerSink::AtLeastOnce(p, in_flight) => publish_now(p, in_flight, records).await,
            RunnerSink::ExactlyOnce(p, last) => {
                let checkpoint =
                    Checkpoint::at(point.clone(), snapshot.unwrap_or_else(|| last.clone()));
                p.publish(&records, &checkpoint).await?;
                *last = checkpoint.snapshot;
                Ok(())
            }
        }
    }

    /// Sends `records`, which bring the checkpoint and the processed position to `point`,
    /// without waiting for their acknowledgements where it can: at-least-once
    /// enqueues them behind the batch in flight, waits for that batch's acknowledgements and
    /// returns [`Sent::InFlight`] (they are the batch in flight now); exactly-once publishes
    /// them with the offsets record as [`RunnerSink::publish`] does ([`Sent::Durable`]).
    pub async fn send(
        &mut self,
        records: Vec<KafkaRecord>,
        point: &ResumePoint,
    ) -> Result<Sent, SinkError> {
        match self {
            RunnerSink::AtLeastOnce(p, in_flight) => {
                let acks = p.enqueue(records).await?;
                settle(in_flight).await?;
                *in_flight = Some(acks);
                Ok(Sent::InFlight)
            }
            RunnerSink::ExactlyOnce(..) => {
                self.publish(records, point, None).await?;
                Ok(Sent::Durable)
            }
        }
    }

    /// Waits for the acknowledgements of the batch in flight, if any.
    pub async fn settle(&mut self) -> Result<(), SinkError> {
        match self {
            RunnerSink::AtLeastOnce(_, in_flight) => settle(in_flight).await,
            RunnerSink::ExactlyOnce(..) => Ok(()),
        }
    }
}

/// Enqueues `records` behind the batch in flight, then waits for both.
async fn publish_now(
    p: &KafkaPublisher,
    in_flight: &mut Option<Acknowledgements>,
    records: Vec<KafkaRecord>,
) -> Result<(), SinkError> {
    let acks = p.enqueue(records).await?;
    settle(in_flight).await?;
    acks.acknowledged().await
}

/// Awaits and clears the batch in flight.
async fn settle(in_flight: &mut Option<Acknowledgements>) -> Result<(), SinkError> {
    match in_flight.take() {
        Some(acks) => acks.acknowledged().await,
        None => Ok(()),
    }
}
