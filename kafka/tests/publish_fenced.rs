//! The at-least-once publisher's fence (the owner's lease) also ends the wait for
//! acknowledgements: a publish that cannot be acknowledged (no broker listens at the
//! bootstrap address: librdkafka queues the records and retries until `message.timeout.ms`,
//! two minutes here) ends `OwnershipLost` once the fence fails, instead of holding the
//! records, ready to land, for the rest of the timeout. No broker is needed, nor a mock: a
//! real librdkafka producer and an address where nothing listens. Without a fence failing, the
//! same publish ends at `message.timeout.ms` with the Kafka code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use capstan_core::position::Flavor;
use capstan_kafka::config::SinkConfig;
use capstan_kafka::publisher::{KafkaPublisher, Publisher};
use capstan_kafka::SinkError;

/// A loopback address where nothing listens.
fn closed_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("127.0.0.1:{port}")
}

fn publisher(holds: Arc<AtomicBool>) -> KafkaPublisher {
    publisher_timing_out_after(holds, 120_000)
}

fn publisher_timing_out_after(holds: Arc<AtomicBool>, delivery_timeout_ms: u64) -> KafkaPublisher {
    let mut config = SinkConfig::new(&closed_address(), "cdc");
    config.delivery_timeout_ms = delivery_timeout_ms;
    config.topics.create = false;
    let checked = config.validate(Flavor::Mysql).unwrap();
    KafkaPublisher::new(&checked.producer)
        .unwrap()
        .fenced_by(Arc::new(move || holds.load(Ordering::SeqCst)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_that_fails_while_acknowledgements_are_awaited_ends_the_publish() {
    let holds = Arc::new(AtomicBool::new(true));
    let publisher = publisher(holds.clone());
    let records = common::records_of(&common::builder("cdc"), &common::insert_tx(1, 1, 20), 4);
    let publish = tokio::spawn(async move { publisher.publish(records).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !publish.is_finished(),
        "nothing can be acknowledged: no broker listens"
    );
    holds.store(false, Ordering::SeqCst);
    let ended = tokio::time::timeout(Duration::from_secs(20), publish)
        .await
        .expect("the publish ended when the fence failed, not at message.timeout.ms")
        .unwrap();
    assert_eq!(ended, Err(SinkError::OwnershipLost));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_that_fails_first_enqueues_nothing() {
    let publisher = publisher(Arc::new(AtomicBool::new(false)));
    let records = common::records_of(&common::builder("cdc"), &common::insert_tx(1, 1, 20), 4);
    let ended = tokio::time::timeout(Duration::from_secs(20), publisher.publish(records))
        .await
        .expect("a fenced publish ends at once");
    assert_eq!(ended, Err(SinkError::OwnershipLost));
}

/// Without a broker and with the fence holding, the batch ends at `message.timeout.ms` with
/// the failure's Kafka code (the first failed record ends the wait for the whole batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_cannot_be_delivered_ends_with_the_kafka_code() {
    let publisher = publisher_timing_out_after(Arc::new(AtomicBool::new(true)), 1_500);
    let records = common::records_of(&common::builder("cdc"), &common::insert_tx(1, 1, 50), 4);
    let ended = tokio::time::timeout(Duration::from_secs(30), publisher.publish(records))
        .await
        .expect("the publish ended at the delivery timeout");
    assert_eq!(
        ended,
        Err(SinkError::DeliveryFailed {
            kafka_code: "MessageTimedOut".to_string(),
            fatal: false,
        })
    );
}
