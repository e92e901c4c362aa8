//! A MySQL server restart mid-stream: the source reconnects and resumes from its last
//! position, nothing skipped or repeated. Its own binary (and its only test): cargo runs test
//! binaries one at a time, so the restart cannot disturb other tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use std::time::Duration;

use capstan_connectors::mysql::{BinlogSource, StartPosition};
use capstan_core::change::Value;
use capstan_tests::{mysql, unique_name};
use mysql_async::prelude::*;
use source_common::*;

fn restart_mysql() {
    let script = capstan_tests::manifest_dir().join("../deploy/dev/services.sh");
    let status = std::process::Command::new(script)
        .arg("restart-mysql")
        .status()
        .unwrap();
    assert!(status.success(), "restart-mysql failed: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_stream_resumes_without_gaps_or_repeats() {
    let Some(db) = mysql() else { return };
    let schema = unique_name("src_restart");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    let mut config = raw_config(&db);
    config.reconnect_backoff_ms = 250;
    config.max_reconnects = 240; // a minute of redials outlives the restart
    let mut source = BinlogSource::start(
        config.validate().unwrap(),
        StartPosition::Current,
        only(&schema, &["t"]),
    )
    .await
    .unwrap();
    let insert = |from: i32, to: i32| {
        let schema = schema.clone();
        move |mut conn: mysql_async::Conn| async move {
            for id in from..to {
                conn.query_drop(format!("INSERT INTO `{schema}`.t VALUES ({id})"))
                    .await
                    .unwrap();
            }
            conn
        }
    };
    // before: streamed and partly read
    admin = insert(0, 50)(admin).await;
    let mut seen = Vec::new();
    while seen.len() < 20 {
        read_ids(&mut source, &schema, &mut seen).await;
    }
    drop(admin);
    tokio::task::spawn_blocking(restart_mysql).await.unwrap();
    // during: written once the server is back, while the source is reconnecting
    let admin = insert(50, 100)(db.admin_conn().await).await;
    // after: the source has read past the restart
    while seen.len() < 100 {
        read_ids(&mut source, &schema, &mut seen).await;
    }
    let admin = insert(100, 150)(admin).await;
    while seen.len() < 150 {
        read_ids(&mut source, &schema, &mut seen).await;
    }
    assert_eq!(
        seen,
        (0..150).collect::<Vec<i64>>(),
        "every id once, in order"
    );
    assert!(source.stats().reconnects >= 1, "{:?}", source.stats());
    // nothing more is pending for this schema
    let extra = tokio::time::timeout(Duration::from_secs(2), source.next()).await;
    if let Ok(Ok(capstan_connectors::mysql::AssemblerOutput::Transaction(t))) = extra {
        assert!(t.changes.iter().all(|c| c.table.schema != schema));
    }
    let mut admin = admin;
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

async fn read_ids(source: &mut BinlogSource, schema: &str, seen: &mut Vec<i64>) {
    let t = next_txn(source, schema).await;
    for c in &t.changes {
        match c.after.as_ref().unwrap().get_by_name("id") {
            Some(Value::Int(i)) => seen.push(*i),
            other => panic!("{other:?}"),
        }
    }
}
