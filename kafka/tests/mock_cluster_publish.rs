//! At-least-once publishing through librdkafka's in-process mock cluster.
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
async fn published_records_are_consumed_intact() {
    let cluster = DevCluster::start(3).unwrap();
    cluster.create_topic("cdc.shop.orders", 3, 3).unwrap();
    let builder = common::builder("cdc");
    let records = common::records_of(&builder, &common::insert_tx(1, 1, 20), 4);
    publisher(&cluster).publish(records.clone()).await.unwrap();

    let consumed = reader(&cluster).read_all("cdc.shop.orders").await.unwrap();
    assert_eq!(consumed.len(), 20);
    for r in &consumed {
        let original = records
            .iter()
            .find(|o| o.key == r.key)
            .expect("every consumed key was published");
        assert_eq!(r.value, original.value);
        assert_eq!(r.headers, original.headers);
    }
    // Same key, same partition: ids spread over all three partitions.
    let partitions: BTreeSet<i32> = consumed.iter().map(|r| r.partition).collect();
    assert!(partitions.len() > 1, "{partitions:?}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_reads_what_we_published() {
    let kcat = std::path::Path::new("/usr/bin/kcat");
    if !kcat.exists() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("kcat is required in CI (apt-get install kcat)");
        }
        eprintln!("skipping: /usr/bin/kcat is not installed");
        return;
    }
    let cluster = DevCluster::start(1).unwrap();
    cluster.create_topic("cdc.shop.orders", 1, 1).unwrap();
    let builder = common::builder("cdc");
    let records = common::records_of(&builder, &common::insert_tx(7, 1, 5), 2);
    publisher(&cluster).publish(records).await.unwrap();

    let bootstrap = cluster.bootstrap_servers().to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kcat)
            .args([
                "-b",
                &bootstrap,
                "-C",
                "-t",
                "cdc.shop.orders",
                "-e",
                "-J",
                "-q",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "kcat failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    for (i, line) in lines.iter().enumerate() {
        let key: serde_json::Value = serde_json::from_str(line["key"].as_str().unwrap()).unwrap();
        assert_eq!(key, serde_json::json!({"id": i as i64 + 1}));
        let payload: serde_json::Value =
            serde_json::from_str(line["payload"].as_str().unwrap()).unwrap();
        assert_eq!(payload["op"], "c");
        assert_eq!(payload["source"]["gtid"], format!("{}:7", common::UUID));
        let headers = line["headers"].as_array().unwrap();
        assert!(
            headers.iter().any(|h| h == "capstan.pipeline"),
            "{headers:?}"
        );
    }
}
