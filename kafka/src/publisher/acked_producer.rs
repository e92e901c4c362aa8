//! The rdkafka producer both publishers send through (at-least-once and transactional):
//! records enqueued strictly in batch order, acknowledgements counted per batch
//! ([`BatchAcks`]), the owner's [`Fence`] asked before every record.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer, PurgeConfig, ThreadedProducer};
use rdkafka::ClientConfig;

use super::acknowledgements::Acknowledgements;
use super::batch_acks::{AckContext, BatchAcks};
use super::kafka_error_map::{client_error, delivery_error};
use crate::record::KafkaRecord;
use crate::SinkError;

/// Asked before every record is enqueued: may this process still publish (the owner's
/// lease)? Cheap and non-blocking; called once per record.
pub type Fence = Arc<dyn Fn() -> bool + Send + Sync>;

/// How long a publish waits for room in a full local queue before it asks its fence again
/// (a delivery report wakes it sooner).
const ROOM_POLL: Duration = Duration::from_millis(10);

/// An rdkafka producer whose delivery reports settle per-batch counters.
#[derive(Clone)]
pub(crate) struct AckedProducer {
    producer: ThreadedProducer<AckContext>,
}

impl fmt::Debug for AckedProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckedProducer").finish_non_exhaustive()
    }
}

/// Builds the rdkafka headers of a record.
fn owned_headers(record: &KafkaRecord) -> OwnedHeaders {
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

/// The rdkafka record of one of ours (borrowing its bytes), reporting to `batch`.
fn base_record<'a>(
    record: &'a KafkaRecord,
    batch: &Arc<BatchAcks>,
) -> BaseRecord<'a, [u8], [u8], Arc<BatchAcks>> {
    let mut br =
        BaseRecord::<[u8], [u8], Arc<BatchAcks>>::with_opaque_to(&record.topic, Arc::clone(batch))
            .headers(owned_headers(record));
    if let Some(k) = &record.key {
        br = br.key(k.as_slice());
    }
    if let Some(v) = &record.value {
        br = br.payload(v.as_slice());
    }
    if let Some(ts) = record.timestamp_ms {
        br = br.timestamp(ts);
    }
    br
}

impl AckedProducer {
    /// A producer with `config`. Creating it does no network I/O; librdkafka connects in the
    /// background (its polling thread delivers the reports).
    pub(crate) fn create(config: &ClientConfig) -> Result<Self, SinkError> {
        let producer = config
            .create_with_context(AckContext::default())
            .map_err(|e| client_error(&e))?;
        Ok(AckedProducer { producer })
    }

    /// The rdkafka producer, for the calls this type does not wrap (transactions, flush).
    pub(crate) fn rdkafka(&self) -> &ThreadedProducer<AckContext> {
        &self.producer
    }

    /// librdkafka's fatal error code, when the producer is unusable.
    pub(crate) fn fatal_code(&self) -> Option<RDKafkaErrorCode> {
        self.producer.client().fatal_error().map(|(code, _)| code)
    }

    /// Asks `fence` (when there is one); when it fails, drops what librdkafka holds unsent
    /// (`inflight` too: requests not yet answered are abandoned, though a broker may still
    /// append one already sent) and ends the publish [`SinkError::OwnershipLost`].
    pub(crate) fn hold_fence(
        &self,
        fence: Option<&Fence>,
        inflight: bool,
    ) -> Result<(), SinkError> {
        if fence.is_none_or(|holds| holds()) {
            return Ok(());
        }
        let config = PurgeConfig::default().queue();
        self.producer
            .purge(if inflight { config.inflight() } else { config });
        Err(SinkError::OwnershipLost)
    }

    /// A failed delivery as a [`SinkError`], with librdkafka's verdict on the producer.
    pub(crate) fn delivery_error(&self, e: &KafkaError) -> SinkError {
        delivery_error(e, self.fatal_code())
    }

    /// Enqueues every record in order and waits for every acknowledgement (see
    /// [`AckedProducer::enqueue_all`]).
    pub(crate) async fn send_all(
        &self,
        batch: &[KafkaRecord],
        fence: Option<&Fence>,
    ) -> Result<(), SinkError> {
        self.enqueue_all(batch, fence).await?.acknowledged().await
    }

    /// Enqueues every record in order (a full local queue waits for room, never reorders),
    /// asking `fence` before each; returns the batch's [`Acknowledgements`] to await. When
    /// the fence fails, what the producer holds unsent is purged and the publish ends
    /// [`SinkError::OwnershipLost`].
    pub(crate) async fn enqueue_all(
        &self,
        batch: &[KafkaRecord],
        fence: Option<&Fence>,
    ) -> Result<Acknowledgements, SinkError> {
        let acks = Arc::new(BatchAcks::default());
        for record in batch {
            // queued and not yet sent: never sent by a deposed owner
            self.hold_fence(fence, false)?;
            let mut br = base_record(record, &acks);
            loop {
                acks.expect_one();
                match self.producer.send(br) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        acks.withdraw_one();
                        br = back;
                        self.wait_for_room(fence).await?;
                    }
                    Err((e, _)) => {
                        acks.withdraw_one();
                        return Err(self.delivery_error(&e));
                    }
                }
            }
        }
        Ok(Acknowledgements::new(self.clone(), acks, fence.cloned()))
    }

    /// Waits for a delivery report (room in the local queue) or [`ROOM_POLL`], then asks the
    /// fence.
    async fn wait_for_room(&self, fence: Option<&Fence>) -> Result<(), SinkError> {
        let context = self.producer.context();
        context.want_room();
        let _ = tokio::time::timeout(ROOM_POLL, context.room()).await;
        self.hold_fence(fence, true)
    }
}
