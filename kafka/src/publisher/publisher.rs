//! The publishing seam between the pipeline runner and Kafka.

use async_trait::async_trait;

use crate::record::KafkaRecord;
use crate::SinkError;

/// Publishes batches of records.
///
/// The contract the runner relies on: `publish` returns `Ok` only after **every** record of
/// the batch has been acknowledged by the brokers with `acks=all`; only then may the runner
/// advance its checkpoint past the batch. Records of one batch keep their order per
/// partition. On `Err` nothing can be assumed about which records were written (some may
/// have been): the runner must not checkpoint the batch, and acts on
/// [`SinkError::consequence`].
#[async_trait]
pub trait Publisher: Send + Sync {
    /// Publishes `batch` and waits for every acknowledgement.
    async fn publish(&self, batch: Vec<KafkaRecord>) -> Result<(), SinkError>;
}
