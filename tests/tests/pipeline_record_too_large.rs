//! A row whose event is larger than the producer may send (librdkafka's default
//! `message.max.bytes`, 1,000,000 bytes) halts the pipeline with a definite reason that names
//! the table and both sizes, once: not a bare `kafka_delivery_failed`, and not a retry that
//! meets the same refusal every backoff. The row's value is in no answer and no log line.
//! Before the fix the halt was `kafka_delivery_failed` with no detail (and, once transient
//! faults were retried, a retry every backoff). Kafka is the dev services' real broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use capstan_tests::live_pipeline::LiveSchema;
use capstan_tests::{kafka, mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;

const SETTLE: Duration = Duration::from_secs(40);
/// 5 MiB of one repeated, recognisable text: the value that must never be shown.
const FILLER: &str = "bulky-";

#[test]
fn mysql_a_5_mib_row_halts_naming_the_table_and_both_sizes() {
    let Some(db) = mysql() else { return };
    scenario(db, "mysql");
}

#[test]
fn mariadb_a_5_mib_row_halts_naming_the_table_and_both_sizes() {
    let Some(db) = mariadb() else { return };
    scenario(db, "mariadb");
}

fn scenario(db: DbEnv, flavor: &str) {
    let Some(kafka) = kafka() else { return };
    let bootstrap = kafka.bootstrap_servers().to_string();
    let live = LiveSchema::create(
        db,
        "big",
        "CREATE TABLE `{schema}`.docs (id INT PRIMARY KEY, body LONGTEXT)",
    );
    let Some(cluster) = Cluster::start(1) else {
        return;
    };
    let leader = cluster.wait_for_leader(&[1], SETTLE).expect("leader");
    let prefix = unique_name("big");
    let server_id = 7600 + std::process::id() % 300;
    let definition = live.definition("big", flavor, server_id, "docs", &bootstrap, &prefix);
    cluster.create_streaming(leader, &definition, SETTLE);
    let body = FILLER.repeat((5 << 20) / FILLER.len());
    live.rt.block_on(async {
        let mut conn = live.db.admin_conn().await;
        conn.exec_drop(
            format!(
                "INSERT INTO `{}`.docs VALUES (1, 'small'), (2, ?)",
                live.name
            ),
            (body.as_str(),),
        )
        .await
        .unwrap();
    });
    let status = cluster
        .wait_until(SETTLE, |c| {
            let st = c.pipeline_status(leader, "big")?;
            (st["state"] != "streaming").then_some(st)
        })
        .unwrap_or_else(|| panic!("kept streaming: {}", cluster.log_tail(leader)));
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["reason"], "kafka_record_too_large", "{status}");
    let detail = status["detail"].as_str().unwrap_or_default();
    let table = format!("{}.docs", live.name);
    assert!(detail.contains(&format!("table {table} ")), "{detail}");
    assert!(
        detail.contains("exceeds the producer's message.max.bytes of 1000000 bytes"),
        "{detail}"
    );
    let bytes: usize = detail
        .strip_prefix("record of ")
        .and_then(|d| d.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no record size in {detail}"));
    assert!(
        bytes > body.len() && bytes < body.len() + 4096,
        "{bytes} for a {}-byte row",
        body.len()
    );
    // a definite halt, once: it stays failed, no retry is scheduled
    std::thread::sleep(Duration::from_secs(3));
    let again = cluster.pipeline_status(leader, "big").unwrap();
    assert_eq!(again["state"], "failed", "{again}");
    assert_eq!(cluster.logged("pipeline halted"), 1);
    assert_eq!(cluster.logged("transient fault"), 0);
    // value-free: the row's text is in no answer and no log line
    let shown = format!(
        "{status} {} {}",
        cluster.get(leader, "/pipelines/big").unwrap().1,
        cluster.log(leader)
    );
    assert!(!shown.contains("bulky-bulky-"), "a row value was shown");
}
