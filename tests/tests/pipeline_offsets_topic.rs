//! An exactly-once pipeline's offsets record lives in a topic of its own
//! (`capstan.offsets.<pipeline>` by default), so another producer's transaction left open —
//! a killed owner of some other pipeline, say — cannot delay its start or resume.
//!
//! Before, every pipeline shared `capstan.offsets`: opening the publisher reads the offsets
//! topic `read_committed` to its high watermark, which waits for every open transaction on
//! it, so a foreign transaction held each exactly-once start for up to that producer's
//! transaction timeout (a CI run failed exactly so: "no streaming within 30s"). Here a
//! foreign transaction stays open on `capstan.offsets` for the whole test (its timeout is
//! two minutes; the test proves a read_committed read of that topic really blocks), and the
//! pipeline must stream, and publish, well within that. Kafka is the dev services' real
//! broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::time::Duration;

use capstan_kafka::topic_reader::{Isolation, TopicReader};
use capstan_tests::{mysql, unique_name};
use mysql_async::prelude::*;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};
use snapshot_common::*;

/// The default every exactly-once pipeline shared before.
const SHARED_OFFSETS: &str = "capstan.offsets";

/// A transactional producer of another `transactional.id` with a transaction open on
/// `topic`; aborted on drop so later tests do not wait for it.
struct ForeignTransaction(BaseProducer);

impl ForeignTransaction {
    fn open(bootstrap: &str, topic: &str) -> ForeignTransaction {
        let producer: BaseProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("transactional.id", unique_name("foreign-zombie"))
            .set("transaction.timeout.ms", "120000")
            .create()
            .unwrap();
        let t = Duration::from_secs(30);
        producer.init_transactions(t).unwrap();
        producer.begin_transaction().unwrap();
        producer
            .send(BaseRecord::to(topic).key("another-pipeline").payload("{}"))
            .map_err(|(e, _)| e)
            .unwrap();
        producer.flush(t).unwrap();
        ForeignTransaction(producer)
    }
}

impl Drop for ForeignTransaction {
    fn drop(&mut self) {
        let _ = self.0.abort_transaction(Duration::from_secs(30));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreign_open_transaction_does_not_delay_an_exactly_once_start() {
    let Some(db) = mysql() else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "poff").await;
    admin
        .query_drop(format!(
            "CREATE TABLE {} (id INT PRIMARY KEY, v VARCHAR(20))",
            qt(&schema, "t")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    let bootstrap = world.kafka.bootstrap_servers().to_string();
    world.kafka.create_topic(SHARED_OFFSETS, 1, 1).unwrap();
    let foreign = tokio::task::spawn_blocking({
        let bootstrap = bootstrap.clone();
        move || ForeignTransaction::open(&bootstrap, SHARED_OFFSETS)
    })
    .await
    .unwrap();
    // the scenario is real: a read_committed read of the shared topic waits for it
    let committed = |timeout| TopicReader::new(&bootstrap, Isolation::ReadCommitted, timeout);
    let blocked = committed(Duration::from_secs(5))
        .latest_by_key(SHARED_OFFSETS, b"eo")
        .await;
    assert!(
        matches!(&blocked, Err(e) if e.code() == "kafka_timeout"),
        "{blocked:?}"
    );

    let topic = topic("poff", &schema, "t");
    world.one_partition(std::slice::from_ref(&topic));
    let name = unique_name("eo");
    let def = world.definition(
        &name,
        &[format!("{schema}.t")],
        json!({"mode": "never"}),
        "exactly_once",
        "poff",
    );
    world.create_and_resume(def).await;
    // far less than the foreign transaction's two minutes
    world
        .wait_status(&name, Duration::from_secs(20), "streaming", |v| {
            v["state"] == "streaming"
        })
        .await;
    for id in 0..3 {
        admin
            .query_drop(format!(
                "INSERT INTO {} VALUES ({id}, 'v{id}')",
                qt(&schema, "t")
            ))
            .await
            .unwrap();
    }
    let reader = committed(Duration::from_secs(30));
    let mut rows = Vec::new();
    for _ in 0..40 {
        rows = reader
            .read_all(&topic)
            .await
            .unwrap()
            .iter()
            .filter_map(|r| r.value.as_deref())
            .map(|v| serde_json::from_slice::<Value>(v).unwrap())
            .map(|v| (v["after"]["id"].as_i64().unwrap(), v["after"]["v"].clone()))
            .collect();
        if rows.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        rows,
        vec![(0, json!("v0")), (1, json!("v1")), (2, json!("v2"))]
    );
    // the pipeline's own offsets topic holds its record
    let own = reader
        .latest_by_key(&format!("capstan.offsets.{name}"), name.as_bytes())
        .await
        .unwrap();
    assert!(own.is_some(), "no offsets record in capstan.offsets.{name}");
    // the foreign transaction was open throughout
    let still = committed(Duration::from_secs(3))
        .latest_by_key(SHARED_OFFSETS, b"eo")
        .await;
    assert!(
        matches!(&still, Err(e) if e.code() == "kafka_timeout"),
        "{still:?}"
    );
    tokio::task::spawn_blocking(move || drop(foreign))
        .await
        .unwrap();
}
