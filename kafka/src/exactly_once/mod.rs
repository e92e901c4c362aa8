//! The exactly-once mode: a transactional producer per pipeline, one Kafka transaction per
//! batch (rows + offsets record), fencing by `transactional.id`, and resume from whichever
//! of the Kafka offsets record and the Raft checkpoint is ahead.
//!
//! The logic ([`ExactlyOncePublisher`], [`ResumePlan`]) is written against
//! [`TransactionalLog`], implemented by rdkafka ([`KafkaTransactionalLog`]) and by an
//! in-memory model of Kafka's transactional contract ([`MemoryTransactionalLog`]), because
//! no broker reachable from our machines filters aborted transactions (ADR-0003).

mod checkpoint;
mod exactly_once_publisher;
mod kafka_log;
mod memory_log;
mod offsets_record;
mod resume_plan;
mod transactional_log;
mod within_transaction;

pub use checkpoint::{Checkpoint, SnapshotProgress, TableProgress};
pub use exactly_once_publisher::{ExactlyOncePublisher, OwnerIdentity, PublishStep};
pub use kafka_log::{KafkaTransactionalLog, KafkaTransactionalProducer};
pub use memory_log::{MemoryProducer, MemoryTransactionalLog};
pub use offsets_record::{OffsetsRecord, OFFSETS_RECORD_VERSION};
pub use resume_plan::{CheckpointSource, ResumePlan};
pub use transactional_log::{TransactionalLog, TransactionalProducer};
pub use within_transaction::WithinTransaction;
