//! Exactly-once across an owner kill while a MariaDB XA prepare is pending (ADR-0008): the
//! checkpoint stays before the prepare while later transactions are published, and the
//! processed position committed beside it (Raft and the Kafka offsets record) lets the next
//! owner skip them. Three workers, the dev services' real Kafka broker, `xa: track`,
//! `delivery: exactly_once`.
//!
//! The test reads `read_uncommitted` (aborted records visible), so it kills the owner only
//! once the rows before the kill are published *and* their checkpoint pair is committed to
//! Raft: no transaction is in flight then, and any second copy on the
//! topic is a re-publish by the new owner, not an aborted leftover.
//!
//! Writes an XA PREPARE, which halts every `xa: refuse` source that sees it: the write side of
//! SERVER_WIDE, and every test thread under nextest (`.config/nextest.toml`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;
mod source_common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capstan_core::position::MariadbGtidPosition;
use capstan_tests::{mariadb, unique_name};
use mysql_async::prelude::*;
use serde_json::{json, Value};
use snapshot_common::*;
use source_common::{mariadb_binlog_pos, rollback_xa_leftovers, SERVER_WIDE};

/// The XID prefix of `source_mariadb_xa.rs`: a run rolls back what an earlier failed run left.
const XID_PREFIX: &str = "capstan_xa_test";

/// How many records of the topic carry each `id` (the row image's key).
fn copies(records: &[capstan_kafka::topic_reader::ConsumedRecord]) -> BTreeMap<i64, usize> {
    let mut out = BTreeMap::new();
    for r in records {
        let Some(value) = &r.value else { continue };
        let v: Value = serde_json::from_slice(value).unwrap();
        if let Some(id) = v["after"]["id"].as_i64() {
            *out.entry(id).or_default() += 1;
        }
    }
    out
}

/// The committed offsets via a running worker.
async fn offsets(world: &World, name: &str) -> Value {
    let path = format!("/pipelines/{name}/offsets");
    world
        .blocking(move |c| {
            let via = running(c);
            c.get(via, &path).map(|(_, v)| v).unwrap_or(Value::Null)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_once_owner_kill_with_a_pending_prepare_publishes_nothing_twice() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let mut admin = db.admin_conn().await;
    rollback_xa_leftovers(&mut admin, XID_PREFIX).await;
    let schema = create_schema(&mut admin, "pxa").await;
    admin
        .query_drop(format!(
            "CREATE TABLE {} (id INT PRIMARY KEY)",
            qt(&schema, "t")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), "mariadb").await else {
        return;
    };
    let topic = topic("pxa", &schema, "t");
    world.one_partition(std::slice::from_ref(&topic));
    let mut def = world.definition(
        "xa",
        &[format!("{schema}.t")],
        json!({"mode": "never"}),
        "exactly_once",
        "pxa",
    );
    def["xa"] = json!("track");
    world.create_and_resume(def).await;
    world
        .wait_status("xa", SETTLE, "streaming", |v| v["state"] == "streaming")
        .await;

    // a prepare stays pending; three ordinary transactions after it are published
    let mut xa = db.admin_conn().await;
    let xid = unique_name(XID_PREFIX);
    xa.query_drop(format!(
        "XA START '{xid}'; INSERT INTO {} VALUES (1), (2); XA END '{xid}'; XA PREPARE '{xid}'",
        qt(&schema, "t")
    ))
    .await
    .unwrap();
    for id in [10, 11, 12] {
        admin
            .query_drop(format!("INSERT INTO {} VALUES ({id})", qt(&schema, "t")))
            .await
            .unwrap();
    }
    let after = mariadb_binlog_pos(&mut admin).await;
    let records = world
        .read_until(&topic, SETTLE, |r| copies(r).len() >= 3)
        .await;
    assert_eq!(
        copies(&records),
        BTreeMap::from([(10, 1), (11, 1), (12, 1)])
    );
    // the pair in Raft: the checkpoint before the prepare, processed past the three
    let deadline = Instant::now() + SETTLE;
    let committed = loop {
        let o = offsets(&world, "xa").await;
        let processed = o["processed"].as_str().and_then(|p| p.parse().ok());
        if let Some(processed) = processed.filter(|p: &MariadbGtidPosition| after.is_subset(p)) {
            break (o, processed);
        }
        assert!(
            Instant::now() < deadline,
            "no processed position covering {after}: {o}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let checkpoint: MariadbGtidPosition =
        committed.0["position"].as_str().unwrap().parse().unwrap();
    assert!(!after.is_subset(&checkpoint), "{}", committed.0);

    // kill the owner; another one takes over from the committed pair
    let (victim, epoch) = world
        .blocking(|c| {
            let via = running(c);
            let (victim, epoch, _) = c.pipeline_owner(via, "xa").expect("owned");
            c.kill9(victim);
            (victim, epoch)
        })
        .await;
    world
        .wait_status("xa", SETTLE, "a new owner streaming", |v| {
            v["owner"].as_u64() != Some(victim)
                && v["epoch"].as_u64() > Some(epoch)
                && v["state"] == "streaming"
        })
        .await;

    // the prepare commits: its rows once, then a last plain insert
    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    admin
        .query_drop(format!("INSERT INTO {} VALUES (13)", qt(&schema, "t")))
        .await
        .unwrap();
    world
        .read_until(&topic, SETTLE, |r| copies(r).contains_key(&13))
        .await;
    // a re-publish would come before 13; give anything late a moment anyway
    tokio::time::sleep(Duration::from_secs(2)).await;
    let records = world.read(&topic).await;
    assert_eq!(
        copies(&records),
        BTreeMap::from([(1, 1), (2, 1), (10, 1), (11, 1), (12, 1), (13, 1)]),
        "every row once"
    );
    let resumed = world
        .blocking(|c| c.logged("exactly-once resume point decided"))
        .await;
    assert!(resumed >= 2, "{resumed} exactly-once openings logged");
    world.blocking(move |c| c.spawn(victim)).await;
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
