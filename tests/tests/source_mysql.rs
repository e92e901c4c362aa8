//! The live binlog source against the MySQL 9.x dev server: connect, preconditions, dump,
//! decode, assemble, liveness and the fail-closed halts. Every test works in its own schema
//! and streams from the server's current position, filtered to its own tables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use capstan_core::change::{Op, Value};
use capstan_core::position::Position;
use capstan_tests::{mysql, unique_name};
use mysql_async::prelude::*;
use source_common::*;

#[tokio::test]
async fn streams_inserts_updates_and_deletes() {
    let Some(db) = mysql() else { return };
    let schema = unique_name("src_dml");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, v VARCHAR(20))"
        ))
        .await
        .unwrap();
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop(format!(
            "INSERT INTO `{schema}`.t VALUES (1,'a'),(2,'b'),(3,'c'); \
             UPDATE `{schema}`.t SET v='z' WHERE id=2; DELETE FROM `{schema}`.t WHERE id=3"
        ))
        .await
        .unwrap();
    let ins = next_txn(&mut source, &schema).await;
    assert_eq!(ins.changes.len(), 3);
    assert!(ins.changes.iter().all(|c| c.op == Op::Insert));
    let row = ins.changes[1].after.as_ref().unwrap();
    assert_eq!(row.get_by_name("id"), Some(&Value::Int(2)));
    let upd = next_txn(&mut source, &schema).await;
    assert_eq!(upd.changes[0].op, Op::Update);
    let before = upd.changes[0].before.as_ref().unwrap();
    let after = upd.changes[0].after.as_ref().unwrap();
    assert!(matches!(before.get_by_name("v"), Some(Value::Text { bytes, .. }) if bytes == b"b"));
    assert!(matches!(after.get_by_name("v"), Some(Value::Text { bytes, .. }) if bytes == b"z"));
    let del = next_txn(&mut source, &schema).await;
    assert_eq!(del.changes[0].op, Op::Delete);
    assert!(del.changes[0].after.is_none());
    assert_eq!(&*del.changes[0].key, &[0]);
    // the processed position covers what was handed out, and only what the server executed
    let executed: String = admin
        .query_first("SELECT @@global.gtid_executed")
        .await
        .unwrap()
        .unwrap();
    let executed = Position::parse(source.flavor(), &executed).unwrap();
    assert!(source.position().is_subset(&executed));
    let Position::Mysql(set) = source.position() else {
        panic!("mysql position")
    };
    let capstan_core::change::TransactionGtid::Mysql(g) = &del.gtid else {
        panic!("mysql gtid")
    };
    assert!(set.contains(g));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
