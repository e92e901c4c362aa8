//! Tables added to and removed from a running pipeline's capture list (issue 18, item 2) on
//! three real worker processes against the MySQL 9.x and MariaDB 10.11 dev servers and the
//! real Kafka broker. A table added after the initial snapshot completed is snapshotted
//! alone under 8 writers (no `snapshot_config_drifted` halt): its topic replayed by key
//! equals the table, every row read once, changes suppressed and streamed around its chunks;
//! the table snapshotted before is not read again. A table removed stops being captured.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};
use snapshot_common::*;

/// Rows of the table added later.
const ADDED_ROWS: u64 = 6000;
/// Rows of the table captured from the start.
const FIRST_ROWS: u64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_table_added_to_a_running_pipeline_is_snapshotted_alone() {
    add_and_remove("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_table_added_to_a_running_pipeline_is_snapshotted_alone() {
    add_and_remove("mariadb").await;
}

async fn put_config(world: &World, name: &str, def: Value) {
    let path = format!("/pipelines/{name}/config");
    let (s, b) = world
        .blocking(move |c| {
            let via = running(c);
            c.send(via, Method::PUT, &path, Some(&def)).unwrap()
        })
        .await;
    assert_eq!(s, 200, "{b}");
}

async fn add_and_remove(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let started = Instant::now();
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapadd").await;
    seed_big(&mut admin, &schema, "added", ADDED_ROWS).await;
    admin
        .query_drop(format!(
            "CREATE TABLE {first} LIKE {added}; \
             INSERT INTO {first} SELECT * FROM {added} WHERE id <= {}",
            2 * FIRST_ROWS,
            first = qt(&schema, "first"),
            added = qt(&schema, "added"),
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let (first_topic, added_topic) = (topic("sa", &schema, "first"), topic("sa", &schema, "added"));
    world.one_partition(&[first_topic.clone(), added_topic.clone()]);
    let first_name = format!("{schema}.first");
    let added_name = format!("{schema}.added");
    let def = world.definition(
        "grow",
        std::slice::from_ref(&first_name),
        json!({"mode": "initial", "chunk_size": 500}),
        "at_least_once",
        "sa",
    );
    world.create_and_resume(def.clone()).await;
    world
        .wait_status("grow", SETTLE, "first complete, streaming", |s| {
            table_status(s, &first_name)["status"] == "complete" && s["state"] == "streaming"
        })
        .await;

    // writers on the table to add, before and while it is added
    let tail = Tail::start(world.kafka.bootstrap_servers(), &added_topic);
    let stats = Arc::new(WriterStats::default());
    let writers = start_writers(&db, &schema, "added", 8, ADDED_ROWS, stats.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut grown = def.clone();
    grown["tables"]["include"] = json!([first_name, added_name]);
    put_config(&world, "grow", grown.clone()).await;
    let done = world
        .wait_status("grow", Duration::from_secs(300), "added complete", |s| {
            s["state"] == "failed" || table_status(s, &added_name)["status"] == "complete"
        })
        .await;
    assert_ne!(done["state"], "failed", "no halt: {done}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    stats.stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let statements = stats.statements.load(Ordering::Relaxed);
    assert_eq!(done["snapshot"].as_array().map(Vec::len), Some(2), "{done}");
    assert_eq!(
        table_status(&done, &first_name)["rows_done"],
        FIRST_ROWS,
        "the first table keeps its progress: {done}"
    );

    // the added table: the topic replayed equals the table, every row read once
    let recs = tail
        .through_sentinel(&mut admin, &schema, "added", Duration::from_secs(300))
        .await;
    let source = source_rows(&mut admin, &schema, "added", &["id"]).await;
    let replayed = replay(&recs, &["id"]);
    assert!(
        replayed
            .state
            .contains_key(&format!("{{\"id\":{SENTINEL_ID}}}")),
        "sentinel never arrived"
    );
    assert_same(&replayed.state, &source, flavor);
    let dups: Vec<_> = replayed.reads.iter().filter(|(_, n)| **n != 1).collect();
    assert!(dups.is_empty(), "keys read more than once: {dups:?}");
    let reads = replayed.read_recs.len() as u64;
    // the exact guarantees are above (the replay equals the table, no key read twice); the
    // count only shows the chunks really read the table. Eight writers insert and delete at one
    // rate over the keys 1..=2*ADDED_ROWS+2, on both sides of the cursor: on a 6,000-row table
    // that churn moves the count as the chunks meet it by more than a tenth when the snapshot
    // is slow (a loaded machine; pipelines run at a lower priority than the writers), so it is
    // bounded by the key space above and by half the seed below
    assert!(
        (ADDED_ROWS / 2..=2 * ADDED_ROWS + 2).contains(&reads),
        "{reads} rows read of {ADDED_ROWS}"
    );
    assert_eq!(table_status(&done, &added_name)["rows_done"], reads);
    // the changes written before the table was added are not on the topic as changes
    // (nothing of the table was captured then), the snapshot is: the first record is a read
    assert_eq!(recs[0].op(), Some("r"), "the first record: {:?}", recs[0]);
    // changes streamed between its chunks, gated by the cursor
    let (first_read, last_read) = (&replayed.read_recs[0], replayed.read_recs.last().unwrap());
    let streamed_during = replayed
        .changes
        .iter()
        .filter(|c| c.index > first_read.index && c.index < last_read.index)
        .count();
    assert!(
        streamed_during > 0,
        "no change streamed during the snapshot"
    );
    let owner = done["owner"].as_u64().unwrap();
    let suppressed = world
        .metric(owner, "grow", "snapshot_suppressed")
        .await
        .expect("suppressed gauge");
    assert!(suppressed > 0.0, "no streamed change was suppressed");
    let markers = world.markers("sa", &schema, "added").await;
    assert_eq!(markers.len(), 1);
    assert_eq!(
        markers[0].value,
        Some(json!({"snapshot_complete": {"db": schema, "table": "added", "rows": reads}}))
    );
    // the first table was not snapshotted again
    let first = parse(&world.read(&first_topic).await);
    let first_replay = replay(&first, &["id"]);
    assert_eq!(first_replay.read_recs.len() as u64, FIRST_ROWS);
    assert_eq!(world.markers("sa", &schema, "first").await.len(), 1);

    // removed: no longer captured, its progress forgotten, the other table streams on
    let mut shrunk = def.clone();
    shrunk["tables"]["include"] = json!([added_name]);
    put_config(&world, "grow", shrunk).await;
    let st = world
        .wait_status("grow", SETTLE, "first forgotten", |s| {
            s["state"] == "failed" || s["snapshot"].as_array().map(Vec::len) == Some(1)
        })
        .await;
    assert_ne!(st["state"], "failed", "{st}");
    assert_eq!(table_status(&st, &added_name)["status"], "complete", "{st}");
    world
        .wait_status("grow", SETTLE, "streaming", |s| s["state"] == "streaming")
        .await;
    admin
        .query_drop(format!(
            "INSERT INTO {} VALUES (1, 1, 'after removal')",
            qt(&schema, "first")
        ))
        .await
        .unwrap();
    admin
        .query_drop(format!(
            "DELETE FROM {} WHERE id = {SENTINEL_ID}",
            qt(&schema, "added")
        ))
        .await
        .unwrap();
    let recs = tail
        .through_sentinel(&mut admin, &schema, "added", Duration::from_secs(60))
        .await;
    assert_eq!(
        recs.last().and_then(|r| r.key.clone()),
        Some(json!({ "id": SENTINEL_ID }))
    );
    let first_after = world.read(&first_topic).await;
    assert_eq!(
        first_after.len(),
        first.len(),
        "nothing of the removed table after its removal"
    );
    eprintln!(
        "{flavor}: added a {ADDED_ROWS}-row table under 8 writers ({statements} statements, \
         {} errors): {reads} rows read, {suppressed} suppressed, {} change records, \
         {streamed_during} streamed between its chunks; total {:?}",
        stats.errors.load(Ordering::Relaxed),
        replayed.changes.len(),
        started.elapsed()
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
