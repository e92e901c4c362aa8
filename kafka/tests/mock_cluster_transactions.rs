//! The transactional path on librdkafka's mock cluster, for what the mock supports:
//! `init_transactions`, commit, abort and fencing. (It writes no transaction markers, so
//! read_committed filtering is proven on the model instead: `exactly_once_contract.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use capstan_core::position::{Flavor, Position};
use capstan_kafka::config::SinkConfig;
use capstan_kafka::dev_cluster::DevCluster;
use capstan_kafka::exactly_once::{
    Checkpoint, CheckpointSource, ExactlyOncePublisher, KafkaTransactionalLog, OwnerIdentity,
    SnapshotProgress, TransactionalLog, TransactionalProducer,
};
use capstan_kafka::record::HEADER_POSITION;
use capstan_kafka::topic_reader::{Isolation, TopicReader};

const OFFSETS: &str = "capstan.offsets";

fn log(cluster: &DevCluster) -> KafkaTransactionalLog {
    let mut config = SinkConfig::new(cluster.bootstrap_servers(), "cdc");
    config.delivery_timeout_ms = 20_000;
    let checked = config.validate(Flavor::Mysql).unwrap();
    KafkaTransactionalLog::new(checked.producer, 30_000, Duration::from_secs(20))
}

fn cluster() -> DevCluster {
    let cluster = DevCluster::start(3).unwrap();
    cluster.create_topic("cdc.shop.orders", 3, 3).unwrap();
    cluster.create_topic(OFFSETS, 1, 3).unwrap();
    cluster
}

fn checkpoint(upto: u64) -> Checkpoint {
    Checkpoint {
        position: Position::parse(Flavor::Mysql, &format!("{}:1-{upto}", common::UUID)).unwrap(),
        processed: None,
        snapshot: SnapshotProgress::default(),
    }
}

fn owner(epoch: u64) -> OwnerIdentity<'static> {
    OwnerIdentity {
        pipeline: "orders",
        epoch,
        transactional_id: "capstan-orders",
        offsets_topic: OFFSETS,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_accepts_init_commit_and_abort() {
    let cluster = cluster();
    let log = log(&cluster);
    let builder = common::builder("cdc");
    let mut p = log.init_producer("capstan-orders").await.unwrap();
    p.begin().await.unwrap();
    p.send(&common::records_of(
        &builder,
        &common::insert_tx(1, 1, 4),
        1,
    ))
    .await
    .unwrap();
    p.commit().await.unwrap();
    p.begin().await.unwrap();
    p.send(&common::records_of(
        &builder,
        &common::insert_tx(2, 10, 2),
        1,
    ))
    .await
    .unwrap();
    p.abort().await.unwrap();
    p.begin().await.unwrap();
    p.send(&common::records_of(
        &builder,
        &common::insert_tx(3, 20, 1),
        1,
    ))
    .await
    .unwrap();
    p.commit().await.unwrap();

    let all = TopicReader::new(
        cluster.bootstrap_servers(),
        Isolation::ReadUncommitted,
        Duration::from_secs(20),
    )
    .read_all("cdc.shop.orders")
    .await
    .unwrap();
    let committed: Vec<_> = all
        .iter()
        .filter(|r| !r.header_str(HEADER_POSITION).unwrap().ends_with(":2"))
        .collect();
    assert_eq!(committed.len(), 5, "both committed transactions landed");
}

/// Known limit, pinned so that it is noticed when it changes: librdkafka's mock coordinator
/// answers every `InitProducerId` without a current producer id by minting a *new* producer
/// id and leaves the old one valid, so a second producer with the same `transactional.id`
/// does **not** fence the first there (a real broker bumps the epoch of the one producer id
/// per `transactional.id`). Fencing is proven on the model (`exactly_once_contract.rs`) and
/// on a real broker when `CAPSTAN_KAFKA_REAL_BOOTSTRAP` is set. If this test starts failing,
/// the mock learned fencing: turn it into a fencing test and update ADR-0003.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_known_limit_same_transactional_id_does_not_fence() {
    let cluster = cluster();
    let log = log(&cluster);
    let builder = common::builder("cdc");
    let mut first = log.init_producer("capstan-orders").await.unwrap();
    let mut second = log.init_producer("capstan-orders").await.unwrap();
    first.begin().await.unwrap();
    let first_result = first
        .send(&common::records_of(
            &builder,
            &common::insert_tx(1, 1, 1),
            1,
        ))
        .await;
    let first_commit = match first_result {
        Ok(()) => first.commit().await,
        Err(e) => Err(e),
    };
    assert_eq!(
        first_commit,
        Ok(()),
        "the mock did fence: see the doc comment"
    );
    second.begin().await.unwrap();
    second
        .send(&common::records_of(
            &builder,
            &common::insert_tx(2, 2, 1),
            2,
        ))
        .await
        .unwrap();
    second.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_exactly_once_publisher_resumes_from_the_offsets_record() {
    let cluster = cluster();
    let log = log(&cluster);
    let builder = common::builder("cdc");
    let (mut a, plan) = ExactlyOncePublisher::open(&log, owner(1), checkpoint(1))
        .await
        .unwrap();
    assert_eq!(plan.source, CheckpointSource::Raft);
    for gno in 2..=4 {
        let tx = common::insert_tx(gno, gno as i64 * 10, 3);
        a.publish(&common::records_of(&builder, &tx, 1), &checkpoint(gno))
            .await
            .unwrap();
    }
    let (mut b, plan) = ExactlyOncePublisher::open(&log, owner(2), checkpoint(2))
        .await
        .unwrap();
    assert_eq!(plan.source, CheckpointSource::Kafka);
    assert_eq!(plan.checkpoint, checkpoint(4));
    assert!(plan.raft_behind);
    drop(a);
    b.publish(
        &common::records_of(&builder, &common::insert_tx(5, 50, 1), 2),
        &checkpoint(5),
    )
    .await
    .unwrap();
}
