//! An operator's ad-hoc (incremental) snapshot of one table of three (issue 18, item 1), on
//! three real worker processes against the MySQL 9.x and MariaDB 10.11 dev servers and the
//! real Kafka broker, under 8 writers, with the owner killed by SIGKILL mid-snapshot
//! (`POST /pipelines/{name}/snapshots`, ADR-0005 §11).
//!
//! The pipeline captures `a`, `b` and `t`; its initial snapshot covers `a` and `b` only, so
//! `t`'s topic starts with streamed changes alone and only the ad-hoc snapshot can bring the
//! seeded rows: the topic replayed by key equals the table only if that snapshot is complete
//! and gap-free under the writers and the kill. Every read says `incremental`; each chunk is
//! read once per owner (a duplicate only as the in-flight chunk re-read by the next epoch);
//! the new owner resumes at the committed cursor; `a` and `b` are not read again. Then a
//! second request is stopped with `DELETE` and the table streams on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};
use snapshot_common::*;

/// Rows of the table snapshotted ad hoc.
const ROWS: u64 = 20_000;
/// Rows of each of the two other tables.
const SMALL_ROWS: u64 = 500;
/// Rows per chunk (the definition's `snapshot.chunk_size`, which the ad-hoc snapshot uses).
const CHUNK: u64 = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_ad_hoc_snapshot_of_one_table_survives_an_owner_kill() {
    ad_hoc("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_ad_hoc_snapshot_of_one_table_survives_an_owner_kill() {
    ad_hoc("mariadb").await;
}

/// Sends `method path` with `body` via a running worker: (status, answer).
async fn call(world: &World, method: Method, path: String, body: Option<Value>) -> (u16, Value) {
    world
        .blocking(move |c| {
            let via = running(c);
            c.send_within(Duration::from_secs(30), via, method, &path, body.as_ref())
                .expect("an answer")
        })
        .await
}

/// The `source.snapshot` values of `reads`.
fn snapshot_kinds(reads: &[Rec]) -> BTreeSet<&str> {
    reads
        .iter()
        .map(|x| {
            x.value.as_ref().unwrap()["source"]["snapshot"]
                .as_str()
                .unwrap()
        })
        .collect()
}

async fn ad_hoc(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let started = Instant::now();
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapinc").await;
    seed_big(&mut admin, &schema, "t", ROWS).await;
    for small in ["a", "b"] {
        admin
            .query_drop(format!(
                "CREATE TABLE {s} LIKE {t}; INSERT INTO {s} SELECT * FROM {t} WHERE id <= {}",
                2 * SMALL_ROWS,
                s = qt(&schema, small),
                t = qt(&schema, "t"),
            ))
            .await
            .unwrap();
    }
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let topics: Vec<String> = ["a", "b", "t"]
        .iter()
        .map(|t| topic("si", &schema, t))
        .collect();
    world.one_partition(&topics);
    let tail = Tail::start(world.kafka.bootstrap_servers(), &topics[2]);
    let [a, b, t] = ["a", "b", "t"].map(|n| format!("{schema}.{n}"));
    let def = world.definition(
        "inc",
        &[a.clone(), b.clone(), t.clone()],
        json!({"mode": "initial", "tables": [a, b], "chunk_size": CHUNK,
               "max_rows_per_second": 2000}),
        "at_least_once",
        "si",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("inc", SETTLE, "a and b complete, streaming", |s| {
            s["state"] == "streaming"
                && table_status(s, &a)["status"] == "complete"
                && table_status(s, &b)["status"] == "complete"
        })
        .await;

    // refusals first: nothing is written for them
    let path = "/pipelines/inc/snapshots".to_string();
    for (body, status, code, field) in [
        (
            json!({"tables": [format!("{schema}.digits")]}),
            400,
            "snapshot_table_not_captured",
            "tables[0]",
        ),
        (
            json!({"tables": [t.clone()], "where": "id > 5"}),
            400,
            "snapshot_filter_not_supported",
            "where",
        ),
        (
            json!({"tables": []}),
            400,
            "invalid_snapshot_request",
            "tables",
        ),
    ] {
        let (s, v) = call(&world, Method::POST, path.clone(), Some(body)).await;
        assert_eq!(
            (s, v["error_code"].as_str(), v["field"].as_str()),
            (status, Some(code), Some(field)),
            "{v}"
        );
    }
    let (s, v) = call(
        &world,
        Method::POST,
        "/pipelines/none/snapshots".into(),
        Some(json!({"tables": [t.clone()]})),
    )
    .await;
    assert_eq!(
        (s, v["error_code"].as_str()),
        (404, Some("unknown_pipeline")),
        "{v}"
    );
    let (s, v) = call(&world, Method::DELETE, path.clone(), None).await;
    assert_eq!(
        (s, v["error_code"].as_str()),
        (409, Some("no_snapshot_running")),
        "{v}"
    );
    let (s, v) = call(&world, Method::GET, path.clone(), None).await;
    assert_eq!((s, &v["tables"]), (200, &json!([])), "{v}");

    // 8 writers on t over its whole key range, before and during the snapshot
    let stats = Arc::new(WriterStats::default());
    let writers = start_writers(&db, &schema, "t", 8, ROWS, stats.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = world.status("inc").await.unwrap();
    let (s, v) = call(
        &world,
        Method::POST,
        path.clone(),
        Some(json!({"tables": [t.clone()]})),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["tables"], json!([t.clone()]));
    assert_eq!(v["epoch"], before["epoch"].as_u64().unwrap() + 1, "{v}");
    // a second request for the table waits for this one
    let (s, v) = call(
        &world,
        Method::POST,
        path.clone(),
        Some(json!({"tables": [b.clone(), t.clone()]})),
    )
    .await;
    assert_eq!(
        (s, v["error_code"].as_str()),
        (409, Some("snapshot_running")),
        "{v}"
    );

    // kill the owner mid-snapshot
    let st = world
        .wait_status("inc", Duration::from_secs(120), "a quarter read", |s| {
            table_status(s, &t)["rows_done"]
                .as_u64()
                .is_some_and(|n| n >= ROWS / 4)
        })
        .await;
    let observed = table_status(&st, &t)["rows_done"].as_u64().unwrap();
    assert!(observed < ROWS * 3 / 4, "the kill lands mid-snapshot: {st}");
    assert_eq!(table_status(&st, &t)["kind"], "incremental", "{st}");
    let (s, shown) = call(&world, Method::GET, path.clone(), None).await;
    assert_eq!(s, 200);
    assert_eq!(shown["tables"].as_array().map(Vec::len), Some(1), "{shown}");
    assert_eq!(shown["tables"][0]["table"], t.as_str());
    assert!(
        shown["tables"][0]["rows_estimated"].as_u64().unwrap() > 0,
        "{shown}"
    );
    let (victim, epoch, owner, new_epoch) = kill_owner(&world, "inc", "snapshotting").await;
    assert_ne!(victim, owner);
    assert!(new_epoch > epoch);
    let done = world
        .wait_status("inc", Duration::from_secs(300), "t complete", |s| {
            table_status(s, &t)["status"] == "complete"
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stats.stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    world
        .wait_status("inc", SETTLE, "streaming", |s| s["state"] == "streaming")
        .await;

    // t's topic replayed equals the table
    let recs = tail
        .through_sentinel(&mut admin, &schema, "t", Duration::from_secs(120))
        .await;
    let r = replay(&recs, &["id"]);
    assert!(
        r.state
            .contains_key(&json!({"id": SENTINEL_ID}).to_string()),
        "sentinel"
    );
    let source = source_rows(&mut admin, &schema, "t", &["id"]).await;
    assert_same(&r.state, &source, flavor);
    // every read is the ad-hoc snapshot's, and changes streamed before it (the table was
    // captured all along) and between its chunks
    assert_eq!(
        snapshot_kinds(&r.read_recs),
        BTreeSet::from(["incremental"])
    );
    let (first_read, last_read) = (&r.read_recs[0], r.read_recs.last().unwrap());
    assert!(
        r.changes.iter().any(|c| c.index < first_read.index),
        "no change before the snapshot"
    );
    let between = r
        .changes
        .iter()
        .filter(|c| c.index > first_read.index && c.index < last_read.index)
        .count();
    assert!(between > 0, "no change streamed between the chunks");
    // read by the killed owner and the next one, which resumed at the cursor
    let epochs: BTreeSet<u64> = r.read_recs.iter().map(|x| x.epoch).collect();
    assert!(
        epochs.contains(&epoch) && epochs.contains(&new_epoch),
        "reads by epochs {epochs:?}"
    );
    let distinct = r.reads.len() as u64;
    let later = r.read_recs.iter().filter(|x| x.epoch >= new_epoch).count() as u64;
    assert!(
        later <= distinct - observed + CHUNK,
        "from epoch {new_epoch} on {later} rows were read; {observed} of {distinct} were done before the kill"
    );
    let dups = assert_duplicates_are_replayed_chunks(&r.read_recs, &["id"], false);
    assert!(dups as u64 <= 2 * CHUNK, "{dups} duplicate reads");
    assert_eq!(table_status(&done, &t)["rows_done"], distinct, "{done}");

    // a and b were not read again: their topics hold their initial snapshot alone
    for (name, tp) in [(&a, &topics[0]), (&b, &topics[1])] {
        let other = replay(&parse(&world.read(tp).await), &["id"]);
        assert_eq!(other.read_recs.len() as u64, SMALL_ROWS, "{name}");
        assert!(other.changes.is_empty(), "{name}");
        let kinds = snapshot_kinds(&other.read_recs);
        assert!(!kinds.contains("incremental"), "{name}: {kinds:?}");
        assert_eq!(table_status(&done, name)["rows_done"], SMALL_ROWS, "{done}");
    }

    // a second request, stopped: the table streams on, ungated
    let (s, v) = call(
        &world,
        Method::POST,
        path.clone(),
        Some(json!({"tables": [t.clone()]})),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let (s, v) = call(&world, Method::DELETE, path.clone(), None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["tables"], json!([t.clone()]));
    let st = world
        .wait_status("inc", SETTLE, "streaming without the snapshot", |s| {
            s["state"] == "streaming" && s["epoch"] == v["epoch"]
        })
        .await;
    assert_eq!(table_status(&st, &t)["status"], "stopped", "{st}");
    let (_, v) = call(&world, Method::DELETE, path.clone(), None).await;
    assert_eq!(v["error_code"], "no_snapshot_running", "{v}");
    admin
        .query_drop(format!(
            "DELETE FROM {} WHERE id = {SENTINEL_ID}",
            qt(&schema, "t")
        ))
        .await
        .unwrap();
    let recs = tail
        .through_sentinel(&mut admin, &schema, "t", Duration::from_secs(60))
        .await;
    let r = replay(&recs, &["id"]);
    assert_same(
        &r.state,
        &source_rows(&mut admin, &schema, "t", &["id"]).await,
        flavor,
    );
    eprintln!(
        "{flavor}: ad-hoc snapshot of {ROWS} rows under 8 writers ({} statements), owner \
         {victim} killed at {observed} rows (epoch {epoch} -> {new_epoch} on {owner}): \
         {distinct} rows read, {dups} duplicate reads, {between} changes between chunks; \
         total {:?}",
        stats.statements.load(Ordering::Relaxed),
        started.elapsed()
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
