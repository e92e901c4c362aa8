//! The initial snapshot survives SIGKILL of its owner: the pipeline moves to another worker
//! (a new owner, a higher epoch), which resumes at the committed cursor instead of from zero,
//! and the topic replayed by key still equals the table. Both servers; scenario A4 of
//! `../shared/testdata/external/SCENARIOS.md` included.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use serde_json::json;
use snapshot_common::*;

// ---------------------------------------------------------------------------------------
// kill -9 the owner mid-snapshot, twice, under writers

const ROWS: u64 = 30_000;
const CHUNK: u64 = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_resumes_from_the_cursor_after_two_owner_kills() {
    kill_twice("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_snapshot_resumes_from_the_cursor_after_two_owner_kills() {
    kill_twice("mariadb").await;
}

async fn kill_twice(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let started = Instant::now();
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapk").await;
    seed_big(&mut admin, &schema, "t", ROWS).await;
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("sk", &schema, "t");
    world.one_partition(std::slice::from_ref(&tp));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &tp);
    let name = format!("{schema}.t");
    let def = world.definition(
        "kills",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": CHUNK, "max_rows_per_second": 1500}),
        "at_least_once",
        "sk",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("kills", SETTLE, "snapshotting", |s| {
            s["state"] == "snapshotting"
        })
        .await;
    let stats = Arc::new(WriterStats::default());
    let writers = start_writers(&db, &schema, "t", 4, ROWS, stats.clone());
    let mut kills = Vec::new();
    for threshold in [ROWS / 5, ROWS / 2] {
        let st = world
            .wait_status("kills", Duration::from_secs(120), "progress", |s| {
                table_status(s, &name)["rows_done"]
                    .as_u64()
                    .is_some_and(|n| n >= threshold)
            })
            .await;
        let observed = table_status(&st, &name)["rows_done"].as_u64().unwrap();
        assert!(observed < ROWS * 3 / 4, "the kill lands mid-snapshot: {st}");
        let (victim, epoch, owner, new_epoch) = kill_owner(&world, "kills", "snapshotting").await;
        assert_ne!(victim, owner);
        assert!(new_epoch > epoch);
        kills.push((observed, new_epoch));
    }
    world
        .wait_status("kills", Duration::from_secs(300), "complete", |s| {
            table_status(s, &name)["status"] == "complete"
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stats.stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let st = world
        .wait_status("kills", SETTLE, "streaming", |s| s["state"] == "streaming")
        .await;
    let sentinel = json!({ "id": SENTINEL_ID });
    let recs = tail
        .through_sentinel(&mut admin, &schema, "t", Duration::from_secs(120))
        .await;
    let r = replay(&recs, &["id"]);
    assert!(r.state.contains_key(&sentinel.to_string()), "sentinel");
    let source = source_rows(&mut admin, &schema, "t", &["id"]).await;
    assert_same(&r.state, &source, flavor);

    // the kills happened mid-snapshot: rows were read by three epochs
    let epochs: BTreeSet<u64> = r.read_recs.iter().map(|x| x.epoch).collect();
    assert!(epochs.len() >= 3, "reads by epochs {epochs:?}");
    let distinct = r.reads.len() as u64;
    // each restart resumed at the cursor: what later epochs read is the rest of the table
    for (observed, epoch) in &kills {
        let later = r.read_recs.iter().filter(|x| x.epoch >= *epoch).count() as u64;
        assert!(later < ROWS, "{later} rows read from epoch {epoch} on");
        assert!(
            later <= distinct - observed,
            "from epoch {epoch} on {later} rows were read; {observed} of {distinct} were done \
             before the kill"
        );
    }
    // duplicates only as a re-published in-flight chunk, at most one per kill
    let dups = assert_duplicates_are_replayed_chunks(&r.read_recs, &["id"], true);
    assert!(dups as u64 <= 2 * CHUNK, "{dups} duplicate reads");
    let markers = world.markers("sk", &schema, "t").await;
    assert_eq!(markers.len(), 1);
    assert_eq!(
        markers[0].value.as_ref().unwrap()["snapshot_complete"]["rows"],
        table_status(&st, &name)["rows_done"]
    );
    eprintln!(
        "{flavor}: {ROWS} rows, 2 kills at {:?}; epochs {epochs:?}; {dups} duplicate reads; \
         {} writer statements; {:?}",
        kills,
        stats.statements.load(Ordering::Relaxed),
        started.elapsed()
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// A4: kill -9 right after the first snapshot rows arrive

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_scenario_a4_kill_after_first_rows_at_least_once() {
    scenario_a4("mysql", "at_least_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_scenario_a4_kill_after_first_rows_at_least_once() {
    scenario_a4("mariadb", "at_least_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_scenario_a4_kill_after_first_rows_exactly_once() {
    scenario_a4("mysql", "exactly_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_scenario_a4_kill_after_first_rows_exactly_once() {
    scenario_a4("mariadb", "exactly_once").await;
}

/// A4: each of the 21 customers is delivered although the owner is killed right after the
/// first snapshot rows arrive; then streaming as A1. At-least-once: every row at least
/// once, a duplicate only as a whole re-published chunk by the next epoch. Exactly-once: the
/// same as read here, `read_uncommitted` (a killed producer's aborted records stay visible),
/// plus each owner's fenced resume from the committed offsets record.
async fn scenario_a4(flavor: &'static str, delivery: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "a4").await;
    if load_customers(&mut admin, &schema, "customers")
        .await
        .is_none()
    {
        return;
    }
    let c = qt(&schema, "customers");
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("a4", &schema, "customers");
    world.one_partition(std::slice::from_ref(&tp));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &tp);
    let name = format!("{schema}.customers");
    let def = world.definition(
        "a4",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 3, "max_rows_per_second": 3}),
        delivery,
        "a4",
    );
    world.create_and_resume(def).await;
    let first = tail
        .until(Duration::from_secs(60), |rs| {
            rs.iter().any(|r| r.op() == Some("r"))
        })
        .await;
    assert!(!first.is_empty(), "no snapshot row arrived");
    let (_, epoch, _, new_epoch) = kill_owner(&world, "a4", "snapshotting").await;
    world
        .wait_status("a4", Duration::from_secs(60), "streaming", |s| {
            s["state"] == "streaming"
        })
        .await;
    admin
        .query_drop(format!(
            "START TRANSACTION; \
             UPDATE {c} SET address = 'Hangzhou' WHERE id = 103; \
             DELETE FROM {c} WHERE id = 102; \
             INSERT INTO {c} VALUES (102, 'user_2', 'Shanghai', '123567891234'); \
             UPDATE {c} SET address = 'Shanghai' WHERE id = 103; COMMIT; \
             UPDATE {c} SET address = 'Hangzhou' WHERE id = 1010; \
             INSERT INTO {c} VALUES (2001, 'user_22', 'Shanghai', '123567891234'), \
               (2002, 'user_23', 'Shanghai', '123567891234'), \
               (2003, 'user_24', 'Shanghai', '123567891234')"
        ))
        .await
        .unwrap();
    let recs = tail
        .until(Duration::from_secs(60), |rs| {
            rs.iter()
                .any(|r| r.key.as_ref() == Some(&json!({"id": 2003})))
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let recs2 = tail.records();
    assert_eq!(recs.len(), recs2.len(), "nothing more after the changes");
    let r = replay(&recs, &["id"]);
    let ids: BTreeSet<i64> = r
        .read_recs
        .iter()
        .map(|x| x.value.as_ref().unwrap()["after"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 21, "each of the 21 rows delivered: {ids:?}");
    let epochs: BTreeSet<u64> = r.read_recs.iter().map(|x| x.epoch).collect();
    assert!(
        epochs.contains(&epoch) && epochs.contains(&new_epoch),
        "rows read before and after the kill: {epochs:?}"
    );
    let dups = assert_duplicates_are_replayed_chunks(&r.read_recs, &["id"], true);
    assert!(dups <= 3, "at most the one in-flight chunk again: {dups}");
    // then streaming as A1: exactly the 8 change events (+ 1 tombstone), once each
    let ops: Vec<&str> = r.changes.iter().filter_map(Rec::op).collect();
    assert_eq!(ops, ["u", "d", "c", "u", "u", "c", "c", "c"]);
    let source = source_rows(&mut admin, &schema, "customers", &["id"]).await;
    assert_same(&r.state, &source, "A4");
    if delivery == "exactly_once" {
        let opened = world
            .blocking(|c| c.logged("exactly-once resume point decided"))
            .await;
        assert!(opened >= 2, "{opened} exactly-once openings logged");
    }
    eprintln!("{flavor} {delivery}: A4 with {dups} duplicate reads; epochs {epochs:?}");
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// A crash in the narrowest window: a chunk acknowledged by Kafka, its pk_cursor not yet in
// Raft (its delivered_pk is). Forced with the worker's debug-build fault point.

const WINDOW_ROWS: u64 = 1_200;
const WINDOW_CHUNK: u64 = 100;
/// The owner crashes right after its third chunk is acknowledged.
const WINDOW_AT: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_crash_between_chunk_publish_and_cursor_at_least_once() {
    crash_in_window("mysql", "at_least_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_crash_between_chunk_publish_and_cursor_at_least_once() {
    crash_in_window("mariadb", "at_least_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_crash_between_chunk_publish_and_cursor_exactly_once() {
    crash_in_window("mysql", "exactly_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_crash_between_chunk_publish_and_cursor_exactly_once() {
    crash_in_window("mariadb", "exactly_once").await;
}

/// At-least-once: the chunk whose cursor was lost is re-published by the next owner, whole
/// and only it (every other row read once). Exactly-once: the chunk and its offsets record
/// committed together in Kafka, so the next owner adopts Kafka's cursor and nothing is read
/// twice. Either way the topic replayed by key equals the table.
async fn crash_in_window(flavor: &'static str, delivery: &'static str) {
    use std::os::unix::process::ExitStatusExt;

    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapw").await;
    seed_big(&mut admin, &schema, "t", WINDOW_ROWS).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("crashed");
    let fault = format!("snapshot_chunk_published@{WINDOW_AT}:{}", marker.display());
    let env = vec![("CAPSTAN_FAULT".to_string(), fault)];
    let Some(world) = World::start_with_env(db.clone(), flavor, env).await else {
        return;
    };
    let tp = topic("sw", &schema, "t");
    world.one_partition(std::slice::from_ref(&tp));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &tp);
    let name = format!("{schema}.t");
    let def = world.definition(
        "window",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": WINDOW_CHUNK, "max_rows_per_second": 400}),
        delivery,
        "sw",
    );
    world.create_and_resume(def).await;

    // the owner really crashed at the fault point: the marker exists and exactly one worker
    // died of SIGABRT
    let deadline = Instant::now() + Duration::from_secs(120);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the fault point was never reached"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let victim = world
        .blocking(|c| {
            let deadline = Instant::now() + SETTLE;
            loop {
                let dead: Vec<u64> = c
                    .workers
                    .values_mut()
                    .filter_map(|w| {
                        (w.exit_status().and_then(|s| s.signal()) == Some(6)).then_some(w.id)
                    })
                    .collect();
                if dead.len() == 1 {
                    break dead[0];
                }
                assert!(Instant::now() < deadline, "aborted workers: {dead:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .await;
    let st = world
        .wait_status("window", Duration::from_secs(120), "moved", |s| {
            s["owner"].as_u64().is_some_and(|o| o != victim) && s["state"] != "failed"
        })
        .await;
    world.blocking(move |c| c.spawn(victim)).await;
    world
        .wait_status("window", Duration::from_secs(180), "complete", |s| {
            table_status(s, &name)["status"] == "complete" && s["state"] == "streaming"
        })
        .await;
    let recs = tail
        .through_sentinel(&mut admin, &schema, "t", Duration::from_secs(120))
        .await;
    let r = replay(&recs, &["id"]);
    let source = source_rows(&mut admin, &schema, "t", &["id"]).await;
    assert_same(&r.state, &source, flavor);
    assert_eq!(r.reads.len() as u64, WINDOW_ROWS, "every row read");
    assert_eq!(world.markers("sw", &schema, "t").await.len(), 1);

    // the crashed epoch published exactly WINDOW_AT chunks: it died right after the last
    let first_epoch = r.read_recs[0].epoch;
    let before: Vec<&Rec> = r
        .read_recs
        .iter()
        .filter(|x| x.epoch == first_epoch)
        .collect();
    assert_eq!(
        before.len() as u64,
        WINDOW_AT as u64 * WINDOW_CHUNK,
        "the first owner's reads: {:?}",
        chunks(&r.read_recs)
    );
    let last_chunk: BTreeSet<String> = before[before.len() - WINDOW_CHUNK as usize..]
        .iter()
        .map(|x| key_of(&x.value.as_ref().unwrap()["after"], &["id"]))
        .collect();
    let twice: BTreeSet<String> = r
        .reads
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k.clone())
        .collect();
    assert!(r.reads.values().all(|n| *n <= 2), "no row read three times");
    if delivery == "at_least_once" {
        // the lost cursor costs exactly the one chunk, re-read by the next owner
        assert_eq!(twice, last_chunk, "re-read: exactly the in-flight chunk");
    } else {
        assert!(
            twice.is_empty(),
            "exactly-once re-read {} rows",
            twice.len()
        );
        let decided: Vec<String> = world
            .blocking(|c| {
                [1, 2, 3]
                    .iter()
                    .flat_map(|&id| {
                        c.log(id)
                            .lines()
                            .filter(|l| l.contains("resume point decided"))
                            .map(str::to_string)
                            .collect::<Vec<_>>()
                    })
                    .collect()
            })
            .await;
        assert!(
            decided.iter().any(|l| l.contains("source=Kafka")),
            "the next owner resumed from Kafka's offsets record: {decided:#?}"
        );
    }
    eprintln!(
        "{flavor} {delivery}: worker {victim} aborted after chunk {WINDOW_AT}; next owner {}; \
         {} rows re-read",
        st["owner"],
        twice.len()
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// A table already snapshotted is dropped while another is still being read, then the owner
// dies: the next owner goes on with the unfinished table (a complete table is not described
// again, so its absence is no reason to halt).

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_dropping_a_complete_table_does_not_stop_a_resumed_snapshot() {
    drop_complete_then_kill("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_dropping_a_complete_table_does_not_stop_a_resumed_snapshot() {
    drop_complete_then_kill("mariadb").await;
}

async fn drop_complete_then_kill(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapd").await;
    seed_big(&mut admin, &schema, "c", 3000).await;
    admin
        .query_drop(format!(
            "CREATE TABLE {b} LIKE {c}; INSERT INTO {b} SELECT * FROM {c} WHERE id <= 40",
            b = qt(&schema, "b"),
            c = qt(&schema, "c"),
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tc = topic("sd", &schema, "c");
    world.one_partition(std::slice::from_ref(&tc));
    // b first, then c (slowly): b is complete long before c is
    let (b, c) = (format!("{schema}.b"), format!("{schema}.c"));
    let def = world.definition(
        "dropc",
        &[b.clone(), c.clone()],
        json!({"mode": "initial", "chunk_size": 100, "max_rows_per_second": 600}),
        "at_least_once",
        "sd",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("dropc", Duration::from_secs(60), "c under way", |s| {
            table_status(s, &b)["status"] == "complete"
                && table_status(s, &c)["rows_done"].as_u64() > Some(200)
        })
        .await;
    admin
        .query_drop(format!("DROP TABLE {}", qt(&schema, "b")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let st = world.status("dropc").await.unwrap();
    assert_eq!(st["state"], "snapshotting", "the live owner goes on: {st}");
    assert_ne!(
        table_status(&st, &c)["status"],
        "complete",
        "killed mid-c: {st}"
    );
    let (_, epoch, _, new_epoch) = kill_owner(&world, "dropc", "snapshotting").await;
    assert!(new_epoch > epoch);
    world
        .wait_status("dropc", Duration::from_secs(120), "c complete", |s| {
            table_status(s, &c)["status"] == "complete" && s["state"] == "streaming"
        })
        .await;
    // c's marker (on the control topic) follows its last chunk: then c's topic is complete
    let marker_key = json!({ "snapshot_complete": &c });
    world
        .read_until(&marker_topic("sd"), Duration::from_secs(60), |rs| {
            parse(rs)
                .iter()
                .any(|r| r.key.as_ref() == Some(&marker_key))
        })
        .await;
    let recs = parse(&world.read(&tc).await);
    let r = replay(&recs, &["id"]);
    let source = source_rows(&mut admin, &schema, "c", &["id"]).await;
    assert_same(&r.state, &source, flavor);
    let epochs: BTreeSet<u64> = r.read_recs.iter().map(|x| x.epoch).collect();
    assert!(
        epochs.contains(&new_epoch),
        "the next owner read c: {epochs:?}"
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
