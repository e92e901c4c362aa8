//! Publishing throughput to the dev services' real Kafka (ignored by default; run with
//! `eval "$(deploy/dev/services.sh env)"` then
//! `cargo test -p capstan-kafka --release --test publish_throughput -- --ignored --nocapture`).
//! The three-broker cluster (`CAPSTAN_KAFKA_CLUSTER_BOOTSTRAP`, replication 3, `acks=all`
//! waits for the in-sync replicas) when it runs, else the single broker (replication 1).
//! Events are realistic change events of about 500 bytes (envelope + key + headers).
//!
//! The same records are also produced with a plain rdkafka `FutureProducer` (same producer
//! properties, no capstan publisher): once enqueued all at once and awaited at the end (the raw
//! limit of this broker and client), and once awaited per source transaction (the raw cost of
//! capstan's barrier: a batch is acknowledged before the checkpoint may move).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use capstan_core::position::{Flavor, Position};
use capstan_kafka::config::SinkConfig;
use capstan_kafka::exactly_once::{
    Checkpoint, ExactlyOncePublisher, KafkaTransactionalLog, OwnerIdentity, SnapshotProgress,
};
use capstan_kafka::publisher::{KafkaPublisher, Publisher};
use capstan_kafka::record::KafkaRecord;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

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

fn config(bootstrap: &str) -> SinkConfig {
    let mut c = SinkConfig::new(bootstrap, "bench");
    c.delivery_timeout_ms = 30_000;
    c
}

/// A plain rdkafka producer with capstan's producer properties (idempotent, `acks=all`,
/// `linger.ms=5`), built without capstan's config or publisher code.
fn raw_producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "5")
        .set("message.timeout.ms", "30000")
        .set("linger.ms", "5")
        .create()
        .unwrap()
}

fn raw_record(r: &KafkaRecord) -> FutureRecord<'_, [u8], [u8]> {
    let headers = r.headers.iter().fold(OwnedHeaders::new(), |h, (k, v)| {
        h.insert(Header {
            key: k,
            value: Some(v.as_slice()),
        })
    });
    let mut fr = FutureRecord::<[u8], [u8]>::to(&r.topic).headers(headers);
    if let Some(k) = &r.key {
        fr = fr.key(k.as_slice());
    }
    if let Some(v) = &r.value {
        fr = fr.payload(v.as_slice());
    }
    if let Some(ts) = r.timestamp_ms {
        fr = fr.timestamp(ts);
    }
    fr
}

/// Creates `topic` (an existing one is kept).
async fn create_topic(bootstrap: &str, topic: &str, partitions: i32, replication: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let spec = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in admin.create_topics([&spec], &options).await.unwrap() {
        match r {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => panic!("create {t}: {e:?}"),
        }
    }
}

/// Produces `records` with `send_result` (the local queue is large enough for all of them),
/// then awaits every delivery.
async fn raw_send(producer: &FutureProducer, records: &[KafkaRecord]) {
    let mut pending = Vec::with_capacity(records.len());
    for r in records {
        pending.push(
            producer
                .send_result(raw_record(r))
                .map_err(|(e, _)| e)
                .unwrap(),
        );
    }
    for d in pending {
        d.await.unwrap().map_err(|(e, _)| e).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn throughput_idempotent_and_transactional() {
    let Some(single) = common::real_kafka() else {
        return;
    };
    let (bootstrap, replication) = match std::env::var("CAPSTAN_KAFKA_CLUSTER_BOOTSTRAP") {
        Ok(b) if !b.is_empty() => (b, 3),
        _ => (single, 1),
    };
    println!("broker(s) {bootstrap}, replication {replication}");
    create_topic(&bootstrap, "bench.shop.orders", 6, replication).await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let offsets_topic = format!("capstan.offsets.bench.{nanos}");
    let transactional_id = format!("capstan-bench-{nanos}");
    create_topic(&bootstrap, &offsets_topic, 1, replication).await;
    let batches = batches();

    let raw = raw_producer(&bootstrap);
    raw_send(&raw, &batches[0]).await; // warm up
    let all: Vec<KafkaRecord> = batches.iter().flatten().cloned().collect();
    let start = Instant::now();
    raw_send(&raw, &all).await;
    report(
        "raw rdkafka FutureProducer, idempotent, acks=all, all records then all acks (limit)",
        &batches,
        start.elapsed(),
    );
    let start = Instant::now();
    for batch in &batches {
        raw_send(&raw, batch).await;
    }
    report(
        "raw rdkafka FutureProducer, idempotent, acks=all, acks awaited per source transaction",
        &batches,
        start.elapsed(),
    );
    drop(raw);

    let publisher =
        KafkaPublisher::new(&config(&bootstrap).validate(Flavor::Mysql).unwrap().producer).unwrap();
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
    let one = all.clone();
    let start = Instant::now();
    publisher.publish(one).await.unwrap();
    report(
        "idempotent, acks=all, every record in one publish (same batching as the raw limit)",
        &batches,
        start.elapsed(),
    );

    let checked = config(&bootstrap).validate(Flavor::Mysql).unwrap();
    let log = KafkaTransactionalLog::new(checked.producer, 60_000, Duration::from_secs(30));
    let empty = Checkpoint {
        position: Position::empty(Flavor::Mysql),
        processed: None,
        snapshot: SnapshotProgress::default(),
        within: None,
    };
    let owner = OwnerIdentity {
        pipeline: "bench",
        epoch: 1,
        transactional_id: &transactional_id,
        offsets_topic: &offsets_topic,
        incarnation: None,
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
                processed: None,
                snapshot: SnapshotProgress::default(),
                within: None,
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
