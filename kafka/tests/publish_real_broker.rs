//! At-least-once publishing to the dev services' real Kafka broker: records arrive intact
//! (value, key, headers, spread over partitions by key), and a tool users already run (`kcat`)
//! reads them. Each run writes topics of its own (`cdc<nanos>.shop.orders`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use capstan_core::position::Flavor;
use capstan_kafka::config::SinkConfig;
use capstan_kafka::publisher::{KafkaPublisher, Publisher};
use capstan_kafka::topic_reader::{Isolation, TopicReader};

fn publisher(bootstrap: &str, prefix: &str, partitions: u32) -> KafkaPublisher {
    publisher_with(bootstrap, prefix, partitions, &[])
}

fn publisher_with(
    bootstrap: &str,
    prefix: &str,
    partitions: u32,
    overrides: &[(&str, &str)],
) -> KafkaPublisher {
    let mut config = SinkConfig::new(bootstrap, prefix);
    config.delivery_timeout_ms = 30_000;
    for (k, v) in overrides {
        config
            .producer_overrides
            .insert((*k).to_string(), (*v).to_string());
    }
    config.topics.partitions = Some(partitions);
    let checked = config.validate(Flavor::Mysql).unwrap();
    let admin = capstan_kafka::publisher::TopicAdminClient::new(
        &checked.producer,
        &checked.topics,
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    KafkaPublisher::new(&checked.producer)
        .unwrap()
        .creating_topics(std::sync::Arc::new(admin))
}

fn reader(bootstrap: &str) -> TopicReader {
    TopicReader::new(
        bootstrap,
        Isolation::ReadUncommitted,
        Duration::from_secs(30),
    )
}

/// A topic prefix no earlier run used.
fn fresh_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("cdc{nanos}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_records_are_consumed_intact() {
    let Some(bootstrap) = common::real_kafka() else {
        return;
    };
    let prefix = fresh_prefix();
    let builder = common::builder(&prefix);
    let records = common::records_of(&builder, &common::insert_tx(1, 1, 20), 4);
    publisher(&bootstrap, &prefix, 3)
        .publish(records.clone())
        .await
        .unwrap();

    let topic = format!("{prefix}.shop.orders");
    let consumed = reader(&bootstrap).read_all(&topic).await.unwrap();
    assert_eq!(consumed.len(), 20);
    for r in &consumed {
        let original = records
            .iter()
            .find(|o| o.key == r.key)
            .expect("every consumed key was published");
        assert_eq!(r.value, original.value);
        assert_eq!(r.headers, original.headers_owned());
    }
    // Same key, same partition: ids spread over all three partitions.
    let partitions: BTreeSet<i32> = consumed.iter().map(|r| r.partition).collect();
    assert!(partitions.len() > 1, "{partitions:?}");
}

/// A local queue far smaller than a batch: every record waits for room (a delivery report
/// frees it), none is dropped or reordered, across two batches enqueued back to back and
/// acknowledged as two counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_local_queue_waits_for_room_and_keeps_the_order() {
    let Some(bootstrap) = common::real_kafka() else {
        return;
    };
    let prefix = fresh_prefix();
    let builder = common::builder(&prefix);
    let first = common::records_of(&builder, &common::insert_tx(1, 1, 300), 1);
    let second = common::records_of(&builder, &common::insert_tx(2, 301, 300), 1);
    let p = publisher_with(
        &bootstrap,
        &prefix,
        1,
        &[("queue.buffering.max.messages", "7")],
    );
    let acks_first = p.enqueue(first.clone()).await.unwrap();
    let acks_second = p.enqueue(second.clone()).await.unwrap();
    acks_first.acknowledged().await.unwrap();
    acks_second.acknowledged().await.unwrap();

    let topic = format!("{prefix}.shop.orders");
    let consumed = reader(&bootstrap).read_all(&topic).await.unwrap();
    let published: Vec<_> = first.iter().chain(&second).map(|r| &r.key).collect();
    let keys: Vec<_> = consumed.iter().map(|r| &r.key).collect();
    assert_eq!(
        keys, published,
        "one partition: exactly the records, in order"
    );
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
    let Some(bootstrap) = common::real_kafka() else {
        return;
    };
    let prefix = fresh_prefix();
    let builder = common::builder(&prefix);
    let records = common::records_of(&builder, &common::insert_tx(7, 1, 5), 2);
    publisher(&bootstrap, &prefix, 1)
        .publish(records)
        .await
        .unwrap();
    let topic = format!("{prefix}.shop.orders");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kcat)
            .args(["-b", &bootstrap, "-C", "-t", &topic, "-e", "-J", "-q"])
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
