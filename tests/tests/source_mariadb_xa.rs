//! Two-phase XA against the MariaDB dev server, the contract of `source_mysql_xa.rs`:
//! `xa: refuse` halts at the prepare; `xa: track` delivers a prepared transaction once at its
//! XA COMMIT and nothing at its XA ROLLBACK; a one-phase XA COMMIT is an ordinary transaction;
//! a prepare older than the source resolves row-lessly. And MariaDB's own question: its
//! checkpoint (one GTID per domain) is held back before a pending prepare, so a restart from it
//! still has the prepare's rows, a restart from it and the processed position beside it
//! repeats nothing either, and a reconnect repeats nothing.
//!
//! Every test takes the whole server (an XA PREPARE halts every `xa: refuse` source that sees
//! it): the write side of SERVER_WIDE, and every test thread under nextest
//! (`.config/nextest.toml`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use capstan_connectors::mysql::{AssemblerConfig, BinlogSource, StartPosition, XaMode};
use capstan_core::change::{Op, Transaction, TransactionGtid, Value};
use capstan_core::position::{MariadbGtid, MariadbGtidPosition, Position};
use capstan_tests::{mariadb, unique_name, DbEnv};
use mysql_async::prelude::*;
use source_common::*;

/// Every XID these tests make starts with this, so a run can roll back what an earlier failed
/// run left prepared (MariaDB keeps a prepared XA after its connection closes).
const XID_PREFIX: &str = "capstan_xa_test";

fn tracking(schema: &str) -> AssemblerConfig {
    AssemblerConfig {
        xa: XaMode::track(),
        ..only(schema, &["t"])
    }
}

/// A schema with table `t`, after rolling back XIDs earlier runs left prepared.
async fn setup(db: &DbEnv, prefix: &str) -> (mysql_async::Conn, String) {
    let mut admin = db.admin_conn().await;
    let rows: Vec<mysql_async::Row> = admin.query("XA RECOVER FORMAT='SQL'").await.unwrap();
    for row in rows {
        let data: String = row.get(3).unwrap();
        if data.starts_with(&format!("'{XID_PREFIX}")) {
            admin
                .query_drop(format!("XA ROLLBACK {data}"))
                .await
                .unwrap();
        }
    }
    let schema = unique_name(prefix);
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    (admin, schema)
}

fn new_xid() -> String {
    unique_name(XID_PREFIX)
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

async fn insert(conn: &mut mysql_async::Conn, schema: &str, id: i32) {
    conn.query_drop(format!("INSERT INTO `{schema}`.t VALUES ({id})"))
        .await
        .unwrap();
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

fn maria(p: &Position) -> &MariadbGtidPosition {
    let Position::Mariadb(p) = p else {
        panic!("mariadb position")
    };
    p
}

fn maria_gtid(g: &TransactionGtid) -> MariadbGtid {
    let TransactionGtid::Mariadb(g) = g else {
        panic!("mariadb gtid")
    };
    *g
}

async fn drop_schema(admin: &mut mysql_async::Conn, schema: &str) {
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn refuse_halts_at_the_prepare() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_refuse").await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    insert(&mut admin, &schema, 1).await;
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![1]);
    let mut xa = db.admin_conn().await;
    let xid = new_xid();
    prepare(&mut xa, &schema, &xid, &[2]).await;
    let err = halt(&mut source).await;
    assert_eq!(err.code(), "unsupported_transaction_shape", "{err}");
    // the position never covered the prepare
    let after_prepare = mariadb_binlog_pos(&mut admin).await;
    assert!(!after_prepare.is_subset(maria(source.position())));
    xa.query_drop(format!("XA ROLLBACK '{xid}'")).await.unwrap();
    drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn prepare_then_commit_delivers_once_at_the_commit() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_commit").await;
    let mut source = start_current(&db, tracking(&schema)).await;
    let mut xa = db.admin_conn().await;
    let xid = new_xid();
    prepare(&mut xa, &schema, &xid, &[1, 2]).await;
    insert(&mut admin, &schema, 10).await;
    // the prepare delivers nothing: the next transaction is the plain insert
    let plain = next_txn(&mut source, &schema).await;
    assert_eq!(ids(&plain), vec![10]);
    // the checkpoint stays before the prepare; what was handed out is processed
    let plain_gtid = maria_gtid(&plain.gtid);
    assert!(maria(source.processed()).contains(&plain_gtid));
    assert!(!maria(source.position()).contains(&plain_gtid));
    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    let after_commit = mariadb_binlog_pos(&mut admin).await;
    insert(&mut admin, &schema, 11).await;
    let t = next_txn(&mut source, &schema).await;
    assert_eq!(ids(&t), vec![1, 2]);
    let [prepared] = t.also_covers.as_slice() else {
        panic!("{:?}", t.also_covers)
    };
    let prepared = maria_gtid(prepared);
    assert!(prepared.seq < plain_gtid.seq);
    // resolved: the checkpoint covers the prepare, the insert between and the commit
    for g in [prepared, plain_gtid, maria_gtid(&t.gtid)] {
        assert!(maria(source.position()).contains(&g), "{g}");
    }
    // exactly once: the next one is the plain insert, and the position covers everything
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![11]);
    assert!(after_commit.is_subset(maria(source.position())));
    assert_eq!(source.position(), source.processed());
    drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn prepare_then_rollback_delivers_nothing_and_covers_both_gtids() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_rollback").await;
    let mut source = start_current(&db, tracking(&schema)).await;
    let before = mariadb_binlog_pos(&mut admin).await;
    let mut xa = db.admin_conn().await;
    let xid = new_xid();
    prepare(&mut xa, &schema, &xid, &[1]).await;
    xa.query_drop(format!("XA ROLLBACK '{xid}'")).await.unwrap();
    let after = mariadb_binlog_pos(&mut admin).await;
    insert(&mut admin, &schema, 20).await;
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![20]);
    // the prepare's and the rollback's GTIDs (and whatever ran meanwhile) are covered
    assert!(after.is_subset(maria(source.position())));
    assert!(!after.is_subset(&before));
    drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn a_prepare_older_than_the_source_resolves_rowlessly() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_recovered").await;
    let (committed, rolled_back) = (new_xid(), new_xid());
    let mut xa = db.admin_conn().await;
    prepare(&mut xa, &schema, &committed, &[1]).await;
    let mut xa2 = db.admin_conn().await;
    prepare(&mut xa2, &schema, &rolled_back, &[2]).await;
    let mut source = start_current(&db, tracking(&schema)).await;
    xa.query_drop(format!("XA COMMIT '{committed}'"))
        .await
        .unwrap();
    xa2.query_drop(format!("XA ROLLBACK '{rolled_back}'"))
        .await
        .unwrap();
    let after = mariadb_binlog_pos(&mut admin).await;
    insert(&mut admin, &schema, 30).await;
    // no halt, no rows for the resolutions (their rows predate the source's position)
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![30]);
    assert!(after.is_subset(maria(source.position())));
    drop_schema(&mut admin, &schema).await;
}

#[tokio::test]
async fn one_phase_xa_commit_is_an_ordinary_transaction() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_one_phase").await;
    let mut refusing = start_current(&db, only(&schema, &["t"])).await;
    let mut tracking_source = start_current(&db, tracking(&schema)).await;
    let xid = new_xid();
    admin
        .query_drop(format!(
            "XA START '{xid}'; INSERT INTO `{schema}`.t VALUES (40), (41); XA END '{xid}'; \
             XA COMMIT '{xid}' ONE PHASE"
        ))
        .await
        .unwrap();
    for source in [&mut refusing, &mut tracking_source] {
        let t = next_txn(source, &schema).await;
        assert_eq!(ids(&t), vec![40, 41]);
        assert!(t.also_covers.is_empty());
    }
    drop_schema(&mut admin, &schema).await;
}

/// A source dies with a prepare pending; a new one starts from its checkpoint. The checkpoint
/// was held before the prepare, so the new source sees the prepare again and delivers its rows
/// at the XA COMMIT; the domain's transactions after the prepare that the first source already
/// handed out come again (at-least-once, module documentation of `binlog_stream`).
#[tokio::test]
async fn restart_from_the_checkpoint_with_a_pending_prepare_delivers_it_at_the_commit() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_restart").await;
    let mut first = start_current(&db, tracking(&schema)).await;
    let before_prepare = mariadb_binlog_pos(&mut admin).await;
    let mut xa = db.admin_conn().await;
    let xid = new_xid();
    prepare(&mut xa, &schema, &xid, &[1, 2]).await;
    insert(&mut admin, &schema, 10).await;
    let plain = next_txn(&mut first, &schema).await;
    assert_eq!(ids(&plain), vec![10]);
    let checkpoint = first.position().clone();
    assert!(!maria(&checkpoint).contains(&maria_gtid(&plain.gtid)));
    drop(first);
    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    insert(&mut admin, &schema, 11).await;
    let mut second = BinlogSource::start(
        config(&db),
        StartPosition::Checkpoint(checkpoint.clone()),
        tracking(&schema),
    )
    .await
    .unwrap();
    // replayed: handed out before the checkpoint could cover it
    let again = next_txn(&mut second, &schema).await;
    assert_eq!(ids(&again), vec![10]);
    assert_eq!(again.gtid, plain.gtid);
    let t = next_txn(&mut second, &schema).await;
    assert_eq!(ids(&t), vec![1, 2]);
    let [prepared] = t.also_covers.as_slice() else {
        panic!("{:?}", t.also_covers)
    };
    // the checkpoint stood before the prepare, and no earlier than the server was then
    let prepared = maria_gtid(prepared);
    assert!(!maria(&checkpoint).contains(&prepared));
    assert!(before_prepare.is_subset(maria(&checkpoint)));
    assert_eq!(ids(&next_txn(&mut second, &schema).await), vec![11]);
    assert_eq!(second.position(), second.processed());
    drop_schema(&mut admin, &schema).await;
}

/// Two restarts with a prepare pending, each from the pair the previous source reported
/// (checkpoint and processed, `StartPosition::resume`): nothing already handed out comes
/// again, the second source still holds the checkpoint before the prepare (so the third finds
/// it too), and the prepare's rows come once, at its XA COMMIT. A processed position behind
/// its checkpoint is refused before anything is read.
#[tokio::test]
async fn restarts_from_checkpoint_and_processed_repeat_nothing_and_deliver_the_prepare_once() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_resume").await;
    let mut first = start_current(&db, tracking(&schema)).await;
    let mut xa = db.admin_conn().await;
    let xid = new_xid();
    prepare(&mut xa, &schema, &xid, &[1, 2]).await;
    insert(&mut admin, &schema, 10).await;
    let ten = next_txn(&mut first, &schema).await;
    assert_eq!(ids(&ten), vec![10]);
    let (checkpoint, processed) = (first.position().clone(), first.processed().clone());
    assert!(!maria(&checkpoint).contains(&maria_gtid(&ten.gtid)));
    assert!(maria(&processed).contains(&maria_gtid(&ten.gtid)));
    drop(first);

    let refused = BinlogSource::start(
        config(&db),
        StartPosition::resume(processed.clone(), Some(checkpoint.clone())),
        tracking(&schema),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), "processed_position_invalid", "{refused}");

    insert(&mut admin, &schema, 11).await;
    let mut second = BinlogSource::start(
        config(&db),
        StartPosition::resume(checkpoint.clone(), Some(processed.clone())),
        tracking(&schema),
    )
    .await
    .unwrap();
    // 10 was handed out already: the next one is 11
    assert_eq!(ids(&next_txn(&mut second, &schema).await), vec![11]);
    assert!(second.stats().skipped_already_processed >= 1);
    let (checkpoint2, processed2) = (second.position().clone(), second.processed().clone());
    // still held before the prepare, which the second source read again and pooled
    assert_eq!(checkpoint2, checkpoint);
    assert!(processed.is_subset(&processed2) && processed2 != processed);
    drop(second);

    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    insert(&mut admin, &schema, 12).await;
    let mut third = BinlogSource::start(
        config(&db),
        StartPosition::resume(checkpoint2, Some(processed2)),
        tracking(&schema),
    )
    .await
    .unwrap();
    let committed = next_txn(&mut third, &schema).await;
    assert_eq!(ids(&committed), vec![1, 2]);
    assert_eq!(committed.also_covers.len(), 1);
    assert_eq!(ids(&next_txn(&mut third, &schema).await), vec![12]);
    assert_eq!(third.position(), third.processed());
    drop_schema(&mut admin, &schema).await;
}

/// A reconnect with a prepare pending dumps from the held-back checkpoint: the prepare is
/// pooled again, and nothing already handed out comes twice.
#[tokio::test]
async fn reconnect_with_a_pending_prepare_repeats_nothing() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_reconnect").await;
    let mut source = start_current(&db, tracking(&schema)).await;
    let mut xa = db.admin_conn().await;
    let xid = new_xid();
    prepare(&mut xa, &schema, &xid, &[1, 2]).await;
    insert(&mut admin, &schema, 20).await;
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![20]);
    assert!(kill_dump_threads(&db).await >= 1);
    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    insert(&mut admin, &schema, 21).await;
    let t = next_txn(&mut source, &schema).await;
    assert_eq!(ids(&t), vec![1, 2]);
    assert_eq!(ids(&next_txn(&mut source, &schema).await), vec![21]);
    let stats = source.stats();
    assert!(stats.reconnects >= 1, "{stats:?}");
    assert!(stats.skipped_already_processed >= 1, "{stats:?}");
    assert_eq!(source.position(), source.processed());
    drop_schema(&mut admin, &schema).await;
}

/// Interleaved prepares in one domain: P0 and P1 are prepared, P0 is committed (delivered),
/// and the source restarts from the checkpoint P1 holds back. The dump replays P0's XA
/// COMMIT, whose prepare lies before the checkpoint and is resolved (not in XA RECOVER):
/// already handed out, it resolves row-lessly instead of halting, and P1 is delivered once
/// at its commit.
#[tokio::test]
async fn restart_replays_the_resolution_of_an_earlier_interleaved_prepare() {
    let Some(db) = mariadb() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "mxa_interleaved").await;
    let mut first = start_current(&db, tracking(&schema)).await;
    let (mut xa0, mut xa1) = (db.admin_conn().await, db.admin_conn().await);
    let (p0, p1) = (new_xid(), new_xid());
    prepare(&mut xa0, &schema, &p0, &[1]).await;
    // a commit between the two prepares: the checkpoint P1 holds back is past P0's prepare
    insert(&mut admin, &schema, 5).await;
    assert_eq!(ids(&next_txn(&mut first, &schema).await), vec![5]);
    prepare(&mut xa1, &schema, &p1, &[2]).await;
    xa0.query_drop(format!("XA COMMIT '{p0}'")).await.unwrap();
    let committed = next_txn(&mut first, &schema).await;
    assert_eq!(ids(&committed), vec![1]);
    insert(&mut admin, &schema, 10).await;
    assert_eq!(ids(&next_txn(&mut first, &schema).await), vec![10]);
    let (checkpoint, processed) = (first.position().clone(), first.processed().clone());
    // held back before P1: past P0's prepare, before P0's commit
    assert!(maria(&checkpoint).contains(&maria_gtid(&committed.also_covers[0])));
    assert!(!maria(&checkpoint).contains(&maria_gtid(&committed.gtid)));
    assert!(maria(&processed).contains(&maria_gtid(&committed.gtid)));
    drop(first);

    let mut second = BinlogSource::start(
        config(&db),
        StartPosition::resume(checkpoint, Some(processed)),
        tracking(&schema),
    )
    .await
    .unwrap();
    xa1.query_drop(format!("XA COMMIT '{p1}'")).await.unwrap();
    insert(&mut admin, &schema, 11).await;
    // P0's commit and row 10 are not handed out again; P1 comes once, at its commit
    assert_eq!(ids(&next_txn(&mut second, &schema).await), vec![2]);
    assert_eq!(ids(&next_txn(&mut second, &schema).await), vec![11]);
    assert!(second.stats().skipped_already_processed >= 2);
    assert_eq!(second.position(), second.processed());
    drop_schema(&mut admin, &schema).await;
}
