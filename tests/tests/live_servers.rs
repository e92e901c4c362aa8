//! The dev servers exist, have the settings capstan depends on, and their positions parse with
//! capstan's position model: a write's GTID is a member of the executed set read afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capstan_core::position::{Gtid, GtidSet, MariadbGtid, MariadbGtidPosition, Uuid};
use capstan_tests::{mariadb, mysql, unique_name};
use mysql_async::prelude::*;

#[tokio::test]
async fn mysql_has_the_binlog_settings_capstan_needs() {
    let Some(db) = mysql() else { return };
    let mut conn = db.capstan_conn().await;
    let version: String = conn.query_first("SELECT VERSION()").await.unwrap().unwrap();
    assert!(version.starts_with("9."), "expected MySQL 9.x");
    let row: (String, String, String, String, String, String) = conn
        .query_first(
            "SELECT @@gtid_mode, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, \
             @@binlog_row_value_options, @@server_uuid",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.0, "ON");
    assert_eq!(row.1, "ROW");
    assert_eq!(row.2, "FULL");
    assert_eq!(row.3, "FULL");
    assert_eq!(row.4, "");
    Uuid::parse_at(&row.5, 0).expect("server_uuid parses");
}

#[tokio::test]
async fn mysql_capstan_account_is_least_privilege() {
    let Some(db) = mysql() else { return };
    let mut conn = db.capstan_conn().await;
    let grants: Vec<String> = conn.query("SHOW GRANTS").await.unwrap();
    let all = grants.join("\n");
    for p in [
        "REPLICATION SLAVE",
        "REPLICATION CLIENT",
        "SELECT",
        "LOCK TABLES",
        "XA_RECOVER_ADMIN",
    ] {
        assert!(all.contains(p), "capstan account lacks {p}");
    }
    for p in ["INSERT", "UPDATE", "DELETE", "ALL PRIVILEGES", "SUPER"] {
        assert!(!all.contains(p), "capstan account must not have {p}");
    }
    let denied = conn.query_drop("CREATE DATABASE capstan_should_fail").await;
    assert!(denied.is_err(), "capstan account must not be able to write");
}

async fn mysql_executed(conn: &mut mysql_async::Conn) -> GtidSet {
    let text: String = conn
        .query_first("SELECT @@global.gtid_executed")
        .await
        .unwrap()
        .unwrap();
    text.parse().expect("server's gtid_executed parses")
}

#[tokio::test]
async fn mysql_write_gtids_are_members_of_gtid_executed() {
    let Some(db) = mysql() else { return };
    let mut admin = db.admin_conn().await;
    let schema = unique_name("capstan_pos");
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    let uuid: String = admin
        .query_first("SELECT @@server_uuid")
        .await
        .unwrap()
        .unwrap();

    // an automatically numbered, tagged GTID (MySQL 8.3+): the difference is exactly it
    let tag = format!("t{}", std::process::id());
    let before = mysql_executed(&mut admin).await;
    admin
        .query_drop(format!(
            "SET gtid_next = 'AUTOMATIC:{tag}'; INSERT INTO `{schema}`.t VALUES (1); \
             SET gtid_next = 'AUTOMATIC'"
        ))
        .await
        .unwrap();
    let after = mysql_executed(&mut admin).await;
    let new: Vec<Gtid> = after
        .difference(&before)
        .iter_gtids()
        .filter(|g| g.sid.tag.as_ref().is_some_and(|t| t.as_str() == tag))
        .collect();
    assert_eq!(new.len(), 1, "exactly one new GTID carries the test's tag");
    assert_eq!(new[0].sid.uuid.to_string(), uuid.to_lowercase());
    assert!(after.contains(&new[0]));
    assert!(before.is_subset(&after));

    // an explicitly numbered GTID far past the others: a hole below it, and membership (not an
    // ordinal comparison) says the numbers in the hole were never executed
    let gno = 1_000_000_000 + u64::from(std::process::id());
    let explicit: Gtid = format!("{uuid}:{gno}").parse().unwrap();
    admin
        .query_drop(format!(
            "SET gtid_next = '{explicit}'; INSERT INTO `{schema}`.t VALUES (2); \
             SET gtid_next = 'AUTOMATIC'"
        ))
        .await
        .unwrap();
    let last = mysql_executed(&mut admin).await;
    assert!(last.contains(&explicit));
    let hole: Gtid = format!("{uuid}:{}", gno - 1).parse().unwrap();
    assert!(
        !last.contains(&hole),
        "the number just below was never executed"
    );
    assert_eq!(last.to_string().parse::<GtidSet>().unwrap(), last);

    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn mariadb_has_the_binlog_settings_capstan_needs() {
    let Some(db) = mariadb() else { return };
    let mut conn = db.capstan_conn().await;
    let version: String = conn.query_first("SELECT VERSION()").await.unwrap().unwrap();
    assert!(version.contains("MariaDB"), "expected MariaDB");
    let row: (String, String, String, u8, u8, u32, u32) = conn
        .query_first(
            "SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, \
             @@gtid_strict_mode, @@log_bin, @@gtid_domain_id, @@server_id",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.0, "ROW");
    assert_eq!(row.1, "FULL");
    assert_eq!(row.2, "FULL");
    assert_eq!(row.3, 1, "gtid_strict_mode");
    assert_eq!(row.4, 1, "log_bin");
    assert_eq!(row.5, 0, "gtid_domain_id");
    assert_eq!(row.6, 2, "server_id");
}

#[tokio::test]
async fn mariadb_capstan_account_is_least_privilege() {
    let Some(db) = mariadb() else { return };
    let mut conn = db.capstan_conn().await;
    let grants: Vec<String> = conn.query("SHOW GRANTS").await.unwrap();
    let all = grants.join("\n");
    for p in ["REPLICATION SLAVE", "SELECT", "LOCK TABLES"] {
        assert!(all.contains(p), "capstan account lacks {p}");
    }
    // REPLICATION CLIENT is called BINLOG MONITOR since MariaDB 10.5
    assert!(all.contains("REPLICATION CLIENT") || all.contains("BINLOG MONITOR"));
    assert!(!all.contains("ALL PRIVILEGES"));
    assert!(conn
        .query_drop("CREATE DATABASE capstan_should_fail")
        .await
        .is_err());
}

#[tokio::test]
async fn mariadb_write_gtid_is_a_member_of_gtid_binlog_pos() {
    let Some(db) = mariadb() else { return };
    let mut admin = db.admin_conn().await;
    let schema = unique_name("capstan_pos");
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    let before: String = admin
        .query_first("SELECT @@global.gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let before: MariadbGtidPosition = before.parse().unwrap();
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (1)"))
        .await
        .unwrap();
    let last: String = admin
        .query_first("SELECT @@last_gtid")
        .await
        .unwrap()
        .unwrap();
    let last: MariadbGtid = last.parse().expect("last_gtid parses");
    assert_eq!(last.server_id, 2);
    let after: String = admin
        .query_first("SELECT @@global.gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    let after: MariadbGtidPosition = after.parse().unwrap();
    assert!(after.contains(&last));
    assert!(
        !before.contains(&last),
        "the write was not processed before it happened"
    );
    assert!(before.is_subset(&after));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}
