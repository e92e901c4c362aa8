//! `snapshot.mode: when_needed` when the running stream finds its position purged (issue 18,
//! item 3): the dump is cut, rows are written and the binlog holding them is purged before
//! the source redials, and the redial's `data_gap` no longer halts the pipeline — the runner
//! exits to be started again, and that start snapshots the table again from a new floor. The
//! purged changes arrive as snapshot reads, nothing is lost. Both servers.
//!
//! Its own test binary: purging binlogs would cut the history other tests stream from.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::BTreeSet;
use std::time::Duration;

use capstan_tests::switch_proxy::SwitchProxy;
use mysql_async::prelude::*;
use serde_json::json;
use snapshot_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_when_needed_resnapshots_when_the_stream_finds_its_position_purged() {
    resnapshot_mid_stream("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_when_needed_resnapshots_when_the_stream_finds_its_position_purged() {
    resnapshot_mid_stream("mariadb").await;
}

/// Rotates the binlog and purges every file before the new one (retried: MariaDB keeps a
/// file until its binlog checkpoint is written, and a cut dump thread may still hold one).
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

async fn resnapshot_mid_stream(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapg").await;
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
    // the pipeline reaches the server through a proxy, so its dump thread can be found
    let proxy = SwitchProxy::start(db.port).await;
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("sg", &schema, "t");
    world.one_partition(std::slice::from_ref(&tp));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &tp);
    let name = format!("{schema}.t");
    let mut def = world.definition(
        "gap",
        std::slice::from_ref(&name),
        json!({"mode": "when_needed", "chunk_size": 5}),
        "at_least_once",
        "sg",
    );
    def["source"]["port"] = json!(proxy.port);
    // room to write and purge between the cut and the redial
    def["source"]["reconnect_backoff_ms"] = json!(15_000);
    world.create_and_resume(def).await;
    world
        .wait_status("gap", Duration::from_secs(60), "first snapshot", |s| {
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

    // the dump is cut; two rows are written and their binlog purged before the redial
    let ports = proxy.upstream_ports(db.port);
    let rows: Vec<(u64, String, String)> = admin
        .query("SELECT ID, HOST, COMMAND FROM information_schema.PROCESSLIST")
        .await
        .unwrap();
    let mut killed = 0;
    for (id, host, command) in rows {
        let ours = host
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_some_and(|p| ports.contains(&p));
        if ours && command.starts_with("Binlog Dump") {
            admin.query_drop(format!("KILL {id}")).await.unwrap();
            killed += 1;
        }
    }
    assert_eq!(killed, 1, "the pipeline's dump was found and cut");
    admin
        .query_drop(format!(
            "INSERT INTO {t} VALUES (14, 14); UPDATE {t} SET v = 0 WHERE id = 1"
        ))
        .await
        .unwrap();
    purge_all_but_current(&mut admin, flavor).await;
    let st = world
        .wait_status("gap", Duration::from_secs(120), "re-snapshot", |s| {
            s["state"] == "failed"
                || (s["state"] == "streaming"
                    && table_status(s, &name)["status"] == "complete"
                    && table_status(s, &name)["rows_done"] == 14)
        })
        .await;
    assert_ne!(st["state"], "failed", "no halt: {st}");
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
    let logged = world
        .blocking(|c| {
            [1, 2, 3].iter().any(|&id| {
                c.log(id)
                    .contains("re-snapshot: the checkpoint is no longer on the server")
            })
        })
        .await;
    assert!(logged, "the owner decided to re-snapshot");
    // because the running stream met the gap, and the runner went on instead of halting
    let retried = world
        .blocking(|c| {
            [1, 2, 3]
                .iter()
                .any(|&id| c.log(id).contains("snapshot_resnapshot_due"))
        })
        .await;
    assert!(
        retried,
        "the stream's data_gap led to a re-snapshot, not a halt"
    );
    assert_eq!(
        world.markers("sg", &schema, "t").await.len(),
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
