//! The acknowledgements of one enqueued batch, awaited as one.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::acked_producer::{AckedProducer, Fence};
use super::batch_acks::{BatchAcks, BatchOutcome};
use crate::SinkError;

/// How often a publish waiting for acknowledgements asks its fence again.
const FENCE_POLL: Duration = Duration::from_millis(50);

/// The deliveries of an enqueued batch still to be acknowledged
/// ([`crate::publisher::KafkaPublisher::enqueue`]). Dropping it abandons the wait, not the
/// records: librdkafka still sends them.
pub struct Acknowledgements {
    producer: AckedProducer,
    batch: Arc<BatchAcks>,
    fence: Option<Fence>,
}

impl fmt::Debug for Acknowledgements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acknowledgements")
            .field("outcome", &self.batch.outcome())
            .finish_non_exhaustive()
    }
}

impl Acknowledgements {
    pub(crate) fn new(
        producer: AckedProducer,
        batch: Arc<BatchAcks>,
        fence: Option<Fence>,
    ) -> Self {
        Acknowledgements {
            producer,
            batch,
            fence,
        }
    }

    /// Waits until every record is acknowledged, or the first failure. With a fence, asks it
    /// every [`FENCE_POLL`] meanwhile: when it fails, everything the producer still holds,
    /// queued or in flight, is purged (nothing more goes over the wire; a request already
    /// sent may still be appended) and the wait ends [`SinkError::OwnershipLost`] instead of
    /// lasting up to `message.timeout.ms`.
    pub async fn acknowledged(self) -> Result<(), SinkError> {
        loop {
            match self.batch.outcome() {
                BatchOutcome::Acknowledged => return Ok(()),
                BatchOutcome::Failed(e) => return Err(self.producer.delivery_error(&e)),
                BatchOutcome::Outstanding => {}
            }
            let Some(fence) = &self.fence else {
                self.batch.settled().await;
                continue;
            };
            tokio::select! {
                biased;
                () = self.batch.settled() => {}
                () = tokio::time::sleep(FENCE_POLL) => {
                    self.producer.hold_fence(Some(fence), true)?;
                }
            }
        }
    }
}
