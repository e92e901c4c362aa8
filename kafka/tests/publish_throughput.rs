//! Publishing throughput to the in-process mock cluster (ignored by default; run with
//! `cargo test -p capstan-kafka --release --test publish_throughput -- --ignored --nocapture`).
//! Events are realistic change events of about 500 bytes (envelope + key + headers).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use capstan_core::position::{Flavor, Position};
use capstan_kafka::config::SinkConfig;
use capstan_kafka::dev_cluster::DevCluster;
use capstan_kafka::exactly_once::{
    Checkpoint, ExactlyOncePublisher, KafkaTransactionalLog, OwnerIdentity, SnapshotProgress,
};
use capstan_kafka::publisher::{KafkaPublisher, Publisher};
use capstan_kafka::record::KafkaRecord;

const TRANSACTIONS: u64 = 200;
const ROWS_PER_TRANSACTION: usize = 100;

fn batches() -> Vec<Vec<KafkaRecord>> {
    let builder = common::builder("bench");
    (1..=TRANSACTIONS)
        .map(|gno| {
            let tx = common::insert_tx(gno, gno as i64 * 1000, ROWS_PER_TRANSACTION);
            common::records_of(&builder, &tx, 1)
        })
        .collect()
}

fn report(mode: &str, batches: &[Vec<KafkaRecord>], elapsed: Duration) {
    let n: usize = batches.iter().map(Vec::len).sum();
    let bytes: usize = batches
        .iter()
        .flatten()
        .map(KafkaRecord::approximate_size)
        .sum();
    let values: usize = batches
        .iter()
        .flatten()
        .map(|r| r.value.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "{mode}: {n} records ({} bytes value, {} with key and headers, avg) in {:.2}s = {:.0} records/s",
        values / n.max(1),
        bytes / n.max(1),
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64()
    );
}

fn config(cluster: &DevCluster) -> SinkConfig {
    let mut c = SinkConfig::new(cluster.bootstrap_servers(), "bench");
    c.delivery_timeout_ms = 30_000;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn throughput_idempotent_and_transactional() {
    let cluster = DevCluster::start(3).unwrap();
    cluster.create_topic("bench.shop.orders", 6, 3).unwrap();
    cluster.create_topic("capstan.offsets", 1, 3).unwrap();
    let batches = batches();

    let publisher =
        KafkaPublisher::new(&config(&cluster).validate(Flavor::Mysql).unwrap().producer).unwrap();
    publisher.publish(batches[0].clone()).await.unwrap(); // warm up
    let start = Instant::now();
    for batch in &batches {
        publisher.publish(batch.clone()).await.unwrap();
    }
    report(
        "idempotent, acks=all, one publish per source transaction",
        &batches,
        start.elapsed(),
    );

    let checked = config(&cluster).validate(Flavor::Mysql).unwrap();
    let log = KafkaTransactionalLog::new(checked.producer, 60_000, Duration::from_secs(30));
    let empty = Checkpoint {
        position: Position::empty(Flavor::Mysql),
        snapshot: SnapshotProgress::default(),
    };
    let owner = OwnerIdentity {
        pipeline: "bench",
        epoch: 1,
        transactional_id: "capstan-bench",
        offsets_topic: "capstan.offsets",
    };
    let (mut eos, _) = ExactlyOncePublisher::open(&log, owner, empty)
        .await
        .unwrap();
    for group in [1usize, 10] {
        let start = Instant::now();
        for (i, chunk) in batches.chunks(group).enumerate() {
            let records: Vec<KafkaRecord> = chunk.iter().flatten().cloned().collect();
            let upto = ((i + 1) * group) as u64;
            let position =
                Position::parse(Flavor::Mysql, &format!("{}:1-{upto}", common::UUID)).unwrap();
            let cp = Checkpoint {
                position,
                snapshot: SnapshotProgress::default(),
            };
            eos.publish(&records, &cp).await.unwrap();
        }
        report(
            &format!("transactional, {group} source transaction(s) per Kafka transaction"),
            &batches,
            start.elapsed(),
        );
    }
}
