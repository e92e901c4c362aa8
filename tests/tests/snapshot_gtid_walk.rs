#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! MariaDB (ADR-0006, Revision 2026-12-05): a snapshot chunk's position G is translated from
//! its read view's binlog point by walking the binlog events since the reader's previous
//! chunk, not by `BINLOG_GTID_POS` (which reads the point's file from its start). Proven live:
//! under concurrent writers (autocommit inserts and updates, and XA transactions, whose
//! `XA PREPARE` has its own GTID) and a binlog rotated every 2 s, every chunk's G equals
//! `BINLOG_GTID_POS` of its point, asked afterwards on another connection — hundreds of
//! points, across rotations — and the reader asked the server only for its first point.
//!
//! Red-capable: the walk is counted (a reader that asked the server for every chunk fails the
//! `walked` assertion), and consecutive points must differ in most chunks and cross files, so
//! the equality is not trivially that of an unchanging position.
//!
//! `SNAPSHOT_WALK_SECS` (20) scales the run. It writes ≈ 10⁵ transactions to the dev server and
//! rotates its binlog (visible to anything else using that server meanwhile).

mod source_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_connectors::mysql::snapshot::{KeyPart, SnapshotReader};
use capstan_core::change::TableId;
use capstan_core::position::{Flavor, Position};
use capstan_tests::{mariadb, unique_name, DbEnv};
use mysql_async::prelude::*;
use source_common::*;

const WRITERS: u32 = 6;
const ROWS: u32 = 400;
const CHUNK: u32 = 20;

async fn writer(db: DbEnv, schema: String, n: u32, stop: Arc<AtomicBool>) -> u64 {
    let mut conn = db.admin_conn().await;
    conn.query_drop(format!("USE `{schema}`")).await.unwrap();
    let mut done = 0u64;
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        if i.is_multiple_of(10) {
            // a prepared XA transaction, committed: two GTIDs (XA PREPARE, XA COMMIT)
            let xid = format!("'w{n}x{i}'");
            conn.query_drop(format!(
                "XA START {xid}; INSERT INTO u (w, seq) VALUES ({n}, {i}); XA END {xid}; \
                 XA PREPARE {xid}; XA COMMIT {xid}"
            ))
            .await
            .unwrap();
        } else if i.is_multiple_of(3) {
            conn.query_drop(format!(
                "UPDATE t SET v = v + 1 WHERE id = {}",
                (i * 7 + u64::from(n)) % u64::from(ROWS) + 1
            ))
            .await
            .unwrap();
        } else {
            conn.query_drop(format!("INSERT INTO u (w, seq) VALUES ({n}, {i})"))
                .await
                .unwrap();
        }
        done += 1;
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_walked_chunk_positions_equal_binlog_gtid_pos() {
    let Some(db) = mariadb() else { return };
    let secs: u64 = std::env::var("SNAPSHOT_WALK_SECS")
        .ok()
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(20);
    let schema = unique_name("snap_walk");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; USE `{schema}`; \
             CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; \
             CREATE TABLE u (id BIGINT AUTO_INCREMENT PRIMARY KEY, w INT, seq BIGINT) \
             ENGINE=InnoDB; \
             INSERT INTO t (id, v) WITH RECURSIVE s (n) AS \
             (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {ROWS}) SELECT n, 0 FROM s"
        ))
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|n| tokio::spawn(writer(db.clone(), schema.clone(), n, Arc::clone(&stop))))
        .collect();
    let rotator = {
        let db = db.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut conn = db.admin_conn().await;
            let mut rotations = 0u32;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_secs(2)).await;
                conn.query_drop("FLUSH BINARY LOGS").await.unwrap();
                rotations += 1;
            }
            rotations
        })
    };

    let mut reader = SnapshotReader::open(&config(&db)).await.unwrap();
    let table = reader
        .describe(&TableId::new(schema.clone(), "t"))
        .await
        .unwrap();
    // BINLOG_GTID_POS of each point, asked on another connection as the capstan account
    let mut check = db.capstan_conn().await;
    let started = Instant::now();
    let mut after: Option<Vec<KeyPart>> = None;
    let (mut chunks, mut moved, mut crossed) = (0u32, 0u32, 0u32);
    let mut files = std::collections::BTreeSet::new();
    let mut previous: Option<(String, Position)> = None;
    while started.elapsed() < Duration::from_secs(secs) {
        let chunk = reader
            .read_chunk(&table, after.as_deref(), CHUNK)
            .await
            .unwrap();
        let point = chunk
            .binlog_point
            .clone()
            .expect("mariadb has a binlog point");
        let server: Option<Option<String>> = check
            .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (&point.file, point.pos))
            .await
            .unwrap();
        let server = server.flatten().expect("the point is readable");
        let server = Position::parse(Flavor::Mariadb, &server).unwrap();
        assert_eq!(
            chunk.position, server,
            "chunk {chunks} at {}:{}",
            point.file, point.pos
        );
        if let Some((file, g)) = &previous {
            moved += u32::from(*g != chunk.position);
            crossed += u32::from(*file != point.file);
        }
        files.insert(point.file.clone());
        previous = Some((point.file, chunk.position));
        chunks += 1;
        after = if chunk.last {
            None
        } else {
            Some(table.key.key_of(chunk.rows.last().unwrap()).unwrap())
        };
    }
    stop.store(true, Ordering::Relaxed);
    let mut transactions = 0;
    for w in writers {
        transactions += w.await.unwrap();
    }
    let rotations = rotator.await.unwrap();
    let stats = reader.translation_stats();
    println!(
        "{chunks} chunks, {moved} moved, {crossed} across a rotation, {} files, \
         {transactions} writer transactions, {rotations} rotations; {stats:?}",
        files.len()
    );
    assert!(chunks >= 200, "only {chunks} chunks");
    assert!(
        moved * 2 > chunks,
        "the position moved in only {moved} of {chunks} chunks"
    );
    assert!(crossed >= 3, "only {crossed} chunks crossed a rotation");
    // the server translated only the first point; every later one was walked (or unchanged)
    assert_eq!(stats.by_server, 1, "{stats:?}");
    assert_eq!(stats.fallbacks, 0, "{stats:?}");
    assert_eq!(
        u64::from(chunks),
        stats.by_server + stats.walked + stats.unchanged
    );
    assert!(stats.walked * 2 > u64::from(chunks), "{stats:?}");
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

/// Without `BINLOG MONITOR` (`SHOW BINLOG EVENTS` refused) the reader falls back to
/// `BINLOG_GTID_POS` for that chunk and every later one, with the same positions.
#[tokio::test]
async fn mariadb_without_binlog_monitor_asks_binlog_gtid_pos() {
    let Some(db) = mariadb() else { return };
    let schema = unique_name("snap_walk_nomon");
    let user = unique_name("nomon");
    let password = unique_name("pw");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; USE `{schema}`; \
             CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; \
             INSERT INTO t VALUES (1, 0), (2, 0), (3, 0), (4, 0); \
             CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'; \
             GRANT SELECT ON `{schema}`.* TO '{user}'@'%'"
        ))
        .await
        .unwrap();
    let mut raw = raw_config(&db);
    raw.user = user.clone();
    raw.password = capstan_connectors::mysql::Password::new(password);
    let mut reader = SnapshotReader::open(&raw.validate().unwrap())
        .await
        .unwrap();
    let table = reader
        .describe(&TableId::new(schema.clone(), "t"))
        .await
        .unwrap();
    let mut check = db.capstan_conn().await;
    let mut after: Option<Vec<KeyPart>> = None;
    for i in 0..4 {
        // a write between chunks, so each point differs from the one before
        admin
            .query_drop(format!("UPDATE `{schema}`.t SET v = v + 1 WHERE id = 4"))
            .await
            .unwrap();
        let chunk = reader
            .read_chunk(&table, after.as_deref(), 1)
            .await
            .unwrap();
        let point = chunk.binlog_point.clone().unwrap();
        let server: Option<Option<String>> = check
            .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (&point.file, point.pos))
            .await
            .unwrap();
        let server = Position::parse(Flavor::Mariadb, &server.flatten().unwrap()).unwrap();
        assert_eq!(chunk.position, server, "chunk {i}");
        after = Some(table.key.key_of(chunk.rows.last().unwrap()).unwrap());
    }
    let stats = reader.translation_stats();
    // the second chunk tried to walk, was refused and fell back; then no more walks
    assert_eq!(stats.by_server, 4, "{stats:?}");
    assert_eq!(stats.fallbacks, 1, "{stats:?}");
    assert_eq!(
        (stats.walked, stats.unchanged, stats.events_read),
        (0, 0, 0)
    );
    admin
        .query_drop(format!("DROP USER '{user}'@'%'; DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
