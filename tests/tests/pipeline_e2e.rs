//! A pipeline end to end on three real worker processes: POST a definition, resume it, write
//! rows on the real MySQL 9.x and MariaDB dev servers, and read the change events back from
//! Kafka (the dev services' real Apache Kafka broker). One scenario, run against
//! each flavour.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_core::position::{Gtid, GtidSet, MariadbGtid, MariadbGtidPosition};
use capstan_kafka::topic_reader::{ConsumedRecord, Isolation, TopicReader};
use capstan_tests::cluster::Cluster;
use capstan_tests::{mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(30);

fn value(r: &ConsumedRecord) -> Option<Value> {
    r.value.as_ref().map(|v| serde_json::from_slice(v).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_changes_reach_kafka_in_order_through_a_three_node_cluster() {
    let Some(db) = mysql() else { return };
    scenario(db, "mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_changes_reach_kafka_in_order_through_a_three_node_cluster() {
    let Some(db) = mariadb() else { return };
    scenario(db, "mariadb").await;
}

/// True when the checkpoint text `position` (in `flavor`'s form) covers the GTID `gtid`.
fn covers(flavor: &str, position: &str, gtid: &str) -> Option<bool> {
    Some(match flavor {
        "mysql" => position
            .parse::<GtidSet>()
            .ok()?
            .contains(&gtid.parse::<Gtid>().ok()?),
        _ => position
            .parse::<MariadbGtidPosition>()
            .ok()?
            .contains(&gtid.parse::<MariadbGtid>().ok()?),
    })
}

/// The value of `name`'s sample for `pipeline` in the OpenMetrics `text` (the labels may
/// have more than the pipeline).
fn metric(text: &str, name: &str, pipeline: &str) -> Option<f64> {
    let label = format!("pipeline=\"{pipeline}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| l.contains(&label))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

async fn scenario(db: DbEnv, flavor: &'static str) {
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let schema = unique_name("e2e");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.items \
             (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2))"
        ))
        .await
        .unwrap();

    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap();
    let Some(cluster) = cluster else { return };
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let leader = tokio::task::spawn_blocking(move || c.wait_for_leader(&[1, 2, 3], SETTLE))
        .await
        .unwrap()
        .expect("leader");

    let server_id = if flavor == "mysql" { 5000 } else { 5500 } + (std::process::id() % 500);
    // the source is reached through a proxy, so that its own binlog stream can be told from
    // the other tests' ones and cut
    let proxy = capstan_tests::switch_proxy::SwitchProxy::start(db.port).await;
    let definition = json!({
        "name": "items",
        "source": {
            "host": "127.0.0.1", "port": proxy.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": server_id, "flavor": flavor
        },
        "tables": {"include": [format!("{schema}.items")]},
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "e2e"},
        "start_position": "current"
    });
    let c = cluster.clone();
    let d = definition.clone();
    let (status, body) = tokio::task::spawn_blocking(move || {
        c.send(leader, Method::POST, "/pipelines", Some(&d))
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["config"]["source"]["password"], "<redacted>");
    assert!(!body.to_string().contains(&db.password));
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        let (s, _) = c
            .send(leader, Method::PUT, "/pipelines/items/resume", None)
            .unwrap();
        assert_eq!(s, 202);
        c.wait_until(SETTLE, |c| {
            let (_, v) = c.get(leader, "/pipelines/items/status")?;
            (v["state"] == "streaming").then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "never streaming: {:?}",
                c.get(leader, "/pipelines/items/status")
            )
        });
    })
    .await
    .unwrap();

    admin
        .query_drop(format!(
            "INSERT INTO `{schema}`.items VALUES (1, 'apple', 1.50), (2, 'pear', 2.25); \
             UPDATE `{schema}`.items SET price = 1.75 WHERE id = 1; \
             DELETE FROM `{schema}`.items WHERE id = 2; \
             ALTER TABLE `{schema}`.items ADD COLUMN stock INT; \
             INSERT INTO `{schema}`.items VALUES (3, 'plum', 0.99, 7)"
        ))
        .await
        .unwrap();

    let topic = format!("e2e.{schema}.items");
    let reader = TopicReader::new(
        kafka.bootstrap_servers(),
        Isolation::ReadUncommitted,
        SETTLE,
    );
    let mut records = Vec::new();
    for _ in 0..60 {
        records = reader.read_all(&topic).await.unwrap();
        if records.len() >= 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Kafka orders per partition, and the key picks the partition: per key, the events
    // arrive in the order the source committed them
    let op = |r: &ConsumedRecord| match value(r) {
        Some(v) => v["op"].as_str().unwrap().to_string(),
        None => "tombstone".to_string(),
    };
    let key = |r: &ConsumedRecord| String::from_utf8(r.key.clone().unwrap()).unwrap();
    let per_key =
        |k: &str| -> Vec<String> { records.iter().filter(|r| key(r) == k).map(op).collect() };
    assert_eq!(records.len(), 6, "records: {records:?}");
    assert_eq!(per_key(r#"{"id":1}"#), ["c", "u"]);
    assert_eq!(per_key(r#"{"id":2}"#), ["c", "d", "tombstone"]);
    assert_eq!(per_key(r#"{"id":3}"#), ["c"]);
    let by_key =
        |k: &str, i: usize| value(records.iter().filter(|r| key(r) == k).nth(i).unwrap()).unwrap();
    let first = by_key(r#"{"id":1}"#, 0);
    assert_eq!(
        first["after"],
        json!({"id": 1, "name": "apple", "price": "1.50"})
    );
    assert_eq!(first["source"]["db"], schema);
    assert_eq!(first["source"]["connector"], flavor);
    let update = by_key(r#"{"id":1}"#, 1);
    assert_eq!(update["before"]["price"], "1.50");
    assert_eq!(update["after"]["price"], "1.75");
    let delete = by_key(r#"{"id":2}"#, 1);
    assert_eq!(delete["before"]["id"], 2);
    assert_eq!(delete["after"], Value::Null);
    let after_ddl = by_key(r#"{"id":3}"#, 0);
    assert_eq!(
        after_ddl["after"]["stock"], 7,
        "the row after the DDL has the new column"
    );
    // the DDL is on the schema-change topic (named after the prefix), statement redacted
    let ddl: Vec<Value> = reader
        .read_all("e2e")
        .await
        .unwrap()
        .iter()
        .filter_map(value)
        .filter(|v| v["databaseName"] == schema.as_str())
        .collect();
    assert_eq!(ddl.len(), 1, "{ddl:?}");
    assert_eq!(ddl[0]["tableName"], "items");
    assert_eq!(ddl[0]["kind"], "alter_table");
    assert_eq!(
        ddl[0]["ddl"],
        Value::Null,
        "statement text is redacted by default"
    );
    for r in &records {
        assert_eq!(r.header_str("capstan.pipeline"), Some("items"));
        // the position header is the source GTID, in the flavour's own form
        let gtid = r.header_str("capstan.position").unwrap();
        assert_eq!(covers(flavor, gtid, gtid), Some(true), "{gtid}");
        if let Some(v) = value(r) {
            assert_eq!(v["source"]["gtid"], gtid);
            assert_eq!(v["source"]["connector"], flavor);
        }
    }

    // the checkpoint in Raft covers every delivered transaction
    let last = records.iter().find(|r| key(r) == r#"{"id":3}"#).unwrap();
    let gtid = last.header_str("capstan.position").unwrap().to_string();
    let c = cluster.clone();
    let owner = tokio::task::spawn_blocking(move || {
        let covered = c.wait_until(SETTLE, |c| {
            let (_, v) = c.get(leader, "/pipelines/items/status")?;
            covers(flavor, v["position"].as_str()?, &gtid)?.then_some(())
        });
        assert!(
            covered.is_some(),
            "checkpoint never covered the last transaction"
        );
        // every node's status shows the lag the owner measured
        let (_, status) = c.get(leader, "/pipelines/items/status").unwrap();
        let owner = status["owner"].as_u64().unwrap();
        for id in [1, 2, 3] {
            let (_, st) = c.get(id, "/pipelines/items/status").unwrap();
            assert_eq!(st["snapshot"], json!([]), "no snapshot configured");
            let lag = st["lag_ms"].as_u64();
            assert!(
                lag.is_some_and(|l| l < 60_000),
                "node {id} (owner {owner}): {st}"
            );
            // and the rows it counted: two inserts, an update, a delete and an insert
            assert_eq!(st["rows_total"], 5, "node {id} (owner {owner}): {st}");
        }
        // the owner's metrics count what it published
        let text = reqwest::blocking::get(format!("{}/metrics", c.workers[&owner].api()))
            .unwrap()
            .text()
            .unwrap();
        let rows = text
            .lines()
            .find(|l| l.contains("pipeline_rows_total{") && l.contains("\"items\""))
            .unwrap_or_else(|| panic!("no rows counter in:\n{text}"));
        let n: f64 = rows.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(
            n, 5.0,
            "two inserts, an update, a delete and an insert: {rows}"
        );
        // its source is connected, and the build says what it is
        assert!(
            text.contains("capstan_source_connected{pipeline=\"items\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("capstan_source_reconnects_total{pipeline=\"items\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "capstan_build_info{{version=\"{}\"",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
        for kind in [
            "# TYPE capstan_pipeline_rows counter\n",
            "# TYPE capstan_source_reconnects counter\n",
            "# TYPE capstan_source_connected gauge\n",
        ] {
            assert!(text.contains(kind), "{kind}:\n{text}");
        }
        for counter in ["transactions", "bytes"] {
            let sample = metric(&text, &format!("capstan_pipeline_{counter}_total"), "items");
            assert!(sample.is_some_and(|n| n > 0.0), "{counter}:\n{text}");
        }
        assert!(
            metric(&text, "capstan_pipeline_lag_seconds", "items").is_some(),
            "{text}"
        );
        owner
    })
    .await
    .unwrap();

    // the pipeline's binlog stream is cut on the server: the source redials, the owner counts
    // one reconnect and shows the source connected again
    let ports = proxy.upstream_ports(db.port);
    let threads: Vec<(u64, String)> = admin
        .query(
            "SELECT ID, HOST FROM information_schema.PROCESSLIST \
             WHERE COMMAND LIKE 'Binlog Dump%'",
        )
        .await
        .unwrap();
    let ours: Vec<u64> = threads
        .into_iter()
        .filter(|(_, host)| {
            host.rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .is_some_and(|p| ports.contains(&p))
        })
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "one binlog stream of this pipeline: {ours:?}"
    );
    admin.query_drop(format!("KILL {}", ours[0])).await.unwrap();
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        let api = c.workers[&owner].api();
        let redialled = c.wait_until(SETTLE, |_| {
            let text = reqwest::blocking::get(format!("{api}/metrics"))
                .ok()?
                .text()
                .ok()?;
            let reconnects = metric(&text, "capstan_source_reconnects_total", "items")?;
            let connected = metric(&text, "capstan_source_connected", "items")?;
            (reconnects == 1.0 && connected == 1.0).then_some(())
        });
        assert!(
            redialled.is_some(),
            "no reconnect counted, or not connected again: {:?}",
            reqwest::blocking::get(format!("{api}/metrics")).and_then(|r| r.text())
        );
        let (_, st) = c.get(owner, "/pipelines/items/status").unwrap();
        assert_eq!(st["state"], "streaming", "{st}");
    })
    .await
    .unwrap();
    // pause is honoured within a second: nothing is published while paused, and resume
    // picks up exactly where the pipeline stopped
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        let (s, _) = c
            .send(leader, Method::PUT, "/pipelines/items/pause", None)
            .unwrap();
        assert_eq!(s, 202);
        let paused = c.wait_until(Duration::from_secs(1), |c| {
            let (_, v) = c.get(leader, "/pipelines/items/status")?;
            (v["state"] == "paused").then_some(())
        });
        assert!(paused.is_some(), "not paused within a second");
        // a paused pipeline's source is not connected
        let api = c.workers[&owner].api();
        let closed = c.wait_until(Duration::from_secs(5), |_| {
            let text = reqwest::blocking::get(format!("{api}/metrics"))
                .ok()?
                .text()
                .ok()?;
            (metric(&text, "capstan_source_connected", "items")? == 0.0).then_some(())
        });
        assert!(closed.is_some(), "still connected while paused");
    })
    .await
    .unwrap();
    admin
        .query_drop(format!(
            "INSERT INTO `{schema}`.items VALUES (4, 'fig', 3.10, 1)"
        ))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        reader.read_all(&topic).await.unwrap().len(),
        6,
        "nothing is published while paused"
    );
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.send(leader, Method::PUT, "/pipelines/items/resume", None)
            .unwrap();
    })
    .await
    .unwrap();
    let mut after_resume = Vec::new();
    for _ in 0..40 {
        after_resume = reader.read_all(&topic).await.unwrap();
        if after_resume.len() >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let fig: Vec<_> = after_resume
        .iter()
        .filter(|r| r.key.as_deref() == Some(br#"{"id":4}"#.as_slice()))
        .collect();
    assert_eq!(
        fig.len(),
        1,
        "the row written while paused arrives once after resume"
    );
    assert_eq!(after_resume.len(), 7);

    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
