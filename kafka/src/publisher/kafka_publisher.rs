//! The at-least-once publisher: one idempotent rdkafka producer per pipeline.
//!
//! Records are enqueued strictly in batch order (a full local queue makes `publish` wait for
//! room, never reorder), then the batch's acknowledgements are awaited as one count.
//! Retriable broker errors (leader changes, timeouts, throttling) are retried inside
//! librdkafka until `message.timeout.ms`; the idempotent producer's sequence numbers make
//! those retries free of duplicates and reordering. What surfaces here is final: a delivery
//! that timed out, a permanent broker error, or a fatal producer error (idempotence state
//! lost), mapped to value-free [`SinkError`]s.
//!
//! A [`Fence`] (the owner's lease) is asked before every record is enqueued, and every 50 ms
//! while acknowledgements are awaited: once it says no, nothing more is enqueued, what
//! librdkafka still holds unsent (queued, or waiting to be retried against an unreachable
//! broker) is purged, and the publish ends [`SinkError::OwnershipLost`] at once, not after
//! `message.timeout.ms`. Records already handed to a broker may still land after that; the
//! `capstan.epoch` header lets a consumer drop them (docs/event-format.md, "Replays and owner
//! changes").

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::producer::Producer;

use super::acked_producer::{AckedProducer, Fence};
use super::acknowledgements::Acknowledgements;
use super::kafka_error_map::client_error;
use super::publisher::Publisher;
use super::topic_admin_client::TopicAdminClient;
use crate::config::ProducerSettings;
use crate::record::KafkaRecord;
use crate::SinkError;

/// An idempotent, `acks=all` rdkafka producer behind the [`Publisher`] trait.
#[derive(Clone)]
pub struct KafkaPublisher {
    producer: AckedProducer,
    topics: Option<Arc<TopicAdminClient>>,
    fence: Option<Fence>,
}

impl fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaPublisher").finish_non_exhaustive()
    }
}

impl KafkaPublisher {
    /// A producer with `settings` (from [`crate::config::SinkConfig::validate`]). Creating it
    /// does no network I/O; librdkafka connects in the background.
    pub fn new(settings: &ProducerSettings) -> Result<Self, SinkError> {
        let producer = AckedProducer::create(&settings.client_config())?;
        Ok(KafkaPublisher {
            producer,
            topics: None,
            fence: None,
        })
    }

    /// Enqueues each record only while `fence` holds (see the module documentation).
    pub fn fenced_by(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Creates each missing topic (with `topics`' settings) before its first record.
    pub fn creating_topics(mut self, topics: Arc<TopicAdminClient>) -> Self {
        self.topics = Some(topics);
        self
    }

    /// Enqueues `batch` in order, behind every batch enqueued before it, and returns its
    /// deliveries still outstanding: the caller may enqueue the next batch before it awaits
    /// them. The records of one partition are written in the order enqueued, across batches
    /// (the idempotent producer keeps that order through retries).
    pub async fn enqueue(&self, batch: Vec<KafkaRecord>) -> Result<Acknowledgements, SinkError> {
        if let Some(topics) = &self.topics {
            topics.ensure(&batch).await?;
        }
        self.producer.enqueue_all(&batch, self.fence.as_ref()).await
    }

    /// Waits up to `timeout` for anything still queued (for a clean shutdown).
    pub fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.producer
            .rdkafka()
            .flush(timeout)
            .map_err(|e| client_error(&e))
    }
}

#[async_trait]
impl Publisher for KafkaPublisher {
    async fn publish(&self, batch: Vec<KafkaRecord>) -> Result<(), SinkError> {
        if let Some(topics) = &self.topics {
            topics.ensure(&batch).await?;
        }
        self.producer.send_all(&batch, self.fence.as_ref()).await
    }
}
