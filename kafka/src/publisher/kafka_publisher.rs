//! The at-least-once publisher: one idempotent rdkafka producer per pipeline.
//!
//! Records are enqueued strictly in batch order (a full local queue makes `publish` wait for
//! the oldest outstanding delivery, never reorder), then every delivery report is awaited.
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

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::future_producer::DeliveryFuture;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer, PurgeConfig};

use super::kafka_error_map::{client_error, delivery_error};
use super::publisher::Publisher;
use super::topic_admin_client::TopicAdminClient;
use crate::config::ProducerSettings;
use crate::record::KafkaRecord;
use crate::SinkError;

/// Asked before every record is enqueued: may this process still publish (the owner's
/// lease)? Cheap and non-blocking; called once per record.
pub type Fence = Arc<dyn Fn() -> bool + Send + Sync>;

/// An idempotent, `acks=all` rdkafka producer behind the [`Publisher`] trait.
#[derive(Clone)]
pub struct KafkaPublisher {
    producer: FutureProducer,
    topics: Option<Arc<TopicAdminClient>>,
    fence: Option<Fence>,
}

impl fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaPublisher").finish_non_exhaustive()
    }
}

/// Builds the rdkafka headers of a record.
pub(crate) fn owned_headers(record: &KafkaRecord) -> OwnedHeaders {
    record.headers.iter().fold(
        OwnedHeaders::new_with_capacity(record.headers.len()),
        |h, (k, v)| {
            h.insert(Header {
                key: k,
                value: Some(v.as_slice()),
            })
        },
    )
}

/// The rdkafka record of one of ours (borrowing its bytes).
pub(crate) fn future_record(record: &KafkaRecord) -> FutureRecord<'_, [u8], [u8]> {
    let mut fr = FutureRecord::<[u8], [u8]>::to(&record.topic).headers(owned_headers(record));
    if let Some(k) = &record.key {
        fr = fr.key(k.as_slice());
    }
    if let Some(v) = &record.value {
        fr = fr.payload(v.as_slice());
    }
    if let Some(ts) = record.timestamp_ms {
        fr = fr.timestamp(ts);
    }
    fr
}

/// Waits for one delivery report and maps a failure.
pub(crate) async fn await_delivery(
    producer: &FutureProducer,
    delivery: DeliveryFuture,
) -> Result<(), SinkError> {
    match delivery.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _message))) => Err(delivery_error(&e, fatal_code(producer))),
        Err(_canceled) => Err(SinkError::DeliveryFailed {
            kafka_code: "canceled".to_string(),
            fatal: fatal_code(producer).is_some(),
        }),
    }
}

/// How often a publish waiting for acknowledgements asks its fence again.
const FENCE_POLL: Duration = Duration::from_millis(50);

/// Waits for one delivery report. With a `fence`, asks it every [`FENCE_POLL`] meanwhile:
/// when it fails, everything the producer still holds, queued or in flight, is purged
/// (nothing more goes over the wire; a request already sent may still be appended) and the
/// publish ends [`SinkError::OwnershipLost`] instead of waiting up to `message.timeout.ms`.
async fn await_fenced(
    producer: &FutureProducer,
    delivery: DeliveryFuture,
    fence: Option<&Fence>,
) -> Result<(), SinkError> {
    let Some(fence) = fence else {
        return await_delivery(producer, delivery).await;
    };
    let wait = await_delivery(producer, delivery);
    tokio::pin!(wait);
    loop {
        tokio::select! {
            biased;
            done = &mut wait => return done,
            () = tokio::time::sleep(FENCE_POLL) => {
                if !fence() {
                    producer.purge(PurgeConfig::default().queue().inflight());
                    return Err(SinkError::OwnershipLost);
                }
            }
        }
    }
}

/// librdkafka's fatal error code, when the producer is unusable.
pub(crate) fn fatal_code(producer: &FutureProducer) -> Option<RDKafkaErrorCode> {
    producer.client().fatal_error().map(|(code, _)| code)
}

/// Enqueues every record in order and waits for every acknowledgement. With a `fence`, each
/// record is enqueued only while it holds, and the wait for acknowledgements asks it too
/// ([`await_fenced`]); when it fails, what the producer holds unsent is purged and the
/// publish ends [`SinkError::OwnershipLost`].
pub(crate) async fn send_all(
    producer: &FutureProducer,
    batch: &[KafkaRecord],
    fence: Option<&Fence>,
) -> Result<(), SinkError> {
    enqueue_all(producer, batch, fence)
        .await?
        .acknowledged()
        .await
}

/// Enqueues every record in order (a full local queue waits for this batch's oldest
/// outstanding delivery), asking `fence` before each; the deliveries still outstanding are
/// returned, to be awaited with [`Acknowledgements::acknowledged`].
async fn enqueue_all(
    producer: &FutureProducer,
    batch: &[KafkaRecord],
    fence: Option<&Fence>,
) -> Result<Acknowledgements, SinkError> {
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    for record in batch {
        if fence.is_some_and(|holds| !holds()) {
            // queued and not yet sent: never sent by a deposed owner
            producer.purge(PurgeConfig::default().queue());
            return Err(SinkError::OwnershipLost);
        }
        let mut fr = future_record(record);
        loop {
            match producer.send_result(fr) {
                Ok(delivery) => {
                    pending.push_back(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    fr = back;
                    match pending.pop_front() {
                        Some(oldest) => await_fenced(producer, oldest, fence).await?,
                        // the queue holds an earlier batch's records: wait for it to drain
                        None => {
                            if fence.is_some_and(|holds| !holds()) {
                                producer.purge(PurgeConfig::default().queue().inflight());
                                return Err(SinkError::OwnershipLost);
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
                Err((e, _)) => return Err(delivery_error(&e, fatal_code(producer))),
            }
        }
    }
    Ok(Acknowledgements {
        producer: producer.clone(),
        pending,
        fence: fence.cloned(),
    })
}

/// The deliveries of an enqueued batch still to be acknowledged ([`KafkaPublisher::enqueue`]).
/// Dropping it abandons the wait, not the records: librdkafka still sends them.
pub struct Acknowledgements {
    producer: FutureProducer,
    pending: VecDeque<DeliveryFuture>,
    fence: Option<Fence>,
}

impl fmt::Debug for Acknowledgements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acknowledgements")
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Acknowledgements {
    /// Waits for every acknowledgement, asking the fence meanwhile ([`await_fenced`]).
    pub async fn acknowledged(self) -> Result<(), SinkError> {
        for delivery in self.pending {
            await_fenced(&self.producer, delivery, self.fence.as_ref()).await?;
        }
        Ok(())
    }
}

impl KafkaPublisher {
    /// A producer with `settings` (from [`crate::config::SinkConfig::validate`]). Creating it
    /// does no network I/O; librdkafka connects in the background.
    pub fn new(settings: &ProducerSettings) -> Result<Self, SinkError> {
        let producer: FutureProducer = settings
            .client_config()
            .create()
            .map_err(|e| client_error(&e))?;
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
        enqueue_all(&self.producer, &batch, self.fence.as_ref()).await
    }

    /// Waits up to `timeout` for anything still queued (for a clean shutdown).
    pub fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.producer.flush(timeout).map_err(|e| client_error(&e))
    }
}

#[async_trait]
impl Publisher for KafkaPublisher {
    async fn publish(&self, batch: Vec<KafkaRecord>) -> Result<(), SinkError> {
        if let Some(topics) = &self.topics {
            topics.ensure(&batch).await?;
        }
        send_all(&self.producer, &batch, self.fence.as_ref()).await
    }
}
