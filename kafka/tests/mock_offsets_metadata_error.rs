//! A metadata error on the offsets topic is an error, never "no offsets record".
//!
//! This runs on librdkafka's mock cluster because it injects a per-topic error code into an
//! otherwise successful Metadata response (`LEADER_NOT_AVAILABLE`), which a real broker
//! cannot be made to return on demand. Before the fix the reader skipped the errored topic
//! and answered "no record", so an exactly-once owner would have resumed from Raft alone
//! (a duplicate, or `checkpoints_diverged` after a snapshot).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_kafka::dev_cluster::{DevCluster, RDKafkaRespErr};
use capstan_kafka::topic_reader::{Isolation, TopicReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_metadata_error_is_an_error_and_an_unknown_topic_is_empty() {
    let cluster = DevCluster::start(1).unwrap();
    cluster.create_topic("capstan.offsets", 1, 1).unwrap();
    let reader = TopicReader::new(
        cluster.bootstrap_servers(),
        Isolation::ReadCommitted,
        Duration::from_secs(10),
    );
    // healthy and empty: no record
    assert_eq!(
        reader.latest_by_key("capstan.offsets", b"p").await.unwrap(),
        None
    );
    // a topic that does not exist: no record either
    assert_eq!(
        reader.latest_by_key("nothing.here", b"p").await.unwrap(),
        None
    );
    cluster
        .inject_topic_error(
            "capstan.offsets",
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
        )
        .unwrap();
    let e = reader
        .latest_by_key("capstan.offsets", b"p")
        .await
        .unwrap_err();
    assert_eq!(e.code(), "kafka_client_error", "{e}");
    assert!(e.to_string().contains("LeaderNotAvailable"), "{e}");
    let e = reader.read_all("capstan.offsets").await.unwrap_err();
    assert_eq!(e.code(), "kafka_client_error", "{e}");
}
