//! `ParallelReads` and `KeyRanges` against both dev servers (ADR-0005, *Parallel reads*):
//! rounds of bounded key ranges read at once on connections of their own tile the table —
//! every row once, in key order — whatever the keys' spread (a dense stretch cuts a range
//! short, a sparse one leaves ranges nearly empty); a bounded chunk never claims the table's
//! end and reports the bound it covers; a range's position is its own; a round's extra
//! connections are kept and bounded; a connection reaching another server is never used.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use std::collections::BTreeSet;

use capstan_connectors::mysql::snapshot::{
    KeyPart, KeyRanges, ParallelReads, RangeRead, ReaderOptions, SnapshotReader,
};
use capstan_core::change::{TableId, Value};
use capstan_tests::{mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use source_common::*;

#[tokio::test]
async fn parallel_ranges_tile_the_table_whatever_the_key_spread() {
    for db in [mysql(), mariadb()].into_iter().flatten() {
        tile(&db).await;
    }
}

/// Keys: 1..=300 (dense), then every 1000th up to 300,000 (sparse), then 400,001..=400,600
/// (dense again), and negative ones below zero: 1,200 rows.
fn keys() -> Vec<i64> {
    let mut k: Vec<i64> = (-300..0).map(|i| i * 7).collect();
    k.extend(1..=300);
    k.extend((1..=300).map(|i| i * 1000));
    k.extend(400_001..=400_300);
    k.sort_unstable();
    k.dedup();
    k
}

async fn tile(db: &DbEnv) {
    let schema = unique_name("snap_par");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t \
             (id BIGINT PRIMARY KEY, v VARCHAR(16) NOT NULL)"
        ))
        .await
        .unwrap();
    let expected = keys();
    let values: Vec<String> = expected.iter().map(|k| format!("({k}, 'v{k}')")).collect();
    admin
        .query_drop(format!(
            "INSERT INTO `{schema}`.t VALUES {}",
            values.join(",")
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
    assert!(KeyRanges::splits(&t.key));
    let mut pool = ParallelReads::with_options(ReaderOptions::default());
    let mut ranges = KeyRanges::new();
    let (asked, parallel) = (40u32, 4usize);
    let mut after: Option<Vec<KeyPart>> = None;
    let mut seen: Vec<i64> = Vec::new();
    let (mut rounds, mut cut, mut bounded_whole) = (0, 0, 0);
    'pass: loop {
        rounds += 1;
        assert!(rounds < 500, "{}: no progress", db.name);
        let last = reader.last_key(&t).await.unwrap();
        assert_eq!(last, Some(vec![KeyPart::Int(400_300)]));
        let bounds = match &after {
            Some(a) => ranges.bounds(a, asked, parallel, last.as_deref().unwrap()),
            None => Vec::new(),
        };
        let reads = RangeRead::consecutive(&t, after.clone(), bounds, asked);
        let outcomes = pool.read_all(&mut reader, &config, &identity, &reads).await;
        assert_eq!(outcomes.len(), reads.len());
        assert!(pool.connections() < parallel, "{}", db.name);
        for (read, outcome) in reads.iter().zip(outcomes) {
            let (chunk, _) = outcome.unwrap();
            assert!(chunk.rows.len() <= asked as usize);
            let ids: Vec<i64> = chunk
                .rows
                .iter()
                .map(|r| match r.get(0) {
                    Some(Value::Int(v)) => *v,
                    other => panic!("id {other:?}"),
                })
                .collect();
            // inside its range
            let lower = match read.after.as_deref() {
                Some([KeyPart::Int(v)]) => Some(*v),
                _ => None,
            };
            let upper = match read.upto.as_deref() {
                Some([KeyPart::Int(v)]) => Some(*v),
                _ => None,
            };
            assert!(ids
                .iter()
                .all(|k| lower.is_none_or(|l| *k > l) && upper.is_none_or(|u| *k <= u)));
            seen.extend(&ids);
            if read.upto.is_some() {
                assert!(!chunk.last, "a bounded range never ends the table");
                if chunk.covers_to.is_some() {
                    assert_eq!(chunk.covers_to, read.upto);
                    bounded_whole += 1;
                } else {
                    assert_eq!(ids.len(), asked as usize, "cut only when full");
                }
            } else {
                assert_eq!(chunk.covers_to, None);
            }
            if chunk.last {
                // the open read after ranges that end below the last key carries the last row
                assert_eq!(ids.last(), Some(&400_300), "{}", db.name);
                break 'pass;
            }
            if let (Some(f), Some(l)) = (chunk.rows.first(), chunk.rows.last()) {
                ranges.observe(
                    &t.key.key_of(f).unwrap(),
                    &t.key.key_of(l).unwrap(),
                    chunk.rows.len(),
                );
            }
            let whole = read.read_whole(&chunk);
            after = chunk
                .covers_to
                .clone()
                .or_else(|| chunk.rows.last().map(|r| t.key.key_of(r).unwrap()))
                .or(after);
            if !whole {
                cut += 1;
                break;
            }
        }
    }
    assert_eq!(seen, expected, "{}: every row once, in key order", db.name);
    assert!(cut > 0, "{}: a dense stretch cut a range short", db.name);
    assert!(bounded_whole > 0, "{}: bounded ranges read whole", db.name);
    assert_eq!(pool.connections(), parallel - 1, "{}", db.name);
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len());
    eprintln!(
        "{}: {} rows in {rounds} rounds, {cut} ranges cut short, {bounded_whole} read whole",
        db.name,
        seen.len()
    );

    // each range has its own position: a write between two rounds is in the later one's
    let first = reader
        .read_range(&t, None, Some(&[KeyPart::Int(0)]), 5)
        .await
        .unwrap();
    admin
        .query_drop(format!("UPDATE `{schema}`.t SET v = 'w' WHERE id = 400300"))
        .await
        .unwrap();
    let reads = [
        RangeRead {
            table: t.clone(),
            after: None,
            upto: Some(vec![KeyPart::Int(0)]),
            rows: 5,
        },
        RangeRead {
            table: t.clone(),
            after: Some(vec![KeyPart::Int(400_299)]),
            upto: Some(vec![KeyPart::Int(400_300)]),
            rows: 5,
        },
    ];
    let out = pool.read_all(&mut reader, &config, &identity, &reads).await;
    for o in &out {
        let (chunk, _) = o.as_ref().unwrap();
        assert!(first.position.is_subset(&chunk.position), "{}", db.name);
        assert!(!chunk.position.is_subset(&first.position), "{}", db.name);
    }
    let (last_range, _) = out[1].as_ref().unwrap();
    assert_eq!(last_range.rows.len(), 1);
    assert!(
        matches!(last_range.rows[0].get(1), Some(Value::Text { bytes, .. }) if bytes == b"w"),
        "{}: the later range holds the write",
        db.name
    );
    // a signed key's bound of the wrong shape is refused, not guessed
    assert!(reader
        .read_range(&t, None, Some(&[KeyPart::UInt(5)]), 5)
        .await
        .is_err());

    // a connection reaching another server is never used: the round fails
    let mut elsewhere = ParallelReads::with_options(ReaderOptions::default());
    let out = elsewhere
        .read_all(&mut reader, &config, "another-server", &reads)
        .await;
    assert!(out[0].is_ok() && out[1].is_err(), "{}", db.name);
    assert_eq!(elsewhere.connections(), 0);

    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
