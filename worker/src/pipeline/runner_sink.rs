//! Where a runner's records go: the at-least-once publisher, or the exactly-once publisher
//! that commits each batch together with the pipeline's offsets record in one Kafka
//! transaction (ADR-0003).

use capstan_core::position::Position;
use capstan_kafka::exactly_once::{
    Checkpoint, ExactlyOncePublisher, KafkaTransactionalProducer, SnapshotProgress,
};
use capstan_kafka::publisher::{KafkaPublisher, Publisher};
use capstan_kafka::record::KafkaRecord;
use capstan_kafka::SinkError;

/// The publisher of one runner.
pub enum RunnerSink {
    /// Idempotent producer; a batch is done when every record is acknowledged.
    AtLeastOnce(KafkaPublisher),
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
            RunnerSink::AtLeastOnce(_) => f.write_str("RunnerSink::AtLeastOnce"),
            RunnerSink::ExactlyOnce(p, _) => write!(f, "RunnerSink::ExactlyOnce({p:?})"),
        }
    }
}

impl RunnerSink {
    /// Exactly-once: the snapshot chunks counted in the last offsets record (0 otherwise).
    pub fn snapshot_chunks(&self) -> u64 {
        match self {
            RunnerSink::AtLeastOnce(_) => 0,
            RunnerSink::ExactlyOnce(_, last) => last.chunks_committed,
        }
    }

    /// Publishes the records of a part of a transaction the source hands out in slices,
    /// without moving the checkpoint. At-least-once only: an exactly-once pipeline holds every
    /// transaction whole (its slice budget is off), since its Kafka transaction commits the
    /// offsets record with each batch.
    pub async fn publish_part(&mut self, records: Vec<KafkaRecord>) -> Result<(), SinkError> {
        match self {
            RunnerSink::AtLeastOnce(_) if records.is_empty() => Ok(()),
            RunnerSink::AtLeastOnce(p) => p.publish(records).await,
            RunnerSink::ExactlyOnce(..) => Err(SinkError::TransactionFailed {
                kafka_code: "sliced_transaction_unsupported".into(),
                retriable: false,
            }),
        }
    }

    /// Publishes `records`, which bring the checkpoint to `position` and the processed
    /// position to `processed` (ahead of it only while a MariaDB XA prepare is pending,
    /// ADR-0008). In exactly-once mode the batch and the offsets record naming both commit
    /// atomically; a batch
    /// without records is still committed there, so the offsets record keeps up with
    /// filtered traffic. `snapshot` is the snapshot progress once this batch is published
    /// (exactly-once: committed with it; `None` keeps the last one).
    pub async fn publish(
        &mut self,
        records: Vec<KafkaRecord>,
        position: &Position,
        processed: &Position,
        snapshot: Option<SnapshotProgress>,
    ) -> Result<(), SinkError> {
        match self {
            RunnerSink::AtLeastOnce(p) => {
                if records.is_empty() {
                    return Ok(());
                }
                p.publish(records).await
            }
            RunnerSink::ExactlyOnce(p, last) => {
                let checkpoint = Checkpoint {
                    position: position.clone(),
                    processed: (processed != position).then(|| processed.clone()),
                    snapshot: snapshot.unwrap_or_else(|| last.clone()),
                };
                p.publish(&records, &checkpoint).await?;
                *last = checkpoint.snapshot;
                Ok(())
            }
        }
    }
}
