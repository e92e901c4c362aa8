//! The live binlog source against the MySQL 9.x dev server: connect, preconditions, dump,
//! decode, assemble, liveness and the fail-closed halts. Every test works in its own schema
//! and streams from the server's current position, filtered to its own tables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use std::time::Duration;

use capstan_connectors::mysql::{
    AssemblerOutput, BinlogSource, SourceClient, StartPosition, TlsConfig, TlsMode,
};
use capstan_core::change::{
    ColumnStructure, Op, SchemaChangeKind, TableStructure, TransactionGtid, Value,
};
use capstan_core::position::{Flavor, Gtid, GtidSet, Position};
use capstan_tests::{mysql, unique_name};
use mysql_async::prelude::*;
use source_common::*;

#[tokio::test]
async fn streams_inserts_updates_and_deletes() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
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

async fn setup(db: &capstan_tests::DbEnv, prefix: &str, ddl: &str) -> (mysql_async::Conn, String) {
    let schema = unique_name(prefix);
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!("CREATE DATABASE `{schema}`; USE `{schema}`; {ddl}"))
        .await
        .unwrap();
    (admin, schema)
}

async fn executed(conn: &mut mysql_async::Conn) -> GtidSet {
    let text: String = conn
        .query_first("SELECT @@global.gtid_executed")
        .await
        .unwrap()
        .unwrap();
    text.parse().unwrap()
}

fn text(v: Option<&Value>) -> Vec<u8> {
    match v {
        Some(Value::Text { bytes, .. }) => bytes.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

#[tokio::test]
async fn decodes_every_column_type() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(
        &db,
        "src_types",
        "CREATE TABLE t (id INT PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, \
         mu MEDIUMINT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, de DECIMAL(30,10), fl FLOAT, \
         do DOUBLE, ch CHAR(5), vc VARCHAR(50) CHARACTER SET latin1, tx TEXT, bn BINARY(4), \
         vb VARBINARY(10), bl BLOB, d DATE, tm TIME(3), dt DATETIME(6), ts TIMESTAMP(2) NULL, \
         y YEAR, bt BIT(10), e ENUM('red','green','blue'), s SET('a','b','c','d'), j JSON, \
         g GEOMETRY, v VECTOR(3), n INT NULL)",
    )
    .await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop(
            "INSERT INTO t VALUES (1, -128, 255, -32768, 16777215, -9223372036854775808, \
             18446744073709551615, -12345678901234567890.0123456789, 1.5, -2.25, 'ab', \
             _utf8mb4'h\u{e9}llo', 'text', X'01020304', X'ff00', X'deadbeef', '2024-02-29', \
             '-12:34:56.789', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.12', 2155, \
             b'1010101010', 'green', 'd,a', '{\"k\": [1, 2.5, \"x\", null, true]}', \
             ST_GeomFromText('POINT(1 2)'), STRING_TO_VECTOR('[1.5,2,3]'), NULL), \
             (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
             NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        )
        .await
        .unwrap();
    let txn = next_txn(&mut source, &schema).await;
    assert_eq!(txn.changes.len(), 2);
    let r = txn.changes[0].after.as_ref().unwrap();
    let col = |n: &str| r.get_by_name(n);
    assert_eq!(col("ti"), Some(&Value::Int(-128)));
    assert_eq!(col("tu"), Some(&Value::UInt(255)));
    assert_eq!(col("si"), Some(&Value::Int(-32768)));
    assert_eq!(col("mu"), Some(&Value::UInt(16_777_215)));
    assert_eq!(col("bi"), Some(&Value::Int(i64::MIN)));
    assert_eq!(col("bu"), Some(&Value::UInt(u64::MAX)));
    assert_eq!(
        col("de"),
        Some(&Value::Decimal("-12345678901234567890.0123456789".into()))
    );
    assert_eq!(col("fl"), Some(&Value::Float(1.5)));
    assert_eq!(col("do"), Some(&Value::Double(-2.25)));
    assert_eq!(text(col("ch")), b"ab");
    assert_eq!(text(col("vc")), b"h\xe9llo", "latin1 bytes, untranscoded");
    assert_eq!(text(col("tx")), b"text");
    assert_eq!(col("bn"), Some(&Value::Bytes(vec![1, 2, 3, 4])));
    assert_eq!(col("vb"), Some(&Value::Bytes(vec![0xff, 0])));
    assert_eq!(col("bl"), Some(&Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef])));
    let sql = |n: &str| col(n).and_then(Value::to_sql_text).unwrap();
    assert_eq!(sql("d"), "2024-02-29");
    assert_eq!(sql("tm"), "-12:34:56.789");
    assert_eq!(sql("dt"), "2024-01-02 03:04:05.123456");
    let epoch: String = admin
        .query_first("SELECT CAST(UNIX_TIMESTAMP(ts) AS CHAR) FROM t WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sql("ts"), epoch);
    assert_eq!(col("y"), Some(&Value::Year(2155)));
    assert_eq!(
        col("bt"),
        Some(&Value::Bit {
            bytes: vec![0b10, 0b1010_1010],
            bits: 10
        })
    );
    assert_eq!(col("e"), Some(&Value::Enum("green".into())));
    assert_eq!(col("s"), Some(&Value::Set("a,d".into())));
    let Some(Value::Json(j)) = col("j") else {
        panic!("json")
    };
    assert_eq!(j.replace(' ', ""), r#"{"k":[1,2.5,"x",null,true]}"#);
    let wkb: Vec<u8> = admin
        .query_first("SELECT ST_AsBinary(g) FROM t WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(col("g"), Some(&Value::Geometry { srid: 0, wkb }));
    assert_eq!(col("v"), Some(&Value::Vector(vec![1.5, 2.0, 3.0])));
    assert_eq!(col("n"), Some(&Value::Null));
    let nulls = txn.changes[1].after.as_ref().unwrap();
    assert!(nulls.values().iter().skip(1).all(Value::is_null));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn negative_time_decodes_at_every_fsp() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let cols: Vec<String> = (0..=6).map(|f| format!("t{f} TIME({f})")).collect();
    let (mut admin, schema) = setup(
        &db,
        "src_time",
        &format!("CREATE TABLE t (id INT PRIMARY KEY, {})", cols.join(", ")),
    )
    .await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    let samples = [
        "-12:34:56.789012",
        "-00:00:00.5",
        "-00:00:01.000001",
        "-838:59:59",
        "-01:00:00.01",
        "00:00:00",
        "12:34:56.654321",
    ];
    for (i, s) in samples.iter().enumerate() {
        let vals = vec![format!("'{s}'"); 7].join(", ");
        admin
            .query_drop(format!("INSERT INTO t VALUES ({i}, {vals})"))
            .await
            .unwrap();
    }
    for i in 0..samples.len() {
        let txn = next_txn(&mut source, &schema).await;
        let row = txn.changes[0].after.as_ref().unwrap();
        for f in 0..=6 {
            let expect: String = admin
                .query_first(format!("SELECT CAST(t{f} AS CHAR) FROM t WHERE id = {i}"))
                .await
                .unwrap()
                .unwrap();
            let got = row.get_by_name(&format!("t{f}")).unwrap().to_sql_text();
            assert_eq!(got.as_deref(), Some(expect.as_str()), "sample {i} fsp {f}");
        }
    }
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn hundred_thousand_row_transaction() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(
        &db,
        "src_big",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop(
            "SET SESSION cte_max_recursion_depth = 200000; \
             INSERT INTO t WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq \
             WHERE n < 100000) SELECT n, CONCAT('row', n) FROM seq",
        )
        .await
        .unwrap();
    let txn = next_txn(&mut source, &schema).await;
    assert_eq!(txn.changes.len(), 100_000);
    for (i, c) in txn.changes.iter().enumerate() {
        let id = c.after.as_ref().unwrap().get(0).unwrap();
        assert_eq!(id, &Value::Int(i as i64 + 1));
    }
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

/// While the caller is busy, the stream's reader task decodes rows events ahead: a large
/// transaction already in the binlog, a caller that starts late and keeps decoding, and every
/// row still exactly what was written (the rows decoded ahead really were used).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_decoded_ahead_by_the_reader_are_exact() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(
        &db,
        "src_ahead",
        "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20) NOT NULL, d DECIMAL(12,2) NOT NULL, \
         j JSON NOT NULL, e ENUM('new','paid','void') NOT NULL)",
    )
    .await;
    let before = executed(&mut admin).await;
    const N: i64 = 60_000;
    admin
        .query_drop(format!(
            "SET SESSION cte_max_recursion_depth = 100000; \
             INSERT INTO t WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq \
             WHERE n < {N}) SELECT n, CONCAT('s', n), n / 100, \
             JSON_OBJECT('k', n, 'tags', JSON_ARRAY('a', 'b')), ELT(1 + n % 3, 'new', 'paid', 'void') \
             FROM seq"
        ))
        .await
        .unwrap();
    let mut source = BinlogSource::start(
        config(&db),
        StartPosition::Checkpoint(Position::Mysql(before)),
        only(&schema, &["t"]),
    )
    .await
    .unwrap();
    // the reader fills its channel while nobody reads
    tokio::time::sleep(Duration::from_millis(500)).await;
    let txn = next_txn(&mut source, &schema).await;
    assert_eq!(txn.changes.len(), N as usize);
    for (i, c) in txn.changes.iter().enumerate() {
        let n = i as i64 + 1;
        let row = c.after.as_ref().unwrap();
        let text = |v: &Value| match v {
            Value::Text { bytes, .. } => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("row {n}: not text: {}", other.kind()),
        };
        assert_eq!(row.get(0), Some(&Value::Int(n)), "row {n}");
        assert_eq!(text(row.get(1).unwrap()), format!("s{n}"), "row {n}");
        assert_eq!(
            row.get(2),
            Some(&Value::Decimal(format!("{}.{:02}", n / 100, n % 100))),
            "row {n}"
        );
        assert_eq!(
            row.get(3),
            Some(&Value::Json(format!(r#"{{"k":{n},"tags":["a","b"]}}"#))),
            "row {n}"
        );
        let e = ["new", "paid", "void"][(n % 3) as usize];
        assert_eq!(row.get(4), Some(&Value::Enum(e.to_string())), "row {n}");
    }
    let ahead = source.stats().rows_events_decoded_ahead;
    assert!(ahead > 0, "no rows event was decoded ahead");
    eprintln!("{ahead} rows events decoded ahead");
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn ddl_text_is_kept_when_the_source_config_opts_in() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) =
        setup(&db, "src_ddl_text", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    // as a pipeline with `schema_changes.include_ddl`: the assembler config stays the default
    let mut config = config(&db);
    config.keep_ddl_statement = true;
    let mut source = BinlogSource::start(config, StartPosition::Current, only(&schema, &["t"]))
        .await
        .unwrap();
    let statement = "ALTER TABLE t ADD COLUMN extra VARCHAR(10) DEFAULT 'd'";
    admin.query_drop(statement).await.unwrap();
    let change = next_schema_change(&mut source, &schema).await;
    assert_eq!(change.kind, SchemaChangeKind::AlterTable);
    assert_eq!(change.statement.as_deref(), Some(statement));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_drop_carries_the_structure_of_the_tables_last_table_map() {
    let Some(db) = mysql() else { return };
    // alone on the server: an ALTER or RENAME anywhere on it (another test's) between the
    // insert and the drop rightly makes the stream forget every table map (LastTableMaps),
    // and the drop then has no structure (seen once in a full run)
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(
        &db,
        "src_ddl_drop",
        "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, name VARCHAR(64) CHARACTER SET utf8mb4 \
         NOT NULL DEFAULT 'dflt' COMMENT 'a comment', price DECIMAL(10,2), at DATETIME(3))",
    )
    .await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop("INSERT INTO t VALUES (1, 'a', 1.50, NOW(3))")
        .await
        .unwrap();
    next_txn(&mut source, &schema).await;
    admin.query_drop("DROP TABLE t").await.unwrap();
    let change = next_schema_change(&mut source, &schema).await;
    assert_eq!(change.kind, SchemaChangeKind::DropTable);
    let column = |name: &str, type_name: &str, length, scale, charset: Option<&str>, nullable| {
        ColumnStructure {
            name: name.into(),
            type_name: type_name.into(),
            length,
            scale,
            charset: charset.map(str::to_string),
            nullable,
        }
    };
    assert_eq!(
        change.structure,
        Some(TableStructure {
            columns: vec![
                (1, column("id", "BIGINT UNSIGNED", None, None, None, false)),
                (
                    2,
                    column("name", "VARCHAR", Some(64), None, Some("utf8mb4"), false)
                ),
                (3, column("price", "DECIMAL", Some(10), Some(2), None, true)),
                (4, column("at", "DATETIME", Some(3), None, None, true)),
            ],
            primary_key: vec!["id".into()],
        })
    );
    // a table not seen since the source started has none
    admin
        .query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    next_schema_change(&mut source, &schema).await;
    admin.query_drop("DROP TABLE t").await.unwrap();
    let change = next_schema_change(&mut source, &schema).await;
    assert_eq!(change.kind, SchemaChangeKind::DropTable);
    assert_eq!(change.structure, None);
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn ddl_becomes_a_schema_change_and_filtered_transactions_advance() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(
        &db,
        "src_ddl",
        "CREATE TABLE t (id INT PRIMARY KEY); CREATE TABLE other (id INT PRIMARY KEY)",
    )
    .await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop("ALTER TABLE t ADD COLUMN extra VARCHAR(10)")
        .await
        .unwrap();
    let change = next_schema_change(&mut source, &schema).await;
    assert_eq!(change.kind, SchemaChangeKind::AlterTable);
    assert_eq!(change.table.as_deref(), Some("t"));
    assert!(change.statement.is_none(), "statement text is redacted");
    admin
        .query_drop("INSERT INTO other VALUES (1)")
        .await
        .unwrap();
    let after_filtered = executed(&mut admin).await;
    admin
        .query_drop("INSERT INTO t VALUES (1, 'x')")
        .await
        .unwrap();
    let txn = next_txn(&mut source, &schema).await;
    assert_eq!(txn.changes.len(), 1);
    let Position::Mysql(pos) = source.position() else {
        panic!()
    };
    assert!(
        after_filtered.is_subset(pos),
        "the filtered transaction (and everything before it) is processed"
    );
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn compressed_transactions_decode() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(
        &db,
        "src_zstd",
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)",
    )
    .await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop(
            "SET SESSION binlog_transaction_compression = ON; \
             INSERT INTO t VALUES (1, REPEAT('abc', 1000)), (2, 'two'); \
             UPDATE t SET v = 'one' WHERE id = 1",
        )
        .await
        .unwrap();
    let ins = next_txn(&mut source, &schema).await;
    assert_eq!(ins.changes.len(), 2);
    let v = text(ins.changes[0].after.as_ref().unwrap().get_by_name("v"));
    assert_eq!(v, "abc".repeat(1000).into_bytes());
    let upd = next_txn(&mut source, &schema).await;
    assert_eq!(upd.changes[0].op, Op::Update);
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn xa_prepare_halts_under_refuse() {
    let Some(db) = mysql() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "src_xa", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    let xid = unique_name("xid");
    admin
        .query_drop(format!(
            "XA START '{xid}'; INSERT INTO t VALUES (1); XA END '{xid}'; XA PREPARE '{xid}'"
        ))
        .await
        .unwrap();
    let err = halt(&mut source).await;
    assert_eq!(err.code(), "unsupported_transaction_shape");
    assert!(
        !err.to_string().contains(&xid),
        "the xid never reaches an error"
    );
    admin
        .query_drop(format!("XA ROLLBACK '{xid}'"))
        .await
        .unwrap();
    // a one-phase XA commit is an ordinary transaction (start after the prepared one)
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    admin
        .query_drop(format!(
            "XA START '{xid}2'; INSERT INTO t VALUES (2); XA END '{xid}2'; \
             XA COMMIT '{xid}2' ONE PHASE"
        ))
        .await
        .unwrap();
    let txn = next_txn(&mut source, &schema).await;
    assert_eq!(txn.changes.len(), 1);
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn wrong_checkpoint_is_source_identity_mismatch() {
    let Some(db) = mysql() else { return };
    let mut admin = db.admin_conn().await;
    let mut cp = executed(&mut admin).await;
    let stranger: Gtid = "4e11fa47-71ca-11e1-9e33-c80aa9429562:7".parse().unwrap();
    cp.insert(&stranger);
    let err = BinlogSource::start(
        config(&db),
        StartPosition::Checkpoint(Position::Mysql(cp)),
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "source_identity_mismatch");
    let err = BinlogSource::start(
        config(&db),
        StartPosition::Checkpoint(Position::empty(Flavor::Mariadb)),
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "position_flavor_mismatch");
}

#[tokio::test]
async fn purged_binlog_is_a_data_gap() {
    let Some(db) = mysql() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "src_gap", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    admin.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    admin.query_drop("FLUSH BINARY LOGS").await.unwrap();
    let current: mysql_async::Row = admin
        .query_first("SHOW BINARY LOG STATUS")
        .await
        .unwrap()
        .unwrap();
    let file: String = current.get(0).unwrap();
    admin
        .query_drop(format!("PURGE BINARY LOGS TO '{file}'"))
        .await
        .unwrap();
    let purged: String = admin
        .query_first("SELECT @@global.gtid_purged")
        .await
        .unwrap()
        .unwrap();
    let purged: GtidSet = purged.parse().unwrap();
    let Some(first) = purged.iter_gtids().next() else {
        panic!("nothing purged: another reader held the old binlogs open")
    };
    let mut cp = GtidSet::new();
    for g in executed(&mut admin)
        .await
        .iter_gtids()
        .filter(|g| *g != first)
    {
        cp.insert(&g);
    }
    let err = BinlogSource::start(
        config(&db),
        StartPosition::Checkpoint(Position::Mysql(cp)),
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "data_gap");
    // all retained history from an empty checkpoint is now a gap too
    let err = BinlogSource::start(
        config(&db),
        StartPosition::Checkpoint(Position::empty(Flavor::Mysql)),
        Default::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "data_gap");
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn preconditions_pass_and_tls_choices_connect() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let valid = config(&db);
    let mut client = SourceClient::open(&valid, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(client.flavor(), Flavor::Mysql);
    let settings = client.settings().await.unwrap();
    assert_eq!(settings.binlog_format, "ROW");
    settings.check().unwrap();
    // tls unspecified: refused before any socket
    let mut raw = raw_config(&db);
    raw.tls = None;
    assert_eq!(
        raw.validate().unwrap_err().code(),
        "tls_verification_unspecified"
    );
    // verify_ca against the server's auto-generated CA (chain checked, host name not)
    let ca = std::path::PathBuf::from(std::env::var("HOME").unwrap())
        .join(".cache/capstan/mysql-sid-chroot/var/lib/capstan-mysql/ca.pem");
    let mut choices = vec![TlsConfig {
        mode: Some(TlsMode::Disabled),
        ca_file: None,
    }];
    if ca.is_file() {
        choices.push(TlsConfig {
            mode: Some(TlsMode::VerifyCa),
            ca_file: Some(ca),
        });
    }
    for tls in choices {
        let mut raw = raw_config(&db);
        raw.tls = Some(tls.clone());
        let mut source = BinlogSource::start(
            raw.validate().unwrap(),
            StartPosition::Current,
            Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{:?}: {e}", tls.mode));
        // a heartbeat or event arrives on the dump connection
        let _ = tokio::time::timeout(Duration::from_secs(3), source.next()).await;
        assert_eq!(source.stats().connects, 1);
    }
    // a CA that did not sign the server certificate is refused
    let mut raw = raw_config(&db);
    let bogus = std::env::temp_dir().join(format!("{}.pem", unique_name("bogus_ca")));
    std::fs::write(&bogus, "not a certificate").unwrap();
    raw.tls = Some(TlsConfig {
        mode: Some(TlsMode::VerifyCa),
        ca_file: Some(bogus.clone()),
    });
    let err = BinlogSource::start(
        raw.validate().unwrap(),
        StartPosition::Current,
        Default::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err.code(), "tls_failed" | "connection_failed"),
        "{err}"
    );
    let _ = std::fs::remove_file(bogus);
}

async fn insert_ids(admin: &mut mysql_async::Conn, ids: std::ops::Range<i32>) {
    for i in ids {
        admin
            .query_drop(format!("INSERT INTO t VALUES ({i})"))
            .await
            .unwrap();
    }
}

async fn read_ids(source: &mut BinlogSource, schema: &str, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    while ids.len() < n {
        let txn = next_txn(source, schema).await;
        for c in &txn.changes {
            let Some(Value::Int(id)) = c.after.as_ref().unwrap().get(0) else {
                panic!()
            };
            ids.push(*id);
        }
    }
    ids
}

#[tokio::test]
async fn killed_dump_resumes_with_nothing_skipped_or_repeated() {
    let Some(db) = mysql() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let (mut admin, schema) = setup(&db, "src_kill", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    insert_ids(&mut admin, 0..5).await;
    let mut ids = read_ids(&mut source, &schema, 3).await;
    assert!(kill_dump_threads(&db).await >= 1);
    insert_ids(&mut admin, 5..10).await;
    ids.extend(read_ids(&mut source, &schema, 7).await);
    assert_eq!(ids, (0..10).collect::<Vec<i64>>());
    assert!(source.stats().reconnects >= 1, "{:?}", source.stats());
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn silent_stream_reconnects_then_persistent_failure_stalls() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(&db, "src_live", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    let proxy = Proxy::start(&db).await;
    let mut raw = raw_config(&db);
    raw.port = proxy.port;
    raw.heartbeat_period_ms = 300;
    raw.stream_timeout_ms = 1_500;
    raw.reconnect_backoff_ms = 100;
    raw.max_reconnects = 3;
    let mut source = BinlogSource::start(
        raw.validate().unwrap(),
        StartPosition::Current,
        only(&schema, &["t"]),
    )
    .await
    .unwrap();
    insert_ids(&mut admin, 0..2).await;
    let mut ids = read_ids(&mut source, &schema, 2).await;
    proxy.freeze();
    insert_ids(&mut admin, 2..4).await;
    ids.extend(read_ids(&mut source, &schema, 2).await);
    assert_eq!(ids, vec![0, 1, 2, 3]);
    assert!(source.stats().reconnects >= 1);
    proxy.freeze();
    proxy.refuse();
    let err = halt(&mut source).await;
    assert_eq!(err.code(), "stream_stalled");
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn outputs_cover_transactions_in_commit_order() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    let (mut admin, schema) = setup(&db, "src_order", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    let mut source = start_current(&db, only(&schema, &["t"])).await;
    insert_ids(&mut admin, 0..3).await;
    let mut gtids = Vec::new();
    while gtids.len() < 3 {
        if let AssemblerOutput::Transaction(t) = next(&mut source).await.unwrap() {
            if t.changes.iter().any(|c| c.table.schema == schema) {
                let TransactionGtid::Mysql(g) = t.gtid else {
                    panic!()
                };
                gtids.push(g);
            }
        }
    }
    let all = executed(&mut admin).await;
    assert!(gtids.iter().all(|g| all.contains(g)));
    assert!(gtids.windows(2).all(|w| w[0] != w[1]));
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

#[tokio::test]
async fn idle_stream_is_kept_alive_by_heartbeats() {
    let Some(db) = mysql() else { return };
    let _exclusive = SERVER_WIDE.write().await;
    heartbeats_keep_an_idle_stream_alive(&db).await;
}

#[tokio::test]
async fn same_server_id_halts_the_older_stream_with_server_id_conflict() {
    let Some(db) = mysql() else { return };
    let _shared = SERVER_WIDE.read().await;
    same_server_id_halts_the_older_stream(&db).await;
}
