//! Failover under load: four writers commit continuously on MySQL while the pipeline's owner is
//! killed with SIGKILL again and again (3 times at-least-once, 10 times exactly-once).
//! Afterwards an independent consumer (`load_common::read_topic`, plain rdkafka) compares the
//! topic with what the writers committed: no change missing, per-key order kept; at-least-once
//! every duplicate is an exact replay recognisable by its headers (pipeline, position, record
//! index); exactly-once a `read_committed` consumer sees no duplicate at all. Then
//! `capstan verify` compares the topic with the table: no row missing, extra or different,
//! each duplicate identified by key digest and offset (exactly-once: none).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::verify_run::verify_pipeline;
use capstan_tests::{mysql, unique_name};
use load_common::*;
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(30);
const WRITERS: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_owner_three_times_under_load_loses_nothing() {
    failover_under_load("at_least_once", 3).await;
}

/// With Kafka transactions, on the real broker: after 10 kills of the owner under 4 writers a
/// `read_committed` consumer sees every change exactly once. The same topic read
/// `read_uncommitted` shows what the kills left behind (aborted copies), printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_once_mode_survives_ten_owner_kills_with_nothing_lost_or_duplicated() {
    failover_under_load("exactly_once", 10).await;
}

async fn failover_under_load(delivery: &'static str, kills: u32) {
    let Some(db) = mysql() else { return };
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let schema = unique_name("failover");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT)"
        ))
        .await
        .unwrap();

    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap();
    let Some(cluster) = cluster else { return };
    let cluster = Arc::new(std::sync::Mutex::new(cluster));
    let blocking = |f: Box<dyn FnOnce(&mut Cluster) + Send>| {
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || f(&mut c.lock().unwrap()))
    };

    let definition = json!({
        "name": "load",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": if delivery == "exactly_once" { 6500 } else { 6000 } + (std::process::id() % 500),
            "flavor": "mysql"
        },
        "tables": {"include": [format!("{schema}.t")]},
        "kafka": {
            "bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "fo",
            "delivery": delivery
        },
        "start_position": "current"
    });
    blocking(Box::new(move |c| {
        let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
        let (s, b) = c
            .send(leader, Method::POST, "/pipelines", Some(&definition))
            .unwrap();
        assert_eq!(s, 201, "{b}");
        c.send(leader, Method::PUT, "/pipelines/load/resume", None)
            .unwrap();
        c.wait_until(SETTLE, |c| {
            c.pipeline_owner(leader, "load")
                .filter(|(_, _, s)| s == "streaming")
        })
        .expect("streaming");
    }))
    .await
    .unwrap();

    // four writers: each transaction inserts a new key and bumps the previous one
    let writers = Writers::start(&db, &schema, WRITERS);
    // read the topic throughout, so each kill waits until its victim has published
    let topic = format!("fo.{schema}.t");
    let bootstrap = kafka.bootstrap_servers().to_string();
    let isolation = if delivery == "exactly_once" {
        "read_committed"
    } else {
        "read_uncommitted"
    };
    let tap = {
        let (b, t) = (bootstrap.clone(), topic.clone());
        Arc::new(
            tokio::task::spawn_blocking(move || {
                load_common::topic_tap::TopicTap::start_isolated(&b, &t, isolation)
            })
            .await
            .unwrap(),
        )
    };

    // kill the owner again and again; each time the pipeline must move to another worker with
    // a higher epoch and stream again; the killed worker is restarted to keep a quorum
    for round in 0..kills {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let tap = tap.clone();
        blocking(Box::new(move |c| {
            let via = [1, 2, 3]
                .into_iter()
                .find(|&n| c.workers.get_mut(&n).unwrap().is_running())
                .unwrap();
            let (victim, epoch, _) = c.pipeline_owner(via, "load").expect("owned");
            // every owner publishes before it dies (the final check counts one epoch per owner)
            assert!(
                tap.wait_for_epoch(epoch, SETTLE),
                "round {round}: no record of epoch {epoch} reached the topic"
            );
            c.kill9(victim);
            assert!(!c.workers.get_mut(&victim).unwrap().is_running(), "owner really died");
            let via = [1, 2, 3].into_iter().find(|&n| n != victim).unwrap();
            let killed = Instant::now();
            let (new_owner, new_epoch, _) = c
                .wait_until(SETTLE, |c| {
                    c.pipeline_owner(via, "load").filter(|(o, e, s)| *o != victim && *e > epoch && s == "streaming")
                })
                .unwrap_or_else(|| panic!("round {round}: pipeline did not move"));
            eprintln!(
                "round {round}: killed owner {victim} (epoch {epoch}); {new_owner} streams at epoch \
                 {new_epoch} after {:?}",
                killed.elapsed()
            );
            c.spawn(victim);
        }))
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (total_tx, expected) = writers.stop().await;
    assert!(
        total_tx > 50,
        "the writers really wrote ({total_tx} transactions)"
    );
    let want = events(&expected);

    if let Ok(tap) = Arc::try_unwrap(tap) {
        tokio::task::spawn_blocking(move || tap.finish(0, Duration::ZERO))
            .await
            .unwrap();
    }
    let seen = read_topic_async(&bootstrap, &topic, isolation, want).await;
    // no change missing, nothing extra, per-key order exactly the source's
    assert_histories(&seen.histories, &expected);
    eprintln!(
        "{delivery}: {total_tx} source transactions, {want} change events, {} replays read \
         {isolation} after {kills} kills; records per epoch {:?}",
        seen.replays, seen.epochs
    );
    verify_with_the_cli(&cluster, &db.password, &schema, delivery, seen.replays).await;
    // the first owner and one per kill, each of which published
    assert!(seen.epochs.len() > kills as usize, "{:?}", seen.epochs);
    if delivery == "exactly_once" {
        assert_eq!(seen.replays, 0, "a read_committed consumer saw replays");
        let raw = read_topic_async(&bootstrap, &topic, "read_uncommitted", want).await;
        assert_histories(&raw.histories, &expected);
        eprintln!(
            "exactly_once: read_uncommitted the same topic shows {} replayed records (aborted \
             transactions of killed owners)",
            raw.replays
        );
        let c = cluster.lock().unwrap();
        let resumed = c.logged("exactly-once resume point decided");
        // the first owner and one new owner per kill each fenced and read the offsets first
        assert!(
            resumed > kills as usize,
            "{resumed} exactly-once openings logged"
        );
    }
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

/// `capstan verify`, as a user would run it after the kills: the topic replays to the table
/// (no row missing, extra or different); every duplicate is listed by key digest, partition
/// and offset, as many as the independent consumer counted `replays` (exactly-once: none).
async fn verify_with_the_cli(
    cluster: &std::sync::Mutex<Cluster>,
    password: &str,
    schema: &str,
    delivery: &str,
    replays: usize,
) {
    let url = {
        let mut c = cluster.lock().unwrap();
        let via = [1, 2, 3]
            .into_iter()
            .find(|&n| c.workers.get_mut(&n).unwrap().is_running())
            .unwrap();
        c.workers[&via].api()
    };
    let password = password.to_string();
    let run = tokio::task::spawn_blocking(move || {
        verify_pipeline(
            &url,
            "load",
            &password,
            &["--format", "json", "--examples", "100000"],
        )
    })
    .await
    .unwrap();
    let t = run.table(&format!("{schema}.t"));
    // the counts, for messages (the examples list every duplicate)
    let mut counts = t.clone();
    counts["duplicates"]["examples"] = serde_json::Value::Null;
    for category in ["missing", "extra", "differing", "unreadable"] {
        assert_eq!(t[category]["count"], 0, "{category}: {counts}");
    }
    assert_eq!(run.code, Some(0), "{counts}\n{}", run.stderr);
    assert!(t["source_rows"].as_u64() > Some(50), "{counts}");
    assert_eq!(t["source_rows"], t["topic_keys"], "{counts}");
    let duplicates = t["duplicates"]["count"].as_u64().unwrap();
    let listed = t["duplicates"]["examples"].as_array().unwrap();
    assert_eq!(listed.len() as u64, duplicates, "each duplicate identified");
    assert!(
        listed.iter().all(|d| d["key"].is_string()
            && d["partition"].is_i64()
            && d["offset"].is_i64()
            && d["kind"].is_string()),
        "{counts}"
    );
    let mut kinds = std::collections::BTreeMap::<String, u64>::new();
    for d in listed {
        *kinds
            .entry(d["kind"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    eprintln!(
        "{delivery}: capstan verify: {} source rows, {} topic records; 0 missing, 0 extra, \
         0 differing; {duplicates} duplicates by kind {kinds:?}",
        t["source_rows"], t["records"]["records"]
    );
    // the same replays the independent consumer recognised by their headers
    assert_eq!(duplicates, replays as u64, "{counts}");
    if delivery == "exactly_once" {
        assert_eq!(duplicates, 0, "{counts}");
    }
}
