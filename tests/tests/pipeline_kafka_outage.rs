//! A Kafka outage is a transient fault, not a halt (issue 14): the dev services' broker is
//! stopped for two minutes while a writer commits and two pipelines stream — one
//! at-least-once, one exactly-once, both with 10 s delivery and transaction timeouts, so
//! every publish attempt during the outage fails. Each pipeline must show `retrying` with a
//! value-free Kafka reason and detail (never `failed`), start again by itself with backoff,
//! and, once the broker is back, deliver every change: at-least-once each at least once
//! (replays exact), exactly-once each exactly once to an independent `read_committed`
//! consumer.
//!
//! Before the fix the first failed delivery left the pipeline `failed`
//! (`kafka_delivery_failed`) until someone restarted it. This binary holds one test: it
//! stops the broker every other test uses (a guard starts it again, also on panic).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;
mod snapshot_common;

use std::process::Command;
use std::time::Duration;

use capstan_tests::mysql;
use load_common::*;
use mysql_async::prelude::*;
use serde_json::json;
use snapshot_common::*;

const OUTAGE: Duration = Duration::from_secs(120);

/// The broker stopped while it lives; started again on drop.
struct BrokerDown {
    script: String,
}

impl BrokerDown {
    fn stop() -> BrokerDown {
        let script = std::env::var("CAPSTAN_KAFKA_SCRIPT").expect("CAPSTAN_KAFKA_SCRIPT");
        let ok = Command::new(&script).arg("stop").status().unwrap();
        assert!(ok.success(), "{script} stop");
        BrokerDown { script }
    }
}

impl Drop for BrokerDown {
    fn drop(&mut self) {
        let ok = Command::new(&self.script).arg("start").status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "{} start failed",
            self.script
        );
    }
}

/// Is the broker port accepting connections?
fn broker_up(bootstrap: &str) -> bool {
    bootstrap
        .split(',')
        .filter_map(|a| a.parse::<std::net::SocketAddr>().ok())
        .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_two_minute_broker_outage_is_retried_and_loses_nothing() {
    let Some(db) = mysql() else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "outage").await;
    admin
        .query_drop(format!(
            "CREATE TABLE {} (id BIGINT PRIMARY KEY, v BIGINT)",
            qt(&schema, "t")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    let bootstrap = world.kafka.bootstrap_servers().to_string();
    let mut topics = Vec::new();
    for (name, delivery, prefix) in [
        ("out_alo", "at_least_once", "outalo"),
        ("out_eo", "exactly_once", "outeo"),
    ] {
        let t = topic(prefix, &schema, "t");
        world.one_partition(std::slice::from_ref(&t));
        topics.push(t);
        let mut def = world.definition(
            name,
            &[format!("{schema}.t")],
            json!({"mode": "never"}),
            delivery,
            prefix,
        );
        def["kafka"]["delivery_timeout_ms"] = json!(10_000);
        if delivery == "exactly_once" {
            def["kafka"]["transaction_timeout_ms"] = json!(10_000);
        }
        world.create_and_resume(def).await;
        world
            .wait_status(name, SETTLE, "streaming", |v| v["state"] == "streaming")
            .await;
    }

    let writers = Writers::start(&db, &schema, 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let down = tokio::task::spawn_blocking(BrokerDown::stop).await.unwrap();
    assert!(!broker_up(&bootstrap), "the broker really is down");
    // through the outage: the states each pipeline shows, and the retry details
    let seen = world.watch_outage(&["out_alo", "out_eo"], OUTAGE).await;
    assert!(!broker_up(&bootstrap), "the broker stayed down");
    tokio::task::spawn_blocking(move || drop(down))
        .await
        .unwrap();
    eprintln!("during the outage: states and retry details {seen:?}");
    for (name, (states, details)) in ["out_alo", "out_eo"].iter().zip(&seen) {
        assert!(states.contains("retrying"), "{name}: {states:?}");
        assert!(
            details.iter().all(|d| d.starts_with("kafka_")),
            "{name}: {details:?}"
        );
    }

    // back by itself: streaming again, then every change on the topics
    for name in ["out_alo", "out_eo"] {
        world
            .wait_status(name, Duration::from_secs(90), "streaming", |v| {
                v["state"] == "streaming"
            })
            .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (total_tx, expected) = writers.stop().await;
    assert!(total_tx > 100, "the writers really wrote ({total_tx})");
    let want = events(&expected);
    for (topic, isolation) in [
        (topics[0].clone(), "read_uncommitted"),
        (topics[1].clone(), "read_committed"),
    ] {
        let seen = read_topic_async(&bootstrap, &topic, isolation, want).await;
        assert_histories(&seen.histories, &expected);
        if isolation == "read_committed" {
            assert_eq!(seen.replays, 0, "exactly-once replays");
        }
        eprintln!(
            "{isolation}: {want} change events of {total_tx} transactions, {} replays",
            seen.replays
        );
    }
    let owner = world.status("out_alo").await.unwrap()["owner"]
        .as_u64()
        .unwrap();
    let retries = world.metric(owner, "out_alo", "retries_total").await;
    assert!(retries.is_some_and(|r| r >= 1.0), "{retries:?}");
}
