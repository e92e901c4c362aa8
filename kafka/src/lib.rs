//! capstan's Kafka sink.
//!
//! - [`record`]: pure mapping from [`capstan_core::change::Transaction`]s and snapshot chunks to
//!   Kafka records (Debezium-style envelopes, keys, topics, duplicate-recognition headers).
//! - [`publisher`]: the [`publisher::Publisher`] trait and its rdkafka implementation
//!   (idempotent producer, `acks=all`, delivery awaited before a checkpoint may advance).
//! - [`exactly_once`]: the transactional mode: one Kafka transaction per batch plus an offsets
//!   record, fencing by `transactional.id`, resume from whichever checkpoint is ahead; written
//!   against [`exactly_once::TransactionalLog`] so it runs on rdkafka and on an in-memory model
//!   of Kafka's transactional contract.
//! - [`dev_cluster`]: librdkafka's mock cluster hosted in-process, for tests and
//!   `capstan dev kafka`.
//! - [`registry`]: `format: avro`'s Schema Registry runtime (schema ids, the wire format's
//!   framing).
//! - [`config`]: the pipeline's sink settings, validated without I/O.
//!
//! The wire format is documented in `docs/event-format.md`; the crate split and the
//! exactly-once design in `docs/adr/0002-kafka-sink-crate.md` and
//! `docs/adr/0003-exactly-once-kafka.md`.

pub mod config;
pub mod dev_cluster;
mod error;
pub mod exactly_once;
pub mod publisher;
pub mod record;
pub mod registry;
pub mod topic_reader;

pub use error::{Consequence, SinkError};
