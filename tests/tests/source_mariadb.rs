//! The live binlog source against the MariaDB 10.11 dev server: GTID dump from a GTID
//! position, decode, assemble, liveness and the fail-closed halts. Every test works in its
//! own schema and streams from the server's current position, filtered to its own tables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use capstan_core::change::{Op, TransactionGtid, Value};
use capstan_core::position::{Flavor, Position};
use capstan_tests::{mariadb, unique_name};
use mysql_async::prelude::*;
use source_common::*;

#[tokio::test]
async fn streams_inserts_updates_and_deletes() {
    let Some(db) = mariadb() else { return };
    let schema = unique_name("src_dml");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, v VARCHAR(20))"
        ))
        .await
        .unwrap();
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    assert_eq!(source.flavor(), Flavor::Mariadb);
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
    let after = upd.changes[0].after.as_ref().unwrap();
    assert!(matches!(after.get_by_name("v"), Some(Value::Text { bytes, .. }) if bytes == b"z"));
    let del = next_txn(&mut source, &schema).await;
    assert_eq!(del.changes[0].op, Op::Delete);
    let TransactionGtid::Mariadb(g) = del.gtid else {
        panic!("mariadb gtid")
    };
    let Position::Mariadb(pos) = source.position() else {
        panic!("mariadb position")
    };
    assert!(pos.contains(&g));
    let binlog_pos: String = admin
        .query_first("SELECT @@global.gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let binlog_pos = Position::parse(Flavor::Mariadb, &binlog_pos).unwrap();
    assert!(source.position().is_subset(&binlog_pos));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
