//! A cut-off owner is fenced: the owner process is frozen with SIGSTOP (it can neither send nor
//! receive, like a network cut), the pipeline moves to another worker with a higher epoch, and
//! when the old owner is resumed with SIGCONT it publishes nothing more under its old epoch and
//! commits nothing: its lease ran out while it was cut off, so it stops on its own.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan_kafka::topic_reader::{ConsumedRecord, Isolation, TopicReader};
use capstan_tests::cluster::Cluster;
use capstan_tests::{mysql, unique_name};
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(30);

fn with_epoch(records: &[ConsumedRecord], epoch: u64) -> usize {
    let e = epoch.to_string();
    records
        .iter()
        .filter(|r| r.header_str("capstan.epoch") == Some(e.as_str()))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_owner_resumed_after_its_epoch_ended_neither_publishes_nor_commits() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let schema = unique_name("fence");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    let Some(cluster) = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap()
    else {
        return;
    };
    let cluster = Arc::new(Mutex::new(cluster));
    type ClusterJob = Box<dyn FnOnce(&mut Cluster) -> Option<(u64, u64)> + Send>;
    let on_cluster = |f: ClusterJob| {
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || f(&mut c.lock().unwrap()))
    };

    let definition = json!({
        "name": "fenced",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": 7000 + (std::process::id() % 1000),
            "flavor": "mysql"
        },
        "tables": {"include": [format!("{schema}.t")]},
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "fence"},
        "start_position": "current"
    });
    let (old_owner, old_epoch) = on_cluster(Box::new(move |c| {
        let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
        let (s, b) = c
            .send(leader, Method::POST, "/pipelines", Some(&definition))
            .unwrap();
        assert_eq!(s, 201, "{b}");
        c.send(leader, Method::PUT, "/pipelines/fenced/resume", None)
            .unwrap();
        c.wait_until(SETTLE, |c| {
            c.pipeline_owner(leader, "fenced")
                .filter(|(_, _, s)| s == "streaming")
        })
        .map(|(o, e, _)| (o, e))
    }))
    .await
    .unwrap()
    .expect("streaming");

    // a writer commits continuously throughout
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let db = db.clone();
        let stop = stop.clone();
        let schema = schema.clone();
        tokio::spawn(async move {
            let mut conn = db.admin_conn().await;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                conn.query_drop(format!("INSERT INTO `{schema}`.t VALUES ({i})"))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            i
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;

    // cut the owner off: the pipeline moves
    let (new_owner, new_epoch) = on_cluster(Box::new(move |c| {
        c.signal(old_owner, "STOP");
        let via = [1, 2, 3].into_iter().find(|&n| n != old_owner).unwrap();
        c.wait_until(SETTLE, |c| {
            c.pipeline_owner(via, "fenced")
                .filter(|(o, e, s)| *o != old_owner && *e > old_epoch && s == "streaming")
        })
        .map(|(o, e, _)| (o, e))
    }))
    .await
    .unwrap()
    .expect("the pipeline moves away from the frozen owner");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let topic = format!("fence.{schema}.t");
    let reader = TopicReader::new(
        kafka.bootstrap_servers(),
        Isolation::ReadUncommitted,
        SETTLE,
    );
    let before_resume = reader.read_all(&topic).await.unwrap();
    let old_before = with_epoch(&before_resume, old_epoch);
    assert!(
        old_before > 0,
        "the old owner published before it was cut off"
    );
    assert!(
        with_epoch(&before_resume, new_epoch) > 0,
        "the new owner publishes while the old one is frozen"
    );

    // resume the old owner: its lease ran out while it was cut off
    on_cluster(Box::new(move |c| {
        c.signal(old_owner, "CONT");
        None
    }))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.unwrap();

    let after = reader.read_all(&topic).await.unwrap();
    let old_after = with_epoch(&after, old_epoch);
    // a frozen process may wake in the middle of a send it started before the cut: at most
    // that one batch can still leave (at-least-once; exactly-once fences it in Kafka)
    assert!(
        old_after - old_before <= 1,
        "the old owner published {} records after its epoch ended",
        old_after - old_before
    );
    let log = cluster.lock().unwrap().log(old_owner);
    let ended = log
        .lines()
        .find(|l| l.contains("runner ended"))
        .unwrap_or_else(|| panic!("the old owner never stopped its runner; log:\n{log}"));
    // stopped on its own: its lease ran out while it was cut off (or the epoch it tried to
    // write with was stale, or its supervisor saw the move first)
    assert!(
        ended.contains("lease_expired")
            || ended.contains("stale_epoch")
            || ended.contains("Stopped"),
        "{ended}"
    );
    // the pipeline still owns nothing on the old worker, and the checkpoint is the new owner's
    let status = on_cluster(Box::new(move |c| {
        let via = [1, 2, 3].into_iter().find(|&n| n != old_owner).unwrap();
        c.pipeline_owner(via, "fenced").map(|(o, e, _)| (o, e))
    }))
    .await
    .unwrap();
    assert_eq!(status, Some((new_owner, new_epoch)));

    // and nothing was lost across the move
    let mut ids: Vec<u64> = Vec::new();
    for _ in 0..60 {
        let records = reader.read_all(&topic).await.unwrap();
        ids = records
            .iter()
            .filter_map(|r| r.value.as_ref())
            .map(|v| serde_json::from_slice::<serde_json::Value>(v).unwrap())
            .filter_map(|v| v["after"]["id"].as_u64())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() as u64 >= written {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(ids, (1..=written).collect::<Vec<_>>());
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
