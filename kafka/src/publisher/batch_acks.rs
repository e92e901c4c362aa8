//! Acknowledgements counted per batch, not awaited per record.
//!
//! Every record of a batch carries the same [`BatchAcks`] to librdkafka (its delivery opaque,
//! one reference count per record: no allocation, no channel); the producer's polling thread
//! settles it from [`AckContext::delivery`]. A waiter is woken when the last record of the
//! batch is acknowledged or when one of them fails, not once per record.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::ClientContext;
use tokio::sync::Notify;

/// What a batch's deliveries came to so far.
#[derive(Debug, PartialEq)]
pub(crate) enum BatchOutcome {
    /// Some records are neither acknowledged nor failed.
    Outstanding,
    /// Every record enqueued so far is acknowledged.
    Acknowledged,
    /// A record failed (the first failure reported).
    Failed(KafkaError),
}

/// The delivery state of one enqueued batch, shared with librdkafka's delivery reports.
#[derive(Debug, Default)]
pub(crate) struct BatchAcks {
    outstanding: AtomicUsize,
    failure: Mutex<Option<KafkaError>>,
    settled: Notify,
}

impl BatchAcks {
    /// One more record is about to be enqueued (counted before librdkafka may report it).
    pub(crate) fn expect_one(&self) {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
    }

    /// The record counted by [`BatchAcks::expect_one`] was not enqueued after all.
    pub(crate) fn withdraw_one(&self) {
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    /// One record's delivery report: acknowledged, or `failure`. Wakes the waiter when it
    /// was the last outstanding one or a failure.
    pub(crate) fn settle(&self, failure: Option<&KafkaError>) {
        if let Some(e) = failure {
            let mut first = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
            first.get_or_insert_with(|| e.clone());
        }
        let before = self.outstanding.fetch_sub(1, Ordering::AcqRel);
        if before == 1 || failure.is_some() {
            self.settled.notify_one();
        }
    }

    /// The batch's state now.
    pub(crate) fn outcome(&self) -> BatchOutcome {
        if let Some(e) = self
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            return BatchOutcome::Failed(e.clone());
        }
        if self.outstanding.load(Ordering::Acquire) == 0 {
            BatchOutcome::Acknowledged
        } else {
            BatchOutcome::Outstanding
        }
    }

    /// Resolves after a settlement that may have changed [`BatchAcks::outcome`] (or at once
    /// when one happened since the last wait); the caller asks `outcome` again.
    pub(crate) async fn settled(&self) {
        self.settled.notified().await;
    }
}

/// The producer's context: settles each delivery on its batch and tells a publish waiting
/// for room in the full local queue that some was freed.
#[derive(Debug, Default)]
pub(crate) struct AckContext {
    wants_room: AtomicBool,
    room: Notify,
}

impl AckContext {
    /// Asks for a wake-up at the next delivery report (a record left the local queue).
    pub(crate) fn want_room(&self) {
        self.wants_room.store(true, Ordering::Release);
    }

    /// Resolves at the next delivery report after [`AckContext::want_room`] (or at once when
    /// one came since the last wait).
    pub(crate) async fn room(&self) {
        self.room.notified().await;
    }

    fn freed_room(&self) {
        if self.wants_room.load(Ordering::Acquire) && self.wants_room.swap(false, Ordering::AcqRel)
        {
            self.room.notify_one();
        }
    }
}

impl ClientContext for AckContext {}

impl ProducerContext for AckContext {
    type DeliveryOpaque = Arc<BatchAcks>;

    fn delivery(&self, result: &DeliveryResult<'_>, batch: Arc<BatchAcks>) {
        batch.settle(result.as_ref().err().map(|(e, _message)| e));
        self.freed_room();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdkafka::error::RDKafkaErrorCode;

    use super::*;

    fn timed_out() -> KafkaError {
        KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut)
    }

    #[test]
    fn a_batch_is_acknowledged_when_its_last_record_is() {
        let batch = BatchAcks::default();
        assert_eq!(batch.outcome(), BatchOutcome::Acknowledged, "empty");
        batch.expect_one();
        batch.expect_one();
        batch.expect_one();
        batch.withdraw_one(); // refused by a full queue, to be enqueued again
        assert_eq!(batch.outcome(), BatchOutcome::Outstanding);
        batch.settle(None);
        assert_eq!(batch.outcome(), BatchOutcome::Outstanding);
        batch.settle(None);
        assert_eq!(batch.outcome(), BatchOutcome::Acknowledged);
    }

    #[test]
    fn the_first_failure_is_kept_and_ends_the_batch_at_once() {
        let batch = BatchAcks::default();
        for _ in 0..3 {
            batch.expect_one();
        }
        batch.settle(Some(&timed_out()));
        assert_eq!(batch.outcome(), BatchOutcome::Failed(timed_out()));
        batch.settle(Some(&KafkaError::MessageProduction(
            RDKafkaErrorCode::MessageSizeTooLarge,
        )));
        batch.settle(None);
        assert_eq!(batch.outcome(), BatchOutcome::Failed(timed_out()));
    }

    #[tokio::test]
    async fn the_waiter_is_woken_by_the_last_acknowledgement_not_before() {
        let batch = Arc::new(BatchAcks::default());
        batch.expect_one();
        batch.expect_one();
        batch.settle(None);
        // no wake-up is pending: the wait below must not resolve yet
        let early = tokio::time::timeout(Duration::from_millis(20), batch.settled()).await;
        assert!(early.is_err(), "woken before the batch settled");
        let settler = {
            let batch = Arc::clone(&batch);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                batch.settle(None);
            })
        };
        tokio::time::timeout(Duration::from_secs(5), batch.settled())
            .await
            .expect("woken by the last acknowledgement");
        settler.await.expect("settler");
        assert_eq!(batch.outcome(), BatchOutcome::Acknowledged);
    }

    #[tokio::test]
    async fn a_settlement_before_the_wait_is_not_lost() {
        let batch = BatchAcks::default();
        batch.expect_one();
        batch.settle(None);
        tokio::time::timeout(Duration::from_secs(1), batch.settled())
            .await
            .expect("the permit stored by the settlement");
    }

    #[tokio::test]
    async fn room_is_signalled_only_when_asked_for() {
        let context = AckContext::default();
        context.freed_room();
        let unasked = tokio::time::timeout(Duration::from_millis(20), context.room()).await;
        assert!(
            unasked.is_err(),
            "a delivery nobody waited for left a wake-up"
        );
        context.want_room();
        context.freed_room();
        tokio::time::timeout(Duration::from_secs(1), context.room())
            .await
            .expect("woken by the delivery after want_room");
    }
}
