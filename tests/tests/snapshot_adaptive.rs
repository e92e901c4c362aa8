//! A snapshot without `chunk_size` sizes its chunks per table (issue #7 benchmark follow-up,
//! `capstan_core::snapshot::ChunkSizer`): the first chunk asks for 4096 rows, later ones adapt
//! to the read rate (at most fourfold growth per chunk), on MariaDB every chunk after the first
//! is read ahead on a second connection while the one before is published (MySQL's lock
//! capture does not read ahead), and the topic still holds
//! every row exactly once, equal to the table. Three real workers, both dev servers, the dev
//! services' real Kafka broker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::time::Duration;

use capstan_core::snapshot::{FIRST_CHUNK_ROWS, MAX_ADAPTIVE_ROWS, MAX_GROWTH, MIN_CHUNK_ROWS};
use mysql_async::prelude::*;
use serde_json::json;
use snapshot_common::*;

const ROWS: u64 = 60_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_adaptive_chunks_read_every_row_once() {
    adaptive("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_adaptive_chunks_read_every_row_once() {
    adaptive("mariadb").await;
}

async fn adaptive(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "snapa").await;
    seed_big(&mut admin, &schema, "big", ROWS).await;
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let topic = topic("sa", &schema, "big");
    world.one_partition(std::slice::from_ref(&topic));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &topic);
    // no chunk_size: adaptive
    let def = world.definition(
        "big",
        &[format!("{schema}.big")],
        json!({"mode": "initial"}),
        "at_least_once",
        "sa",
    );
    world.create_and_resume(def).await;
    let done = world
        .wait_status("big", Duration::from_secs(300), "snapshot complete", |s| {
            table_status(s, &format!("{schema}.big"))["status"] == "complete"
        })
        .await;

    let recs = tail
        .through_sentinel(&mut admin, &schema, "big", Duration::from_secs(120))
        .await;
    // no writers, no throttle: every chunk after the first was read ahead, on the second
    // connection, while the one before was published, and none was stale (the gauges are
    // set after the chunk's progress: read once the sentinel is through)
    let owner = done["owner"].as_u64().unwrap();
    let [used, stale, wasted] = world.read_ahead(owner, "big").await;
    let source = source_rows(&mut admin, &schema, "big", &["id"]).await;
    let replayed = replay(&recs, &["id"]);
    assert_same(&replayed.state, &source, flavor);
    let dups: Vec<_> = replayed.reads.iter().filter(|(_, n)| **n != 1).collect();
    assert!(dups.is_empty(), "keys read more than once: {dups:?}");
    assert_eq!(replayed.read_recs.len() as u64, ROWS);

    let chunks = chunks(&replayed.read_recs);
    let sizes: Vec<u64> = chunks.iter().map(|(_, n)| *n as u64).collect();
    eprintln!("{flavor}: adaptive chunk sizes {sizes:?}, read ahead {used} used, {stale} stale, {wasted} wasted");
    // MySQL's lock capture never reads ahead
    let ahead = if flavor == "mariadb" {
        sizes.len() as u64 - 1
    } else {
        0
    };
    assert_eq!(
        (used, stale, wasted),
        (ahead, 0, 0),
        "read-ahead outcomes for {sizes:?}"
    );
    assert_eq!(sizes[0], u64::from(FIRST_CHUNK_ROWS), "{sizes:?}");
    let full = &sizes[..sizes.len() - 1];
    // the size really adapted (grew on a fast read, or shrank on a slow one)
    assert!(
        full.iter().any(|&n| n != u64::from(FIRST_CHUNK_ROWS)),
        "every chunk had the first size: {sizes:?}"
    );
    for pair in full.windows(2) {
        assert!(pair[1] <= pair[0] * u64::from(MAX_GROWTH), "{sizes:?}");
    }
    let bounds = u64::from(MIN_CHUNK_ROWS)..=u64::from(MAX_ADAPTIVE_ROWS);
    assert!(full.iter().all(|n| bounds.contains(n)), "{sizes:?}");
    // chunk ids count the rows before them
    let mut offset = 0u64;
    for (position, n) in &chunks {
        assert_eq!(position, &format!("snapshot:{schema}.big/{offset}"));
        offset += *n as u64;
    }
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
