//! At-least-once publishing through librdkafka's in-process mock cluster, for the one thing
//! a real broker cannot be made to do on demand: answer Produce requests with a chosen
//! sequence of retriable errors (not leader, timeout, not enough replicas, transport). The
//! rest of the publishing path is tested on the dev services' real broker
//! (`publish_real_broker.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use capstan_core::position::Flavor;
use capstan_kafka::config::SinkConfig;
use capstan_kafka::dev_cluster::{DevCluster, RDKafkaApiKey, RDKafkaRespErr};
use capstan_kafka::publisher::{KafkaPublisher, Publisher};
use capstan_kafka::record::{HEADER_POSITION, HEADER_RECORD};
use capstan_kafka::topic_reader::{Isolation, TopicReader};

fn publisher(cluster: &DevCluster) -> KafkaPublisher {
    let mut config = SinkConfig::new(cluster.bootstrap_servers(), "cdc");
    config.delivery_timeout_ms = 30_000;
    let checked = config.validate(Flavor::Mysql).unwrap();
    KafkaPublisher::new(&checked.producer).unwrap()
}

fn reader(cluster: &DevCluster) -> TopicReader {
    TopicReader::new(
        cluster.bootstrap_servers(),
        Isolation::ReadUncommitted,
        Duration::from_secs(30),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_broker_errors_are_retried_without_loss_or_duplicates() {
    let cluster = DevCluster::start(3).unwrap();
    cluster.create_topic("cdc.shop.orders", 1, 3).unwrap();
    let builder = common::builder("cdc");
    let publisher = publisher(&cluster);
    // Warm up (metadata, producer id) before injecting.
    publisher
        .publish(common::records_of(&builder, &common::insert_tx(1, 1, 1), 1))
        .await
        .unwrap();
    cluster
        .inject_request_errors(
            RDKafkaApiKey::Produce,
            &[
                RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
                RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                RDKafkaRespErr::RD_KAFKA_RESP_ERR__TRANSPORT,
                RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            ],
        )
        .unwrap();
    for gno in 2..=11u64 {
        let tx = common::insert_tx(gno, (gno as i64) * 100, 10);
        publisher
            .publish(common::records_of(&builder, &tx, 1))
            .await
            .unwrap();
    }
    let consumed = reader(&cluster).read_all("cdc.shop.orders").await.unwrap();
    let ids: Vec<(String, String)> = consumed
        .iter()
        .map(|r| {
            (
                r.header_str(HEADER_POSITION).unwrap().to_string(),
                r.header_str(HEADER_RECORD).unwrap().to_string(),
            )
        })
        .collect();
    let unique: BTreeSet<_> = ids.iter().cloned().collect();
    assert_eq!(ids.len(), 101, "no loss");
    assert_eq!(unique.len(), 101, "no duplicate");
    // One partition: the order of publishing is the order of the log.
    let gnos: Vec<u64> = ids
        .iter()
        .map(|(p, _)| p.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(gnos.windows(2).all(|w| w[0] <= w[1]), "{gnos:?}");
}
