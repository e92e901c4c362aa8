//! The seam between the exactly-once logic and a Kafka implementation: just the part of
//! Kafka's transactional contract (KIP-98) the logic relies on.

use async_trait::async_trait;

use crate::record::KafkaRecord;
use crate::topic_reader::ConsumedRecord;
use crate::SinkError;

/// A Kafka cluster, as far as transactions go.
#[async_trait]
pub trait TransactionalLog: Send + Sync {
    /// The producer type.
    type Producer: TransactionalProducer;

    /// Creates a producer for `transactional_id` and runs `init_transactions`: bumps the id's
    /// epoch, so every earlier producer with the id is fenced (its next operation fails with
    /// [`SinkError::ProducerFenced`]), and aborts the transaction such a producer left open.
    async fn init_producer(&self, transactional_id: &str) -> Result<Self::Producer, SinkError>;

    /// The newest committed record of `topic` whose key is `key`, as of the call: every
    /// partition is read up to the high watermark it had when the call began, so a
    /// transaction of *another* producer that was open then (it holds the partition's last
    /// stable offset back) is waited for until it commits, aborts or times out, instead of
    /// hiding the newer records behind it. Only the newest match is kept (memory: one
    /// record, whatever the topic holds). A topic that does not exist reads as `None`; any
    /// other metadata or read error is an error, never "no record".
    async fn latest_committed(
        &self,
        topic: &str,
        key: &[u8],
    ) -> Result<Option<ConsumedRecord>, SinkError>;
}

/// A transactional producer.
#[async_trait]
pub trait TransactionalProducer: Send {
    /// Starts a transaction.
    async fn begin(&mut self) -> Result<(), SinkError>;
    /// Writes `records` into the open transaction and waits until each is acknowledged
    /// (written to the log, not yet visible to read_committed).
    async fn send(&mut self, records: &[KafkaRecord]) -> Result<(), SinkError>;
    /// Commits the open transaction: all its records become visible at once.
    async fn commit(&mut self) -> Result<(), SinkError>;
    /// Aborts the open transaction: none of its records ever become visible.
    async fn abort(&mut self) -> Result<(), SinkError>;
}
