//! `xa: track` against the MySQL dev server: a two-phase XA transaction is delivered once at
//! its XA COMMIT, nothing at its XA ROLLBACK (the position covering both GTIDs), and a prepare
//! made before the source started resolves row-lessly. Its own binary: an XA PREPARE halts
//! every `xa: refuse` source that sees it, and cargo runs test binaries one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use capstan_connectors::mysql::{AssemblerConfig, BinlogSource, XaMode};
use capstan_core::change::{Op, Transaction, TransactionGtid, Value};
use capstan_core::position::{GtidSet, Position};
use capstan_tests::{mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use source_common::*;

/// The tests compare the server's executed set with the position: one at a time.
static XA_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn tracking(schema: &str) -> AssemblerConfig {
    AssemblerConfig {
        xa: XaMode::track(),
        ..only(schema, &["t"])
    }
}

async fn setup(db: &DbEnv, prefix: &str) -> (mysql_async::Conn, String) {
    let schema = unique_name(prefix);
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    (admin, schema)
}

async fn prepare(conn: &mut mysql_async::Conn, schema: &str, xid: &str, ids: &[i32]) {
    conn.query_drop(format!("XA START '{xid}'")).await.unwrap();
    for id in ids {
        conn.query_drop(format!("INSERT INTO `{schema}`.t VALUES ({id})"))
            .await
            .unwrap();
    }
    conn.query_drop(format!("XA END '{xid}'")).await.unwrap();
    conn.query_drop(format!("XA PREPARE '{xid}'"))
        .await
        .unwrap();
}

async fn executed(conn: &mut mysql_async::Conn) -> GtidSet {
    let s: String = conn
        .query_first("SELECT @@global.gtid_executed")
        .await
        .unwrap()
        .unwrap();
    s.parse().unwrap()
}

fn ids(t: &Transaction) -> Vec<i64> {
    t.changes
        .iter()
        .map(|c| {
            assert_eq!(c.op, Op::Insert);
            match c.after.as_ref().unwrap().get_by_name("id") {
                Some(Value::Int(i)) => *i,
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

fn position_set(source: &BinlogSource) -> GtidSet {
    let Position::Mysql(set) = source.position() else {
        panic!("mysql position")
    };
    set.clone()
}

#[tokio::test]
async fn prepare_then_commit_delivers_once_at_the_commit() {
    let Some(db) = mysql() else { return };
    let _one = XA_TESTS.lock().await;
    let (mut admin, schema) = setup(&db, "xa_commit").await;
    let mut source = start_current(&db, tracking(&schema)).await;
    let mut xa = db.admin_conn().await;
    let xid = unique_name("xid");
    prepare(&mut xa, &schema, &xid, &[1, 2]).await;
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (10)"))
        .await
        .unwrap();
    // the prepare delivers nothing: the next transaction is the plain insert
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![10]);
    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    let after_commit = executed(&mut admin).await;
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (11)"))
        .await
        .unwrap();
    let t = next_txn(&mut source, &schema).await;
    assert_eq!(ids(&t), vec![1, 2]);
    assert_eq!(t.also_covers.len(), 1);
    let set = position_set(&source);
    for g in std::iter::once(&t.gtid).chain(&t.also_covers) {
        let TransactionGtid::Mysql(g) = g else {
            panic!("mysql gtid")
        };
        assert!(set.contains(g));
    }
    // exactly once: the next one is the plain insert, and the position covers everything
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![11]);
    assert!(after_commit.is_subset(&position_set(&source)));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn prepare_then_rollback_delivers_nothing_and_covers_both_gtids() {
    let Some(db) = mysql() else { return };
    let _one = XA_TESTS.lock().await;
    let (mut admin, schema) = setup(&db, "xa_rollback").await;
    let mut source = start_current(&db, tracking(&schema)).await;
    let before = executed(&mut admin).await;
    let mut xa = db.admin_conn().await;
    let xid = unique_name("xid");
    prepare(&mut xa, &schema, &xid, &[1]).await;
    xa.query_drop(format!("XA ROLLBACK '{xid}'")).await.unwrap();
    let after = executed(&mut admin).await;
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (20)"))
        .await
        .unwrap();
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![20]);
    let set = position_set(&source);
    // the prepare's and the rollback's GTIDs (and whatever ran meanwhile) are covered
    assert!(after.is_subset(&set));
    assert!(!after.is_subset(&before));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_prepare_older_than_the_source_resolves_rowlessly() {
    let Some(db) = mysql() else { return };
    let _one = XA_TESTS.lock().await;
    let (mut admin, schema) = setup(&db, "xa_recovered").await;
    let mut xa = db.admin_conn().await;
    let (committed, rolled_back) = (unique_name("xid"), unique_name("xid"));
    prepare(&mut xa, &schema, &committed, &[1]).await;
    // a prepared XA holds its connection; the second one needs its own
    let mut xa2 = db.admin_conn().await;
    prepare(&mut xa2, &schema, &rolled_back, &[2]).await;
    let mut source = start_current(&db, tracking(&schema)).await;
    xa.query_drop(format!("XA COMMIT '{committed}'"))
        .await
        .unwrap();
    xa2.query_drop(format!("XA ROLLBACK '{rolled_back}'"))
        .await
        .unwrap();
    let after = executed(&mut admin).await;
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (30)"))
        .await
        .unwrap();
    // no halt, no rows for the resolutions (their rows predate the source's position)
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![30]);
    assert!(after.is_subset(&position_set(&source)));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
