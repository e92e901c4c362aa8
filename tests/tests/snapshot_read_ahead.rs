//! `ChunkPrefetch` against both dev servers: the next chunk read ahead on a second connection
//! is used only when it is the chunk wanted and the stream's processed position is still
//! inside its G; a write the stream processed after its G makes it stale, a different chunk
//! wanted wastes it, and a connection that reaches another server is never used.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use std::time::Duration;

use capstan_connectors::mysql::snapshot::{ChunkPrefetch, KeyPart, SnapshotReader};
use capstan_core::change::TableId;
use capstan_tests::{mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use source_common::*;

#[tokio::test]
async fn a_chunk_read_ahead_is_used_only_inside_its_position() {
    for db in [mysql(), mariadb()].into_iter().flatten() {
        read_ahead(&db).await;
    }
}

async fn read_ahead(db: &DbEnv) {
    let schema = unique_name("snap_ahead");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; USE `{schema}`; \
             CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL); \
             INSERT INTO t VALUES (1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0),(8,0),(9,0),(10,0),\
             (11,0),(12,0),(13,0),(14,0),(15,0),(16,0),(17,0),(18,0),(19,0),(20,0)"
        ))
        .await
        .unwrap();
    let config = config(db);
    let mut reader = SnapshotReader::open(&config).await.unwrap();
    let identity = reader.server_identity().await.unwrap();
    let t = reader
        .describe(&TableId::new(schema.clone(), "t"))
        .await
        .unwrap();
    let first = reader.read_chunk(&t, None, 5).await.unwrap();
    let after = |n: i64| vec![KeyPart::Int(n)];
    assert_eq!(t.key.key_of(first.rows.last().unwrap()).unwrap(), after(5));
    let mut ahead = ChunkPrefetch::new();

    // used: the stream is still at the first chunk's G
    ahead.start(&config, &identity, &t, after(5), 5);
    let (chunk, _) = ahead
        .take(&t.id, Some(&after(5)), 5, &first.position)
        .await
        .expect("the chunk read ahead");
    assert_eq!(chunk.rows.len(), 5);
    assert_eq!(
        t.key.key_of(&chunk.rows[0]).unwrap(),
        after(6),
        "{}",
        db.name
    );
    assert!(first.position.is_subset(&chunk.position));
    assert_eq!((ahead.used, ahead.stale, ahead.wasted), (1, 0, 0));

    // stale: a write after the read-ahead's G that the stream has processed
    ahead.start(&config, &identity, &t, after(10), 5);
    // the read ahead is done long before this (5 rows on an open connection)
    tokio::time::sleep(Duration::from_secs(2)).await;
    admin
        .query_drop(format!("UPDATE `{schema}`.t SET v = 1 WHERE id = 12"))
        .await
        .unwrap();
    let processed = reader.executed_position().await.unwrap();
    assert!(ahead
        .take(&t.id, Some(&after(10)), 5, &processed)
        .await
        .is_none());
    assert_eq!((ahead.used, ahead.stale, ahead.wasted), (1, 1, 0));
    // read now, it has the write
    let fresh = reader.read_chunk(&t, Some(&after(10)), 5).await.unwrap();
    assert!(processed.is_subset(&fresh.position), "{}", db.name);

    // after a stale one, the next chunk is not read ahead (the backoff)
    ahead.start(&config, &identity, &t, after(10), 5);
    assert!(!ahead.is_pending());

    // wasted: another chunk is wanted (another cursor, another size)
    ahead.start(&config, &identity, &t, after(10), 5);
    assert!(ahead.is_pending());
    assert!(ahead
        .take(&t.id, Some(&after(11)), 5, &fresh.position)
        .await
        .is_none());
    ahead.start(&config, &identity, &t, after(10), 5);
    assert!(ahead
        .take(&t.id, Some(&after(10)), 4, &fresh.position)
        .await
        .is_none());
    assert_eq!((ahead.used, ahead.stale, ahead.wasted), (1, 1, 2));

    // a new connection must reach the stream's server
    let mut elsewhere = ChunkPrefetch::new();
    elsewhere.start(&config, "another-server", &t, after(10), 5);
    assert!(elsewhere
        .take(&t.id, Some(&after(10)), 5, &fresh.position)
        .await
        .is_none());
    assert_eq!(
        (elsewhere.used, elsewhere.stale, elsewhere.wasted),
        (0, 0, 1)
    );

    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
