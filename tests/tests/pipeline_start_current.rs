//! `"start_position": "current"` is resolved once. A pipeline that starts from "now" commits
//! that position to Raft before its first dump, so every later start (a pause and resume, a
//! kill -9 of the owner, a config update) resumes from it: rows written while no runner ran,
//! before the pipeline ever processed a transaction, are delivered, not skipped.
//!
//! Each scenario: a 3-worker cluster, a table, a `current` pipeline streaming on an idle
//! source; then the interruption, rows 0–99 written while no runner streams, the pipeline
//! back, rows 100–199. The table topic must then hold exactly rows 0–199, each with its
//! value. Before the fix every scenario lost rows 0–99 (the restarted runner read "now"
//! again). Kafka is the dev services' real broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capstan_kafka::topic_reader::{Isolation, TopicReader};
use capstan_tests::cluster::{free_port, Cluster};
use capstan_tests::{kafka, mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Interruption {
    /// `PUT pause`, rows written while paused, `PUT resume`.
    PauseResume,
    /// kill -9 of the owner, rows written before another worker takes over.
    KillOwner,
    /// a config update to a source that cannot be reached (the runner cannot start), rows
    /// written, then the config fixed again.
    ConfigUpdate,
}

#[test]
fn mysql_current_start_survives_a_pause_before_the_first_checkpoint() {
    let Some(db) = mysql() else { return };
    scenario(db, "mysql", Interruption::PauseResume);
}

#[test]
fn mysql_current_start_survives_an_owner_kill_before_the_first_checkpoint() {
    let Some(db) = mysql() else { return };
    scenario(db, "mysql", Interruption::KillOwner);
}

#[test]
fn mysql_current_start_survives_a_config_update_before_the_first_checkpoint() {
    let Some(db) = mysql() else { return };
    scenario(db, "mysql", Interruption::ConfigUpdate);
}

#[test]
fn mariadb_current_start_survives_a_pause_before_the_first_checkpoint() {
    let Some(db) = mariadb() else { return };
    scenario(db, "mariadb", Interruption::PauseResume);
}

#[test]
fn mariadb_current_start_survives_an_owner_kill_before_the_first_checkpoint() {
    let Some(db) = mariadb() else { return };
    scenario(db, "mariadb", Interruption::KillOwner);
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn insert(rt: &tokio::runtime::Runtime, db: &DbEnv, schema: &str, ids: std::ops::Range<u32>) {
    rt.block_on(async {
        let mut conn = db.admin_conn().await;
        for id in ids {
            conn.query_drop(format!(
                "INSERT INTO `{schema}`.t VALUES ({id}, {})",
                id * 7
            ))
            .await
            .unwrap();
        }
    });
}

fn wait_state(c: &Cluster, via: u64, name: &str, want: &str) -> (u64, u64) {
    c.wait_until(SETTLE, |c| {
        c.pipeline_owner(via, name)
            .filter(|(_, _, s)| s == want)
            .map(|(o, e, _)| (o, e))
    })
    .unwrap_or_else(|| panic!("never {want}: {:?}", c.pipeline_status(via, name)))
}

fn scenario(db: DbEnv, flavor: &'static str, how: Interruption) {
    let Some(kafka) = kafka() else { return };
    let bootstrap = kafka.bootstrap_servers().to_string();
    let rt = rt();
    let schema = unique_name("cur");
    rt.block_on(async {
        db.admin_conn()
            .await
            .query_drop(format!(
                "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, v INT)"
            ))
            .await
            .unwrap();
    });
    let Some(mut cluster) = Cluster::start(3) else {
        return;
    };
    let leader = cluster.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let prefix = unique_name("cur");
    let server_id = 7000 + (std::process::id() % 500) + how as u32 * 10;
    let definition = json!({
        "name": "probe",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": server_id, "flavor": flavor
        },
        "tables": {"include": [format!("{schema}.t")]},
        "kafka": {"bootstrap_servers": bootstrap, "topic_prefix": prefix},
        "start_position": "current"
    });
    let (s, b) = cluster
        .send(leader, Method::POST, "/pipelines", Some(&definition))
        .unwrap();
    assert_eq!(s, 201, "{b}");
    let (s, _) = cluster
        .send(leader, Method::PUT, "/pipelines/probe/resume", None)
        .unwrap();
    assert_eq!(s, 202);
    let (owner, epoch) = wait_state(&cluster, leader, "probe", "streaming");

    match how {
        Interruption::PauseResume => {
            let (s, _) = cluster
                .send(leader, Method::PUT, "/pipelines/probe/pause", None)
                .unwrap();
            assert_eq!(s, 202);
            wait_state(&cluster, leader, "probe", "paused");
            insert(&rt, &db, &schema, 0..100);
            let (s, _) = cluster
                .send(leader, Method::PUT, "/pipelines/probe/resume", None)
                .unwrap();
            assert_eq!(s, 202);
        }
        Interruption::KillOwner => {
            cluster.kill9(owner);
            // the scenario happened: the owner is gone, and the rows are written before the
            // survivors' leader can reassign the pipeline (its lease must run out first)
            assert!(!cluster.workers.get_mut(&owner).unwrap().is_running());
            insert(&rt, &db, &schema, 0..100);
        }
        Interruption::ConfigUpdate => {
            // a config update whose source cannot be reached: the new incarnation cannot
            // start, so the rows below are written while nothing streams
            let closed = free_port();
            let mut broken = definition.clone();
            broken["source"]["port"] = json!(closed);
            let (s, b) = cluster
                .send(
                    leader,
                    Method::PUT,
                    "/pipelines/probe/config",
                    Some(&broken),
                )
                .unwrap();
            assert_eq!(s, 200, "{b}");
            cluster
                .wait_until(SETTLE, |c| {
                    let st = c.pipeline_status(leader, "probe")?;
                    (st["state"] == "failed" || st["state"] == "retrying").then_some(())
                })
                .unwrap_or_else(|| {
                    panic!(
                        "kept streaming: {:?}",
                        cluster.pipeline_status(leader, "probe")
                    )
                });
            insert(&rt, &db, &schema, 0..100);
            let (s, b) = cluster
                .send(
                    leader,
                    Method::PUT,
                    "/pipelines/probe/config",
                    Some(&definition),
                )
                .unwrap();
            assert_eq!(s, 200, "{b}");
        }
    }
    let live: Vec<u64> = [1, 2, 3]
        .into_iter()
        .filter(|id| how != Interruption::KillOwner || *id != owner)
        .collect();
    let via = live[0];
    // streaming again: a pause and a config update keep the owner and epoch (the paused or
    // failed state in between was observed above), a move grows the epoch
    let moved = how == Interruption::KillOwner;
    let (new_owner, _) = cluster
        .wait_until(SETTLE, |c| {
            c.pipeline_owner(via, "probe")
                .filter(|(_, e, s)| s == "streaming" && (!moved || *e > epoch))
                .map(|(o, e, _)| (o, e))
        })
        .unwrap_or_else(|| {
            panic!(
                "never streaming again: {:?}",
                cluster.pipeline_status(via, "probe")
            )
        });
    if moved {
        assert_ne!(new_owner, owner, "another worker took over");
    }
    insert(&rt, &db, &schema, 100..200);

    let topic = format!("{prefix}.{schema}.t");
    let reader = TopicReader::new(&bootstrap, Isolation::ReadUncommitted, SETTLE);
    let deadline = Instant::now() + SETTLE;
    let mut rows: BTreeMap<i64, i64> = BTreeMap::new();
    while Instant::now() < deadline {
        let records = rt.block_on(reader.read_all(&topic)).unwrap();
        rows = records
            .iter()
            .filter_map(|r| r.value.as_ref())
            .map(|v| serde_json::from_slice::<Value>(v).unwrap())
            .map(|v| {
                (
                    v["after"]["id"].as_i64().unwrap(),
                    v["after"]["v"].as_i64().unwrap(),
                )
            })
            .collect();
        if rows.len() >= 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let want: BTreeMap<i64, i64> = (0..200).map(|id| (id, id * 7)).collect();
    let missing: Vec<i64> = want
        .keys()
        .filter(|k| !rows.contains_key(k))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "{how:?} on {flavor}: {} of 200 rows missing (first {:?}); log of {via}:\n{}",
        missing.len(),
        &missing[..missing.len().min(5)],
        cluster.log_tail(via)
    );
    assert_eq!(rows, want, "{how:?} on {flavor}");
    assert!(cluster.logged("start position resolved and committed") >= 1);
}
