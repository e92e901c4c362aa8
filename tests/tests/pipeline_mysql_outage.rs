//! A source outage longer than the reconnect budget is a transient fault, not a halt (issue
//! 14): the MySQL dev server is stopped for 90 s while a pipeline streams with a small
//! reconnect budget (`max_reconnects` 2, 200 ms backoff: used up within a second). The
//! pipeline must show `retrying` with a value-free source reason and detail (never
//! `failed`), start again by itself with backoff, and, once the server is back, deliver every
//! change written before the stop and after the start, exactly as the writer committed them.
//!
//! Before the fix the used-up budget halted the pipeline (`stream_stalled`) until someone
//! restarted it. This binary holds one test: it stops the server every other test uses (a
//! guard starts it again, also on panic).

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

const OUTAGE: Duration = Duration::from_secs(90);
/// The dev services' script.
fn services() -> std::path::PathBuf {
    capstan_tests::manifest_dir().join("../deploy/dev/services.sh")
}

/// MySQL stopped while it lives; started again on drop.
struct MysqlDown;

impl MysqlDown {
    fn stop() -> MysqlDown {
        let ok = Command::new(services()).arg("stop-mysql").status().unwrap();
        assert!(ok.success(), "stop-mysql");
        MysqlDown
    }
}

impl Drop for MysqlDown {
    fn drop(&mut self) {
        let ok = Command::new(services()).arg("start-mysql").status();
        assert!(ok.is_ok_and(|s| s.success()), "start-mysql failed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ninety_second_mysql_outage_is_retried_and_loses_nothing() {
    let Some(db) = mysql() else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "srcout").await;
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
    let topic = topic("srcout", &schema, "t");
    world.one_partition(std::slice::from_ref(&topic));
    let mut def = world.definition(
        "src_out",
        &[format!("{schema}.t")],
        json!({"mode": "never"}),
        "at_least_once",
        "srcout",
    );
    def["source"]["max_reconnects"] = json!(2);
    def["source"]["reconnect_backoff_ms"] = json!(200);
    world.create_and_resume(def).await;
    world
        .wait_status("src_out", SETTLE, "streaming", |v| {
            v["state"] == "streaming"
        })
        .await;

    // a first run of writes, then the server goes away
    let writers = Writers::start(&db, &schema, 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (first_tx, _) = writers.stop().await;
    drop(admin);
    let down = tokio::task::spawn_blocking(MysqlDown::stop).await.unwrap();
    let (states, details) = world.watch_outage(&["src_out"], OUTAGE).await.remove(0);
    tokio::task::spawn_blocking(move || drop(down))
        .await
        .unwrap();
    eprintln!("during the outage: states {states:?}; retry details {details:?}");
    assert!(states.contains("retrying"), "{states:?}");
    assert!(
        details.iter().all(|d| d.contains(": source: ")),
        "{details:?}"
    );

    // back by itself; a second run of writes continues the first writer's keys
    world
        .wait_status("src_out", Duration::from_secs(90), "streaming", |v| {
            v["state"] == "streaming"
        })
        .await;
    let mut admin = db.admin_conn().await;
    let base = 1_000_000i64;
    for i in first_tx + 1..=first_tx + 200 {
        let k = base + i as i64;
        admin
            .query_drop(format!(
                "START TRANSACTION; INSERT INTO {t} VALUES ({k}, {i}); \
                 UPDATE {t} SET v = v + 1000000 WHERE id = {}; COMMIT",
                k - 1,
                t = qt(&schema, "t")
            ))
            .await
            .unwrap();
    }
    // the same history as one writer committing first_tx + 200 transactions
    let n = first_tx + 200;
    let mut expected = Histories::new();
    for i in 1..=n {
        let mut h = vec![("c".to_string(), i as i64)];
        if i < n {
            h.push(("u".to_string(), i as i64 + 1_000_000));
        }
        expected.insert(base + i as i64, h);
    }
    let bootstrap = world.kafka.bootstrap_servers().to_string();
    let seen = read_topic_async(&bootstrap, &topic, "read_uncommitted", events(&expected)).await;
    assert_histories(&seen.histories, &expected);
    eprintln!(
        "{} change events of {n} transactions, {} replays",
        events(&expected),
        seen.replays
    );
    let owner = world.status("src_out").await.unwrap()["owner"]
        .as_u64()
        .unwrap();
    let retries = world.metric(owner, "src_out", "retries_total").await;
    assert!(retries.is_some_and(|r| r >= 1.0), "{retries:?}");
}
