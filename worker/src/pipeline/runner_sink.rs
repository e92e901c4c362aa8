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
    /// Transactional producer; a batch is done when its Kafka transaction committed.
    ExactlyOnce(Box<ExactlyOncePublisher<KafkaTransactionalProducer>>),
}

impl std::fmt::Debug for RunnerSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunnerSink::AtLeastOnce(_) => f.write_str("RunnerSink::AtLeastOnce"),
            RunnerSink::ExactlyOnce(p) => write!(f, "RunnerSink::ExactlyOnce({p:?})"),
        }
    }
}

impl RunnerSink {
    /// Publishes `records`, which bring the processed position to `position`. In exactly-once
    /// mode the batch and the offsets record naming `position` commit atomically; a batch
    /// without records is still committed there, so the offsets record keeps up with
    /// filtered traffic.
    pub async fn publish(
        &mut self,
        records: Vec<KafkaRecord>,
        position: &Position,
    ) -> Result<(), SinkError> {
        match self {
            RunnerSink::AtLeastOnce(p) => {
                if records.is_empty() {
                    return Ok(());
                }
                p.publish(records).await
            }
            RunnerSink::ExactlyOnce(p) => {
                let checkpoint = Checkpoint {
                    position: position.clone(),
                    snapshot: SnapshotProgress::default(),
                };
                p.publish(&records, &checkpoint).await
            }
        }
    }
}
