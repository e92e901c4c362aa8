//! `snapshot.mode: when_needed` re-snapshots when the checkpoint is no longer on the server:
//! a pipeline snapshots and streams, is stopped, rows are written and the binlog holding
//! them is purged, and on resume the pipeline snapshots the table again instead of halting
//! `data_gap` — the purged rows arrive as snapshot reads, nothing is lost. Both servers.
//!
//! Its own test binary: purging binlogs would cut the history other tests stream from.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::BTreeSet;
use std::time::Duration;

use mysql_async::prelude::*;
use serde_json::json;
use snapshot_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_when_needed_resnapshots_after_a_purge() {
    resnapshot_after_purge("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_when_needed_resnapshots_after_a_purge() {
    resnapshot_after_purge("mariadb").await;
}

/// Rotates the binlog and purges every file before the new one. MariaDB keeps a file until
/// its binlog checkpoint is written (and neither server purges a file a dump thread still
/// reads), so the purge is retried for a while.
async fn purge_all_but_current(admin: &mut mysql_async::Conn, flavor: &str) {
    admin.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let status = match flavor {
        "mysql" => "SHOW BINARY LOG STATUS",
        _ => "SHOW MASTER STATUS",
    };
    let row: mysql_async::Row = admin.query_first(status).await.unwrap().unwrap();
    let file: String = row.get(0).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        admin
            .query_drop(format!("PURGE BINARY LOGS TO '{file}'"))
            .await
            .unwrap();
        let logs: Vec<mysql_async::Row> = admin.query("SHOW BINARY LOGS").await.unwrap();
        if logs.len() == 1 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "older binlogs still kept: {}",
            logs.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ids(recs: &[Rec]) -> Vec<i64> {
    recs.iter()
        .map(|r| r.value.as_ref().unwrap()["after"]["id"].as_i64().unwrap())
        .collect()
}

async fn resnapshot_after_purge(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapn").await;
    let t = qt(&schema, "t");
    admin
        .query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL); \
             INSERT INTO {t} SELECT seq, seq FROM (SELECT 1 seq UNION SELECT 2 UNION SELECT 3 \
             UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 \
             UNION SELECT 9 UNION SELECT 10 UNION SELECT 11 UNION SELECT 12) s"
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("sn", &schema, "t");
    world.one_partition(std::slice::from_ref(&tp));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &tp);
    let name = format!("{schema}.t");
    let def = world.definition(
        "wn",
        std::slice::from_ref(&name),
        json!({"mode": "when_needed", "chunk_size": 5}),
        "at_least_once",
        "sn",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("wn", Duration::from_secs(60), "first snapshot", |s| {
            s["state"] == "streaming" && table_status(s, &name)["status"] == "complete"
        })
        .await;
    admin
        .query_drop(format!("INSERT INTO {t} VALUES (13, 13)"))
        .await
        .unwrap();
    let first = tail
        .until(Duration::from_secs(60), |rs| {
            rs.iter().any(|r| r.op() == Some("c"))
        })
        .await;
    let r = replay(&first, &["id"]);
    assert_eq!(ids(&r.read_recs), (1..=12).collect::<Vec<_>>());
    assert_eq!(world.markers("sn", &schema, "t").await.len(), 1);

    // stopped; two rows written, and the binlog holding them purged
    world.control("wn", "stop").await;
    world
        .wait_status("wn", Duration::from_secs(30), "stopped", |s| {
            s["state"] == "stopped"
        })
        .await;
    admin
        .query_drop(format!(
            "INSERT INTO {t} VALUES (14, 14); UPDATE {t} SET v = 0 WHERE id = 1"
        ))
        .await
        .unwrap();
    purge_all_but_current(&mut admin, flavor).await;
    world.control("wn", "resume").await;
    world
        .wait_status("wn", Duration::from_secs(60), "re-snapshot", |s| {
            s["state"] == "streaming" && table_status(s, &name)["status"] == "complete"
        })
        .await;
    admin
        .query_drop(format!("INSERT INTO {t} VALUES (15, 15)"))
        .await
        .unwrap();
    let recs = tail
        .until(Duration::from_secs(60), |rs| {
            rs.last().and_then(|r| r.key.as_ref()) == Some(&json!({"id": 15}))
        })
        .await;
    let r = replay(&recs, &["id"]);

    // the second snapshot happened, because the checkpoint was lost
    let logged = world
        .blocking(|c| {
            [1, 2, 3].iter().any(|&id| {
                c.log(id)
                    .contains("re-snapshot: the checkpoint is no longer on the server")
            })
        })
        .await;
    assert!(logged, "the owner decided to re-snapshot");
    assert_eq!(
        world.markers("sn", &schema, "t").await.len(),
        2,
        "two snapshots completed"
    );
    let second: Vec<Rec> = r.read_recs[12..].to_vec();
    assert_eq!(
        ids(&second),
        (1..=14).collect::<Vec<_>>(),
        "the whole table read again"
    );
    // the purged changes were never streamed: they arrive as snapshot reads only
    let changed: BTreeSet<i64> = r
        .changes
        .iter()
        .map(|c| c.value.as_ref().unwrap()["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        changed,
        BTreeSet::from([13, 15]),
        "streamed: 13 before, 15 after"
    );
    assert_eq!(
        second[0].value.as_ref().unwrap()["after"]["v"],
        0,
        "row 1 as updated"
    );
    let source = source_rows(&mut admin, &schema, "t", &["id"]).await;
    assert_same(&r.state, &source, flavor);
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
