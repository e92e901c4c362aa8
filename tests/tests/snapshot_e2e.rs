//! The cursor-gated initial snapshot (issue #7, ADR-0005) end to end on three real worker
//! processes against the MySQL 9.x and MariaDB 10.11 dev servers and the real Kafka broker: the
//! snapshot under concurrent writers (the topic replayed by key equals the table, every row
//! read exactly once, suppression really happened), edge tables, refusals, the DDL drift
//! halt and a table added mid-snapshot, and the snapshot scenarios A1, A9, A12, A13 of `../shared/testdata/external/SCENARIOS.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_tests::unique_name;
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};
use snapshot_common::*;

// ---------------------------------------------------------------------------------------
// 1. eight concurrent writers during the snapshot of a 200k-row table

const BIG_ROWS: u64 = 200_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_under_eight_writers_equals_the_table() {
    concurrent_writers("mysql", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_snapshot_under_eight_writers_equals_the_table() {
    concurrent_writers("mariadb", 1).await;
}

/// The same with chunks read in parallel rounds (`parallel_reads: 4`, key ranges of the
/// table): the same guarantees, and chunks read beside others really published.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_read_in_parallel_under_eight_writers_equals_the_table() {
    concurrent_writers("mysql", 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_snapshot_read_in_parallel_under_eight_writers_equals_the_table() {
    concurrent_writers("mariadb", 4).await;
}

async fn concurrent_writers(flavor: &'static str, parallel_reads: u64) {
    let Some(db) = flavor_db(flavor) else { return };
    let started = Instant::now();
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapw").await;
    seed_big(&mut admin, &schema, "big", BIG_ROWS).await;
    eprintln!(
        "{flavor}: seeded {BIG_ROWS} rows in {:?}",
        started.elapsed()
    );
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let topic = topic("sw", &schema, "big");
    world.one_partition(std::slice::from_ref(&topic));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &topic);
    let chunk_size = 2000u64;
    let def = world.definition(
        "big",
        &[format!("{schema}.big")],
        json!({"mode": "initial", "chunk_size": chunk_size, "parallel_reads": parallel_reads}),
        "at_least_once",
        "sw",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("big", SETTLE, "snapshotting", |s| {
            s["state"] == "snapshotting"
        })
        .await;

    let stats = Arc::new(WriterStats::default());
    let writers = start_writers(&db, &schema, "big", 8, BIG_ROWS, stats.clone());
    let snap_started = Instant::now();
    // progress is visible while the snapshot runs
    let mid = world
        .wait_status("big", Duration::from_secs(600), "rows_done > 0", |s| {
            table_status(s, &format!("{schema}.big"))["rows_done"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .await;
    assert_eq!(mid["state"], "snapshotting", "{mid}");
    let done = world
        .wait_status("big", Duration::from_secs(900), "snapshot complete", |s| {
            table_status(s, &format!("{schema}.big"))["status"] == "complete"
        })
        .await;
    let snap_time = snap_started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stats.stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let statements = stats.statements.load(Ordering::Relaxed);
    let st = world
        .wait_status("big", SETTLE, "streaming", |s| s["state"] == "streaming")
        .await;
    let owner = st["owner"].as_u64().unwrap();
    let suppressed = world
        .metric(owner, "big", "snapshot_suppressed")
        .await
        .expect("suppressed gauge");
    let read_ahead = world.read_ahead(owner, "big").await;
    let snapshot_rows = world
        .metric(owner, "big", "snapshot_rows_total")
        .await
        .expect("snapshot rows counter");

    // the sentinel: everything committed before it is on the topic once it is
    let sentinel = SENTINEL_ID;
    let recs = tail
        .through_sentinel(&mut admin, &schema, "big", Duration::from_secs(300))
        .await;
    let source = source_rows(&mut admin, &schema, "big", &["id"]).await;
    let replayed = replay(&recs, &["id"]);
    assert!(
        replayed
            .state
            .contains_key(&format!("{{\"id\":{sentinel}}}")),
        "sentinel never arrived"
    );
    assert_same(&replayed.state, &source, flavor);

    // every row the snapshot read, exactly once
    let dups: Vec<_> = replayed.reads.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        dups.is_empty(),
        "{} keys read more than once: {:?}",
        dups.len(),
        &dups[..dups.len().min(10)]
    );
    let reads = replayed.read_recs.len() as u64;
    // the writers both deleted and inserted rows ahead of the cursor: the read count is the
    // table as the chunks met it, which differs from the seed by at most one row per
    // statement the writers ran (a transaction holds three); how many depends on how long
    // the snapshot took, so the bound does too
    assert!(
        reads.abs_diff(BIG_ROWS) <= 3 * statements,
        "{reads} rows read of {BIG_ROWS}, {statements} writer statements"
    );
    assert_eq!(snapshot_rows as u64, reads, "rows counter");
    assert_eq!(
        table_status(&done, &format!("{schema}.big"))["rows_done"],
        reads
    );
    // chunked: one position header per chunk, none larger than chunk_size; read one at a
    // time all are full but the last, read in parallel a key range may hold fewer
    let chunks = chunks(&replayed.read_recs);
    if parallel_reads == 1 {
        assert_eq!(
            chunks.len() as u64,
            reads.div_ceil(chunk_size),
            "{chunks:?}"
        );
    } else {
        assert!(
            read_ahead[0] > 0,
            "no chunk read in parallel was published: {read_ahead:?}"
        );
    }
    let mut done = 0u64;
    for (i, (p, n)) in chunks.iter().enumerate() {
        assert!(*n as u64 <= chunk_size, "chunk {p}");
        if i + 1 < chunks.len() && parallel_reads == 1 {
            assert_eq!(*n as u64, chunk_size, "chunk {p}");
        }
        assert_eq!(p, &format!("snapshot:{schema}.big/{done}"), "chunk ids");
        done += *n as u64;
    }
    // suppression really happened, and streamed changes were interleaved with the snapshot
    assert!(suppressed > 0.0, "no streamed change was suppressed");
    let last_read = replayed.read_recs.last().unwrap();
    let first_read = &replayed.read_recs[0];
    let streamed_during = replayed
        .changes
        .iter()
        .filter(|c| c.index > first_read.index && c.index < last_read.index)
        .count();
    assert!(
        streamed_during > 0,
        "no change streamed during the snapshot"
    );
    // flags and the marker
    let flag = |r: &Rec| r.value.as_ref().unwrap()["source"]["snapshot"].clone();
    assert_eq!(
        flag(last_read),
        "last",
        "the last row of the whole snapshot"
    );
    assert_eq!(
        flag(first_read),
        "first",
        "the first row of the whole snapshot"
    );
    assert!(replayed.read_recs[..replayed.read_recs.len() - 1]
        .iter()
        .enumerate()
        .all(|(i, r)| (i == 0 || flag(r) == "true")
            && r.value.as_ref().unwrap()["before"].is_null()
            && r.value.as_ref().unwrap()["source"]["gtid"].is_null()));
    // the marker is on the control topic, not among the table's change events
    let markers = world.markers("sw", &schema, "big").await;
    assert_eq!(markers.len(), 1);
    assert_eq!(
        markers[0].value,
        Some(json!({"snapshot_complete": {"db": schema, "table": "big", "rows": reads}}))
    );
    eprintln!(
        "{flavor}: {BIG_ROWS}-row snapshot in {snap_time:?} ({} chunks, parallel_reads \
         {parallel_reads}; read ahead or in parallel: used, stale, wasted {read_ahead:?}) \
         under 8 writers ({statements} statements, {} errors), \
         {suppressed} suppressed, {} change records, total {:?}",
        chunks.len(),
        stats.errors.load(Ordering::Relaxed),
        replayed.changes.len(),
        started.elapsed()
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// 2. edge tables, in one pipeline

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_edge_tables_snapshot_exactly() {
    edge_tables("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_edge_tables_snapshot_exactly() {
    edge_tables("mariadb").await;
}

const HOSTILE: &str = "h`; DROP TABLE victim; -- '\"";

/// Keys of the case-insensitive table: mixed case and accents, unique by their number.
fn ci_key(i: u64) -> String {
    const LEAD: [&str; 12] = ["a", "B", "c", "D", "é", "F", "ö", "Z", "ß", "Å", "m", "Ω"];
    format!("{}{:03}", LEAD[(i % 12) as usize], i)
}

async fn edge_tables(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let started = Instant::now();
    let schema = unique_name("snape");
    let mut admin = db.admin_conn().await;
    let t = |name: &str| qt(&schema, name);
    let ci_collation = if flavor == "mysql" {
        "utf8mb4_0900_ai_ci"
    } else {
        "utf8mb4_unicode_ci"
    };
    admin
        .query_drop(format!(
            "CREATE DATABASE {s}; \
             CREATE TABLE {empty} (id INT PRIMARY KEY, v INT); \
             CREATE TABLE {exact} (id INT PRIMARY KEY, v INT); \
             CREATE TABLE {ubig} (id BIGINT UNSIGNED PRIMARY KEY, v INT); \
             CREATE TABLE {ci} (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE {ci_collation} \
               PRIMARY KEY, v INT); \
             CREATE TABLE {comp} (a INT, b VARBINARY(8), v INT, PRIMARY KEY (a, b)); \
             CREATE TABLE {hostile} (id INT PRIMARY KEY, v VARCHAR(20)); \
             CREATE TABLE {victim} (id INT PRIMARY KEY); \
             CREATE TABLE {uk} (id INT NOT NULL, v INT, UNIQUE KEY (id))",
            s = q(&schema),
            empty = t("empty"),
            exact = t("exact"),
            ubig = t("ubig"),
            ci = t("ci"),
            comp = t("comp"),
            hostile = t(HOSTILE),
            victim = t("victim"),
            uk = t("uk"),
        ))
        .await
        .unwrap();
    let chunk = 4u64;
    let exact_rows = 3 * chunk;
    let values: Vec<String> = (1..=exact_rows).map(|i| format!("({i}, {i})")).collect();
    let ubig_keys: Vec<u64> = vec![
        0,
        1,
        (1 << 63) - 2,
        (1 << 63) - 1,
        1 << 63,
        (1 << 63) + 1,
        (1 << 63) + 2,
        (1 << 63) + 1000,
        u64::MAX - 3,
        u64::MAX - 2,
        u64::MAX - 1,
        u64::MAX,
        12_345_678_901_234_567_890,
    ];
    let ubig_values: Vec<String> = ubig_keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("({k}, {i})"))
        .collect();
    let ci_rows = 120u64;
    let ci_values: Vec<String> = (0..ci_rows)
        .map(|i| format!("('{}', {i})", ci_key(i * 2)))
        .collect();
    let comp_values = [
        "(-5, X'', 1)",
        "(-5, X'00', 2)",
        "(-5, X'0000', 3)",
        "(-5, X'FF', 4)",
        "(0, X'7F', 5)",
        "(0, X'80', 6)",
        "(0, X'FFFFFFFFFFFFFFFF', 7)",
        "(1, X'00', 8)",
        "(1, X'01', 9)",
        "(2147483647, X'61', 10)",
    ];
    admin
        .query_drop(format!(
            "INSERT INTO {exact} VALUES {}; INSERT INTO {ubig} VALUES {}; \
             INSERT INTO {ci} VALUES {}; INSERT INTO {comp} VALUES {}; \
             INSERT INTO {hostile} VALUES (1, 'x'), (2, '`; DROP'), (3, NULL), (4, 'z'), (5, 'q'); \
             INSERT INTO {uk} VALUES (3, 30), (1, 10), (2, 20), (4, 40), (5, 50), (6, 60)",
            values.join(","),
            ubig_values.join(","),
            ci_values.join(","),
            comp_values.join(","),
            exact = t("exact"),
            ubig = t("ubig"),
            ci = t("ci"),
            comp = t("comp"),
            hostile = t(HOSTILE),
            uk = t("uk"),
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let order = ["empty", "exact", "ubig", "ci", "comp", HOSTILE, "uk"];
    let topics: Vec<String> = order.iter().map(|n| topic("se", &schema, n)).collect();
    world.one_partition(&topics);
    let names: Vec<String> = order.iter().map(|n| format!("{schema}.{n}")).collect();
    let def = world.definition(
        "edges",
        &names,
        json!({"mode": "initial", "tables": names, "chunk_size": chunk, "max_rows_per_second": 40}),
        "at_least_once",
        "se",
    );
    world.create_and_resume(def).await;
    // writers on the case-insensitive table while it is snapshotted: new keys before and
    // after the cursor (odd numbers), updates and deletes of existing ones
    let ci_name = format!("{schema}.ci");
    world
        .wait_status("edges", Duration::from_secs(60), "ci in progress", |s| {
            table_status(s, &ci_name)["status"] == "in_progress"
        })
        .await;
    let mut w = db.admin_conn().await;
    let mut rng = Rng::new(7);
    let mut writes = 0;
    let mut raced = 0;
    loop {
        let st = world.status("edges").await.unwrap();
        let ts = table_status(&st, &ci_name);
        if ts["status"] != "in_progress" {
            break;
        }
        if ts["rows_done"]
            .as_u64()
            .is_some_and(|n| n > 8 && n + 16 < ci_rows)
        {
            raced += 1;
        }
        let i = rng.below(2 * ci_rows + 40);
        let sql = match rng.below(3) {
            0 => format!(
                "INSERT INTO {} VALUES ('{}', {i}) ON DUPLICATE KEY UPDATE v = v + 1000",
                t("ci"),
                ci_key(i | 1)
            ),
            1 => format!("UPDATE {} SET v = v + 1 WHERE k = '{}'", t("ci"), ci_key(i)),
            _ => format!("DELETE FROM {} WHERE k = '{}'", t("ci"), ci_key(i)),
        };
        w.query_drop(sql).await.unwrap();
        writes += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        raced > 10,
        "the writers really raced the snapshot of ci ({raced} writes mid-table)"
    );
    let done = world
        .wait_status("edges", Duration::from_secs(120), "streaming", |s| {
            s["state"] == "streaming"
        })
        .await;
    for n in &names {
        assert_eq!(table_status(&done, n)["status"], "complete", "{n}: {done}");
    }
    let owner = done["owner"].as_u64().unwrap();
    let suppressed = world.metric(owner, "edges", "snapshot_suppressed").await;
    // sentinels on the last table: everything before is on the topics
    admin
        .query_drop(format!(
            "INSERT INTO {} VALUES ('zzz-sentinel', 0); INSERT INTO {} VALUES (1000, 0)",
            t("ci"),
            t("uk")
        ))
        .await
        .unwrap();
    let uk_topic = topics.last().unwrap().clone();
    world
        .read_until(&uk_topic, Duration::from_secs(60), |rs| {
            parse(rs)
                .iter()
                .any(|r| r.value.as_ref().is_some_and(|v| v["after"]["id"] == 1000))
        })
        .await;

    let keys: BTreeMap<&str, Vec<&str>> = [
        ("empty", vec!["id"]),
        ("exact", vec!["id"]),
        ("ubig", vec!["id"]),
        ("ci", vec!["k"]),
        ("comp", vec!["a", "b"]),
        (HOSTILE, vec!["id"]),
        ("uk", vec!["id"]),
    ]
    .into_iter()
    .collect();
    let mut lasts = 0;
    for (n, tp) in order.iter().zip(&topics) {
        let recs = parse(&world.read(tp).await);
        let key = &keys[n];
        let r = replay(&recs, key);
        let source = source_rows(&mut admin, &schema, n, key).await;
        assert_same(&r.state, &source, &format!("{flavor} {n}"));
        let twice: Vec<_> = r.reads.iter().filter(|(_, c)| **c != 1).collect();
        assert!(twice.is_empty(), "{n}: read more than once: {twice:?}");
        // the table topic holds change events only; its marker is on the control topic
        assert!(
            recs.iter().all(|x| x.value.is_none() || x.op().is_some()),
            "{n}"
        );
        let markers = world.markers("se", &schema, n).await;
        assert_eq!(markers.len(), 1, "{n}: one marker");
        let m = &markers[0];
        assert_eq!(
            m.key,
            Some(json!({ "snapshot_complete": format!("{schema}.{n}") })),
            "{n}"
        );
        assert_eq!(
            m.value,
            Some(
                json!({"snapshot_complete": {"db": schema, "table": n, "rows": r.read_recs.len()}})
            ),
            "{n}"
        );
        if let Some(last) = r.read_recs.last() {
            let flag = last.value.as_ref().unwrap()["source"]["snapshot"].clone();
            let want = if *n == "uk" {
                "last"
            } else {
                "last_in_data_collection"
            };
            if *n == "ci" && flag == "true" {
                // under the writers the final chunk can come back empty (the rows after the
                // cursor deleted meanwhile): no row is left to carry the flag, the marker
                // alone ends the table
                // the first row carries the table's (or the snapshot's) first flag
                assert!(
                    r.read_recs
                        .iter()
                        .skip(1)
                        .all(|x| x.value.as_ref().unwrap()["source"]["snapshot"] == "true"),
                    "{n}: a flagged row before the last one"
                );
            } else {
                assert_eq!(flag, want, "{n}");
            }
        }
        for rec in &r.read_recs {
            let v = rec.value.as_ref().unwrap();
            assert_eq!(v["source"]["db"], schema.as_str());
            assert_eq!(v["source"]["table"], *n, "names verbatim");
            if v["source"]["snapshot"] == "last" {
                lasts += 1;
            }
        }
        let ch = chunks(&r.read_recs);
        for (p, c) in &ch[..ch.len().saturating_sub(1)] {
            assert_eq!(*c as u64, chunk, "{n}: {p}");
        }
        match *n {
            "empty" => {
                assert!(r.read_recs.is_empty() && r.changes.is_empty(), "{recs:?}");
                assert!(
                    recs.is_empty(),
                    "nothing on the empty table's topic: {recs:?}"
                );
            }
            "exact" => {
                assert_eq!(r.read_recs.len() as u64, exact_rows);
                // no extra (empty) chunk after an exact multiple
                assert_eq!(
                    ch.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
                    (0..3)
                        .map(|i| format!("snapshot:{schema}.exact/{}", i * chunk))
                        .collect::<Vec<_>>()
                );
                assert_eq!(recs.len() as u64, exact_rows, "the rows only");
            }
            "ubig" => {
                let got: Vec<u64> = r
                    .read_recs
                    .iter()
                    .map(|x| x.value.as_ref().unwrap()["after"]["id"].as_u64().unwrap())
                    .collect();
                let mut want = ubig_keys.clone();
                want.sort_unstable();
                assert_eq!(got, want, "every unsigned key once, in key order");
            }
            "ci" => {
                assert!(
                    r.read_recs.len() as u64 >= ci_rows / 2,
                    "{}",
                    r.read_recs.len()
                );
            }
            "comp" => assert_eq!(r.read_recs.len(), comp_values.len()),
            "uk" => {
                assert_eq!(r.read_recs.len(), 6);
                // keyed by the NOT NULL unique key: the snapshot's rows and the stream's
                // changes alike (the sentinel, id 1000, was streamed)
                for x in r.read_recs.iter().chain(&r.changes) {
                    let id = &x.value.as_ref().unwrap()["after"]["id"];
                    assert_eq!(x.key, Some(json!({ "id": id })), "{n}: record key");
                }
                assert!(
                    r.changes.iter().any(|x| x.key == Some(json!({"id": 1000}))),
                    "{n}: the streamed sentinel"
                );
                let ids: Vec<i64> = r
                    .read_recs
                    .iter()
                    .map(|x| x.value.as_ref().unwrap()["after"]["id"].as_i64().unwrap())
                    .collect();
                assert_eq!(ids, [1, 2, 3, 4, 5, 6], "chunked in unique-key order");
            }
            _ => assert_eq!(r.read_recs.len(), 5),
        }
    }
    assert_eq!(lasts, 1, "exactly one row flagged last");
    let victim: Option<u64> = admin
        .query_first(format!("SELECT COUNT(*) FROM {}", t("victim")))
        .await
        .unwrap();
    assert_eq!(victim, Some(0), "the victim table still exists");
    eprintln!(
        "{flavor}: edge tables in {:?}; {writes} writes raced ci ({raced} mid-table), \
         suppressed {suppressed:?}",
        started.elapsed()
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// 3. refusals and drift

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_refusals_and_drift_halt() {
    refusals_and_drift("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_refusals_and_drift_halt() {
    refusals_and_drift("mariadb").await;
}

async fn refusals_and_drift(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapr").await;
    let t = |name: &str| qt(&schema, name);
    admin
        .query_drop(format!(
            "CREATE TABLE {} (id INT, v INT); INSERT INTO {} VALUES (1, 1); \
             CREATE TABLE {} (id INT NULL, v INT, UNIQUE KEY (id)); INSERT INTO {} VALUES (1, 1); \
             CREATE TABLE {} (id DECIMAL(10, 2) PRIMARY KEY, v INT); INSERT INTO {} VALUES (1.5, 1)",
            t("nokey"),
            t("nokey"),
            t("nullable_uk"),
            t("nullable_uk"),
            t("decimal_pk"),
            t("decimal_pk")
        ))
        .await
        .unwrap();
    seed_big(&mut admin, &schema, "ddl", 2000).await;
    admin
        .query_drop(format!(
            "CREATE TABLE {a} LIKE {ddl}; INSERT INTO {a} SELECT * FROM {ddl}; \
             CREATE TABLE {b} (id INT PRIMARY KEY)",
            a = t("a"),
            b = t("b"),
            ddl = t("ddl")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    // no usable key: refused before anything is written
    for (i, (table, reason)) in [
        ("nokey", "snapshot_table_no_primary_key"),
        ("nullable_uk", "snapshot_table_no_primary_key"),
        ("decimal_pk", "snapshot_pk_unsupported_type"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("refuse{i}");
        let def = world.definition(
            &name,
            &[format!("{schema}.{table}")],
            json!({"mode": "initial"}),
            "at_least_once",
            "sr",
        );
        world.create_and_resume(def).await;
        let st = world
            .wait_status(&name, SETTLE, "failed", |s| s["state"] == "failed")
            .await;
        assert_eq!(st["reason"], reason, "{table}: {st}");
        assert_eq!(
            st["snapshot"],
            json!([]),
            "{table}: no progress was written"
        );
        assert!(world.read(&topic("sr", &schema, table)).await.is_empty());
    }

    // a DDL on a table mid-snapshot halts snapshot_schema_drifted
    let ddl_name = format!("{schema}.ddl");
    let def = world.definition(
        "ddl",
        std::slice::from_ref(&ddl_name),
        json!({"mode": "initial", "chunk_size": 100, "max_rows_per_second": 200}),
        "at_least_once",
        "sr",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("ddl", SETTLE, "ddl mid-snapshot", |s| {
            table_status(s, &ddl_name)["rows_done"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .await;
    admin
        .query_drop(format!("ALTER TABLE {} ADD COLUMN extra INT", t("ddl")))
        .await
        .unwrap();
    let st = world
        .wait_status("ddl", SETTLE, "failed", |s| s["state"] == "failed")
        .await;
    assert_eq!(st["reason"], "snapshot_schema_drifted", "{st}");
    let ts = table_status(&st, &ddl_name);
    assert_eq!(ts["status"], "in_progress", "halted mid-snapshot: {st}");
    assert!(ts["rows_done"].as_u64().unwrap() < 2000, "{st}");

    // a table added to the capture list while the first snapshot runs: no halt, the new
    // (empty) table is snapshotted too and the running one goes on from its cursor
    // (tests/tests/snapshot_add_table.rs adds one with rows under writers)
    let a_name = format!("{schema}.a");
    let b_name = format!("{schema}.b");
    let def = world.definition(
        "drift",
        std::slice::from_ref(&a_name),
        json!({"mode": "initial", "chunk_size": 100, "max_rows_per_second": 200}),
        "at_least_once",
        "sr",
    );
    world.create_and_resume(def.clone()).await;
    world
        .wait_status("drift", SETTLE, "a mid-snapshot", |s| {
            table_status(s, &a_name)["rows_done"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .await;
    let mut changed = def.clone();
    changed["tables"]["include"] = json!([a_name, b_name]);
    changed["snapshot"]["tables"] = json!([a_name, b_name]);
    let (s, b) = world
        .blocking(move |c| {
            let via = running(c);
            c.send(via, Method::PUT, "/pipelines/drift/config", Some(&changed))
                .unwrap()
        })
        .await;
    assert_eq!(s, 200, "{b}");
    let st = world
        .wait_status("drift", Duration::from_secs(120), "both complete", |s| {
            s["state"] == "failed"
                || (table_status(s, &a_name)["status"] == "complete"
                    && table_status(s, &b_name)["status"] == "complete")
        })
        .await;
    assert_ne!(st["state"], "failed", "{st}");
    assert_eq!(st["snapshot"].as_array().map(Vec::len), Some(2), "{st}");
    assert_eq!(table_status(&st, &a_name)["rows_done"], 2000, "{st}");
    assert_eq!(table_status(&st, &b_name)["rows_done"], 0, "{st}");
    let b_recs = parse(&world.read(&topic("sr", &schema, "b")).await);
    assert!(b_recs.is_empty(), "nothing on the empty table's topic");
    let b_markers = world.markers("sr", &schema, "b").await;
    assert_eq!(b_markers.len(), 1, "the empty table's marker");
    assert_eq!(
        b_markers[0].value,
        Some(json!({"snapshot_complete": {"db": schema, "table": "b", "rows": 0}}))
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// 4. scenarios of ../shared/testdata/external/SCENARIOS.md

const CUSTOMER_IDS: [i64; 21] = [
    101, 102, 103, 109, 110, 111, 118, 121, 123, 1009, 1010, 1011, 1012, 1013, 1014, 1015, 1016,
    1017, 1018, 1019, 2000,
];

fn customer(id: i64, name: &str, address: &str) -> Value {
    json!({"id": id, "name": name, "address": address, "phone_number": "123567891234"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_scenario_a1_snapshot_then_exact_changes() {
    scenario_a1("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_scenario_a1_snapshot_then_exact_changes() {
    scenario_a1("mariadb").await;
}

/// A1: the 21 customers as exactly 21 `r` rows, then part 1 and part 2 as exactly their
/// change events, then nothing more.
async fn scenario_a1(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "a1").await;
    if load_customers(&mut admin, &schema, "customers")
        .await
        .is_none()
    {
        return;
    }
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("a1", &schema, "customers");
    world.one_partition(std::slice::from_ref(&tp));
    let name = format!("{schema}.customers");
    let def = world.definition(
        "a1",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 5}),
        "at_least_once",
        "a1",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("a1", Duration::from_secs(60), "streaming", |s| {
            s["state"] == "streaming"
        })
        .await;
    let snap = parse(&world.read(&tp).await);
    let c = qt(&schema, "customers");
    // part 1: one transaction; part 2: two transactions
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
    let total = snap.len() + 9;
    world
        .read_until(&tp, Duration::from_secs(60), |rs| rs.len() >= total)
        .await;
    // then nothing more
    tokio::time::sleep(Duration::from_secs(3)).await;
    let recs = parse(&world.read(&tp).await);
    // the snapshot: exactly the 21 rows, each once (the marker is on the control topic)
    assert_eq!(snap.len(), 21, "{snap:?}");
    let r = replay(&snap, &["id"]);
    let mut ids: Vec<i64> = r
        .read_recs
        .iter()
        .map(|x| x.value.as_ref().unwrap()["after"]["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, CUSTOMER_IDS);
    for x in &r.read_recs {
        let v = x.value.as_ref().unwrap();
        let id = v["after"]["id"].as_i64().unwrap();
        let n = CUSTOMER_IDS.iter().position(|&c| c == id).unwrap() + 1;
        assert_eq!(v["after"], customer(id, &format!("user_{n}"), "Shanghai"));
    }
    let markers = world.markers("a1", &schema, "customers").await;
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert_eq!(
        markers[0].value,
        Some(json!({"snapshot_complete": {"db": schema, "table": "customers", "rows": 21}}))
    );
    assert_eq!(chunks(&r.read_recs).len(), 5, "21 rows in chunks of 5");
    // then exactly the change events
    let changes: Vec<(String, Option<i64>, Value, Value)> = recs[21..]
        .iter()
        .map(|x| match &x.value {
            Some(v) => (
                v["op"].as_str().unwrap().to_string(),
                None,
                v["before"].clone(),
                v["after"].clone(),
            ),
            None => (
                "tombstone".to_string(),
                x.key.as_ref().unwrap()["id"].as_i64(),
                Value::Null,
                Value::Null,
            ),
        })
        .collect();
    let sh = |id| {
        customer(
            id,
            &format!("user_{}", if id == 103 { 3 } else { 2 }),
            "Shanghai",
        )
    };
    let expected = vec![
        (
            "u".into(),
            None,
            sh(103),
            customer(103, "user_3", "Hangzhou"),
        ),
        ("d".into(), None, sh(102), Value::Null),
        ("tombstone".into(), Some(102), Value::Null, Value::Null),
        ("c".into(), None, Value::Null, sh(102)),
        (
            "u".into(),
            None,
            customer(103, "user_3", "Hangzhou"),
            sh(103),
        ),
        (
            "u".into(),
            None,
            customer(1010, "user_11", "Shanghai"),
            customer(1010, "user_11", "Hangzhou"),
        ),
        (
            "c".into(),
            None,
            Value::Null,
            customer(2001, "user_22", "Shanghai"),
        ),
        (
            "c".into(),
            None,
            Value::Null,
            customer(2002, "user_23", "Shanghai"),
        ),
        (
            "c".into(),
            None,
            Value::Null,
            customer(2003, "user_24", "Shanghai"),
        ),
    ];
    assert_eq!(changes, expected);
    assert_eq!(recs.len(), 21 + 9, "nothing more");
    let all = replay(&recs, &["id"]);
    let source = source_rows(&mut admin, &schema, "customers", &["id"]).await;
    assert_same(&all.state, &source, "A1");
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_scenario_a9_transaction_racing_a_chunk() {
    scenario_a9("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_scenario_a9_transaction_racing_a_chunk() {
    scenario_a9("mariadb").await;
}

/// A9: a transaction (INSERT 15213, UPDATE 2000, DELETE 1019) commits while the snapshot is
/// between chunks, its keys ahead of the cursor: the topic's final state is the
/// post-transaction state, carried by the chunks alone (the three changes are suppressed).
async fn scenario_a9(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "a9").await;
    if load_customers(&mut admin, &schema, "customers")
        .await
        .is_none()
    {
        return;
    }
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("a9", &schema, "customers");
    world.one_partition(std::slice::from_ref(&tp));
    let name = format!("{schema}.customers");
    let def = world.definition(
        "a9",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 5, "max_rows_per_second": 5}),
        "at_least_once",
        "a9",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("a9", Duration::from_secs(60), "first chunk", |s| {
            table_status(s, &name)["rows_done"]
                .as_u64()
                .is_some_and(|n| n >= 5)
        })
        .await;
    let c = qt(&schema, "customers");
    admin
        .query_drop(format!(
            "START TRANSACTION; \
             INSERT INTO {c} VALUES (15213, 'user_15213', 'Shanghai', '123567891234'); \
             UPDATE {c} SET address = 'Pittsburgh' WHERE id = 2000; \
             DELETE FROM {c} WHERE id = 1019; COMMIT"
        ))
        .await
        .unwrap();
    let st = world.status("a9").await.unwrap();
    let done = table_status(&st, &name)["rows_done"].as_u64().unwrap();
    assert!(
        table_status(&st, &name)["status"] == "in_progress" && done <= 15,
        "the transaction raced the snapshot (keys 1019, 2000, 15213 still ahead): {st}"
    );
    let st = world
        .wait_status("a9", Duration::from_secs(60), "streaming", |s| {
            s["state"] == "streaming"
        })
        .await;
    let suppressed = world
        .metric(st["owner"].as_u64().unwrap(), "a9", "snapshot_suppressed")
        .await;
    // the table's marker (on the control topic) follows its last chunk
    let marker_key = json!({ "snapshot_complete": &name });
    world
        .read_until(&marker_topic("a9"), Duration::from_secs(30), |rs| {
            parse(rs)
                .iter()
                .any(|r| r.key.as_ref() == Some(&marker_key))
        })
        .await;
    let recs = parse(&world.read(&tp).await);
    let r = replay(&recs, &["id"]);
    assert!(
        r.changes.is_empty(),
        "no separate change events: {:?}",
        r.changes
    );
    assert_eq!(suppressed, Some(3.0), "the three changes were suppressed");
    let mut want: BTreeMap<String, Value> = BTreeMap::new();
    for (n, id) in CUSTOMER_IDS.iter().enumerate() {
        let address = if *id == 2000 {
            "Pittsburgh"
        } else {
            "Shanghai"
        };
        if *id != 1019 {
            want.insert(
                json!({ "id": id }).to_string(),
                customer(*id, &format!("user_{}", n + 1), address),
            );
        }
    }
    want.insert(
        json!({"id": 15213}).to_string(),
        customer(15213, "user_15213", "Shanghai"),
    );
    assert_same(&r.state, &want, "A9 post-transaction state");
    assert!(r.reads.values().all(|n| *n == 1));
    assert_eq!(r.read_recs.len(), 21, "20 of the 21 plus 15213");
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_scenario_a12_a13_unsigned_keys_and_hostile_names() {
    scenario_a12_a13("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_scenario_a12_a13_unsigned_keys_and_hostile_names() {
    scenario_a12_a13("mariadb").await;
}

/// A12: BIGINT UNSIGNED keys on both sides of 2^63 chunked, every row exactly once, then
/// streamed changes of such keys. A13: a database and a table named with backquotes and
/// `; DROP TABLE …`: captured, reported verbatim, nothing executed.
async fn scenario_a12_a13(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let schema = format!("{}`; DROP TABLE victim; --", unique_name("a13"));
    let table = "t`; DROP TABLE victim; -- x";
    let mut admin = db.admin_conn().await;
    let t = qt(&schema, table);
    let keys: Vec<u64> = (0..10)
        .map(|i| (1u64 << 63) - 5 + i)
        .chain((0..10).map(|i| u64::MAX - i))
        .chain([7, 1 << 62])
        .collect();
    let values: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("({k}, 'r{i}')"))
        .collect();
    admin
        .query_drop(format!(
            "CREATE DATABASE {s}; CREATE TABLE {victim} (id INT PRIMARY KEY); \
             CREATE TABLE {t} (id BIGINT UNSIGNED PRIMARY KEY, name VARCHAR(20)); \
             INSERT INTO {t} VALUES {}",
            values.join(","),
            s = q(&schema),
            victim = qt(&schema, "victim"),
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("a12", &schema, table);
    world.one_partition(std::slice::from_ref(&tp));
    let name = format!("{schema}.{table}");
    let def = world.definition(
        "a12",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 3}),
        "at_least_once",
        "a12",
    );
    world.create_and_resume(def).await;
    world
        .wait_status("a12", Duration::from_secs(60), "streaming", |s| {
            s["state"] == "streaming"
        })
        .await;
    admin
        .query_drop(format!(
            "UPDATE {t} SET name = 'changed' WHERE id = {}; DELETE FROM {t} WHERE id = {}; \
             UPDATE {t} SET id = {} WHERE id = 7",
            u64::MAX,
            1u64 << 63,
            (1u64 << 63) + 100
        ))
        .await
        .unwrap();
    let recs = parse(
        &world
            .read_until(&tp, Duration::from_secs(30), |rs| {
                parse(rs)
                    .iter()
                    .filter(|r| r.op().is_some_and(|o| o != "r"))
                    .count()
                    >= 4
            })
            .await,
    );
    let r = replay(&recs, &["id"]);
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let read: Vec<u64> = r
        .read_recs
        .iter()
        .map(|x| x.value.as_ref().unwrap()["after"]["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        read, sorted,
        "A12: every unsigned key exactly once, in order"
    );
    assert_eq!(chunks(&r.read_recs).len(), keys.len().div_ceil(3));
    let ops: Vec<&str> = r.changes.iter().filter_map(Rec::op).collect();
    assert_eq!(ops, ["u", "d", "d", "c"], "update, delete, key change");
    let source = source_rows(&mut admin, &schema, table, &["id"]).await;
    assert_same(&r.state, &source, "A12");
    // A13: names verbatim in events and the marker; the victim is untouched
    for x in recs.iter().filter(|x| x.value.is_some()) {
        let v = x.value.as_ref().unwrap();
        assert_eq!(v["source"]["db"], schema.as_str());
        assert_eq!(v["source"]["table"], table);
    }
    let markers = world.markers("a12", &schema, table).await;
    assert_eq!(markers.len(), 1, "{markers:?}");
    let m = markers[0].value.as_ref().unwrap();
    assert_eq!(m["snapshot_complete"]["db"], schema.as_str());
    assert_eq!(m["snapshot_complete"]["table"], table);
    let victim: Option<u64> = admin
        .query_first(format!("SELECT COUNT(*) FROM {}", qt(&schema, "victim")))
        .await
        .unwrap();
    assert_eq!(victim, Some(0), "A13: nothing executed");
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// The chunk connection must reach the stream's server: the source address (a proxy here,
// a virtual IP or DNS name in production) starts pointing at another MySQL server, and the
// chunk reader's reconnect lands there while the stream stays on the first. The snapshot
// halts snapshot_source_mismatch instead of reading rows of a server it does not stream.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_chunk_reader_reaching_another_server_halts_source_mismatch() {
    let Some(db) = flavor_db("mysql") else { return };
    let Some(twin) = capstan_tests::mysql_twin() else {
        return;
    };
    let mut admin = db.admin_conn().await;
    let mut twin_admin = twin.admin_conn().await;
    let a: String = admin
        .query_first("SELECT @@server_uuid")
        .await
        .unwrap()
        .unwrap();
    let b: String = twin_admin
        .query_first("SELECT @@server_uuid")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(a, b, "the twin is another server");
    let schema = create_schema(&mut admin, "snapm").await;
    seed_big(&mut admin, &schema, "t", 3000).await;
    // the same table on the twin, so only the identity check can tell the two apart
    let schema_on_twin = create_schema(&mut twin_admin, "snapm").await;
    twin_admin
        .query_drop(format!("DROP DATABASE {}", q(&schema_on_twin)))
        .await
        .unwrap();
    twin_admin
        .query_drop(format!("CREATE DATABASE {}", q(&schema)))
        .await
        .unwrap();
    seed_big(&mut twin_admin, &schema, "t", 3000).await;
    let proxy = capstan_tests::switch_proxy::SwitchProxy::start(db.port).await;
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    let name = format!("{schema}.t");
    let mut def = world.definition(
        "mismatch",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 100, "max_rows_per_second": 300}),
        "at_least_once",
        "sm",
    );
    def["source"]["port"] = json!(proxy.port);
    world.create_and_resume(def).await;
    world
        .wait_status("mismatch", Duration::from_secs(60), "chunks read", |s| {
            table_status(s, &name)["rows_done"].as_u64() > Some(0)
        })
        .await;
    // from now on the address reaches the twin; the chunk connection (not the dump) is cut
    proxy.switch_to(twin.port);
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
        if ours && !command.starts_with("Binlog Dump") {
            admin.query_drop(format!("KILL {id}")).await.unwrap();
            killed += 1;
        }
    }
    assert!(killed >= 1, "the chunk connection was found and cut");
    let st = world
        .wait_status("mismatch", Duration::from_secs(60), "failed", |s| {
            s["state"] == "failed"
        })
        .await;
    assert_eq!(st["reason"], "snapshot_source_mismatch", "{st}");
    assert!(
        !proxy.upstream_ports(twin.port).is_empty(),
        "the reconnect really reached the twin"
    );
    let done = table_status(&st, &name)["rows_done"].as_u64().unwrap();
    assert!(done < 3000, "halted mid-snapshot: {st}");
    for (conn, s) in [(&mut admin, &schema), (&mut twin_admin, &schema)] {
        conn.query_drop(format!("DROP DATABASE {}", q(s)))
            .await
            .unwrap();
    }
}
