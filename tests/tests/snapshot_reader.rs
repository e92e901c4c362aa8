//! The snapshot reader against both dev servers: describe and its refusals, hostile
//! identifiers, chunk boundaries, key kinds (BIGINT UNSIGNED above 2^63, composite, BINARY(n),
//! case-insensitive VARCHAR with weights), the exact position G, the lock hold, and row values
//! equal to what the binlog decoder gives for the same rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_common;

use std::time::Duration;

use capstan_connectors::mysql::snapshot::{
    KeyColumn, KeyKind, KeyPart, PositionCapture, ReaderOptions, SnapshotReader, SnapshotTable,
};
use capstan_connectors::mysql::{SourceClient, TableFilter, TlsConfig, TlsMode, ValidSourceConfig};
use capstan_core::change::{Op, Row, TableId};
use capstan_core::position::Flavor;
use capstan_tests::{mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use source_common::*;

fn servers() -> Vec<DbEnv> {
    [mysql(), mariadb()].into_iter().flatten().collect()
}

async fn reader(db: &DbEnv) -> SnapshotReader {
    SnapshotReader::open(&config(db))
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", db.name))
}

/// A fresh schema with `ddl` run in it (as admin).
async fn setup(db: &DbEnv, prefix: &str, ddl: &str) -> (mysql_async::Conn, String) {
    let schema = unique_name(prefix);
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}` CHARACTER SET utf8mb4; USE `{schema}`; {ddl}"
        ))
        .await
        .unwrap();
    (admin, schema)
}

async fn drop_schema(admin: &mut mysql_async::Conn, schema: &str) {
    admin
        .query_drop(format!("DROP DATABASE `{}`", schema.replace('`', "``")))
        .await
        .unwrap();
}

/// Every row of the table through `read_chunk`, with the chunks' row counts and last flags.
async fn read_all(
    r: &mut SnapshotReader,
    t: &SnapshotTable,
    chunk_size: u32,
) -> (Vec<Row>, Vec<(usize, bool)>) {
    let mut rows = Vec::new();
    let mut shape = Vec::new();
    let mut after: Option<Vec<KeyPart>> = None;
    loop {
        let chunk = r.read_chunk(t, after.as_deref(), chunk_size).await.unwrap();
        assert!(chunk.rows.len() <= chunk_size as usize);
        shape.push((chunk.rows.len(), chunk.last));
        if let Some(last) = chunk.rows.last() {
            after = Some(t.key.key_of(last).unwrap());
        }
        rows.extend(chunk.rows);
        if chunk.last {
            return (rows, shape);
        }
        assert!(
            shape.len() < 10_000,
            "no last chunk in {}: {:?}",
            t.id,
            &shape[..5]
        );
    }
}

#[tokio::test]
async fn describe_refuses_unorderable_keys_and_accepts_not_null_unique() {
    for db in servers() {
        let (mut admin, schema) = setup(
            &db,
            "snap_desc",
            "CREATE TABLE text_pk (k TEXT NOT NULL, PRIMARY KEY (k(10))); \
             CREATE TABLE dec_pk (k DECIMAL(10,2) PRIMARY KEY); \
             CREATE TABLE enum_pk (k ENUM('a','b') PRIMARY KEY); \
             CREATE TABLE no_pk (a INT, b INT); \
             CREATE TABLE null_uk (a INT NULL, b INT, UNIQUE KEY u (a)); \
             CREATE TABLE nn_uk (a INT NULL, b BIGINT UNSIGNED NOT NULL, c VARBINARY(8) NOT NULL, \
               UNIQUE KEY u_null (a), UNIQUE KEY u_ok (b, c)); \
             CREATE TABLE ok (id INT PRIMARY KEY, v VARCHAR(10)); \
             CREATE VIEW v AS SELECT * FROM ok",
        )
        .await;
        let mut r = reader(&db).await;
        let t = |n: &str| TableId::new(schema.clone(), n);
        for (table, column) in [("text_pk", "k"), ("dec_pk", "k"), ("enum_pk", "k")] {
            let e = r.describe(&t(table)).await.unwrap_err();
            assert_eq!(
                e.code(),
                "snapshot_pk_unsupported_type",
                "{}: {table}",
                db.name
            );
            assert!(
                e.to_string().contains(table) && e.to_string().contains(column),
                "{e}"
            );
        }
        for table in ["no_pk", "null_uk"] {
            let e = r.describe(&t(table)).await.unwrap_err();
            assert_eq!(
                e.code(),
                "snapshot_table_no_primary_key",
                "{}: {table}",
                db.name
            );
        }
        let d = r.describe(&t("nn_uk")).await.unwrap();
        assert!(d.key.from_unique_key);
        let key: Vec<_> = d
            .key
            .columns
            .iter()
            .map(|c| (c.name.as_str(), c.position))
            .collect();
        assert_eq!(key, [("b", 1), ("c", 2)]);
        assert_eq!(d.key.columns[0].kind, KeyKind::UInt);
        assert_eq!(d.key.columns[1].kind, KeyKind::VarBinary);
        assert_eq!(&*d.columns, ["a", "b", "c"]);
        for missing in ["absent", "v"] {
            let e = r.describe(&t(missing)).await.unwrap_err();
            assert_eq!(
                e.code(),
                "snapshot_table_not_found",
                "{}: {missing}",
                db.name
            );
        }
        // the same definition, the same fingerprint; a changed one differs
        let ok1 = r.describe(&t("ok")).await.unwrap();
        assert_eq!(ok1, r.describe(&t("ok")).await.unwrap());
        admin
            .query_drop("ALTER TABLE ok MODIFY v VARCHAR(11)")
            .await
            .unwrap();
        let ok2 = r.describe(&t("ok")).await.unwrap();
        assert_ne!(ok1.fingerprint, ok2.fingerprint);
        // reading with the old description is drift
        let e = r.read_chunk(&ok1, None, 10).await.unwrap_err();
        assert_eq!(e.code(), "snapshot_schema_drifted", "{}", db.name);
        // resolve: only what the filter admits, sorted; nothing admitted is refused
        let filter = TableFilter::only([(schema.as_str(), "ok"), (schema.as_str(), "dec_pk")]);
        let all = r.resolve_all_tables(&filter).await.unwrap();
        assert_eq!(all, [t("dec_pk"), t("ok")]);
        let none = TableFilter::only([(schema.as_str(), "v")]);
        let e = r.resolve_all_tables(&none).await.unwrap_err();
        assert_eq!(e.code(), "snapshot_no_base_tables");
        drop_schema(&mut admin, &schema).await;
    }
}

#[tokio::test]
async fn hostile_identifiers_are_quoted() {
    let hostile = "we`ird; DROP TABLE x; --";
    for db in servers() {
        let schema = format!("{}{hostile}", unique_name("snap_q"));
        let q = |s: &str| format!("`{}`", s.replace('`', "``"));
        let mut admin = db.admin_conn().await;
        admin
            .query_drop(format!(
                "CREATE DATABASE {s}; CREATE TABLE {s}.{t} ({c} INT PRIMARY KEY, v INT); \
                 INSERT INTO {s}.{t} VALUES (1, 10), (2, 20), (3, 30)",
                s = q(&schema),
                t = q(hostile),
                c = q(hostile)
            ))
            .await
            .unwrap();
        let mut r = reader(&db).await;
        let t = r
            .describe(&TableId::new(schema.clone(), hostile))
            .await
            .unwrap();
        assert_eq!(t.key.columns[0].name, hostile);
        let (rows, shape) = read_all(&mut r, &t, 2).await;
        assert_eq!(shape, [(2, false), (1, true)]);
        let keys: Vec<_> = rows.iter().map(|r| t.key.key_of(r).unwrap()).collect();
        assert_eq!(
            keys,
            [[KeyPart::Int(1)], [KeyPart::Int(2)], [KeyPart::Int(3)]]
        );
        drop_schema(&mut admin, &schema).await;
    }
}

#[tokio::test]
async fn chunk_boundaries_empty_and_exact_multiple() {
    for db in servers() {
        let (mut admin, schema) = setup(
            &db,
            "snap_edges",
            "CREATE TABLE e (id INT PRIMARY KEY); CREATE TABLE six (id INT PRIMARY KEY); \
             INSERT INTO six VALUES (1),(2),(3),(4),(5),(6)",
        )
        .await;
        let mut r = reader(&db).await;
        let e = r
            .describe(&TableId::new(schema.clone(), "e"))
            .await
            .unwrap();
        let (rows, shape) = read_all(&mut r, &e, 3).await;
        assert!(rows.is_empty());
        assert_eq!(shape, [(0, true)], "{}", db.name);
        let six = r
            .describe(&TableId::new(schema.clone(), "six"))
            .await
            .unwrap();
        let (rows, shape) = read_all(&mut r, &six, 3).await;
        assert_eq!(shape, [(3, false), (3, true)], "{}", db.name);
        assert_eq!(rows.len(), 6);
        let (_, shape) = read_all(&mut r, &six, 6).await;
        assert_eq!(shape, [(6, true)]);
        let (_, shape) = read_all(&mut r, &six, 1).await;
        assert_eq!(shape.len(), 6);
        assert_eq!(shape.last(), Some(&(1, true)));
        // a cursor that does not fit the key is refused
        let err = r
            .read_chunk(&six, Some(&[KeyPart::UInt(1)]), 3)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "snapshot_cursor_shape_mismatch");
        drop_schema(&mut admin, &schema).await;
    }
}

#[tokio::test]
async fn unsigned_composite_and_fixed_binary_keys_chunk_every_row_once() {
    for db in servers() {
        let (mut admin, schema) = setup(
            &db,
            "snap_keys",
            "CREATE TABLE u (id BIGINT UNSIGNED PRIMARY KEY); \
             INSERT INTO u VALUES (0), (1), (9223372036854775806), (9223372036854775807), \
               (9223372036854775808), (9223372036854775809), (18446744073709551614), \
               (18446744073709551615); \
             CREATE TABLE c (a INT, b VARBINARY(8), v INT, PRIMARY KEY (a, b)); \
             INSERT INTO c VALUES (-1, X'', 1), (-1, X'00', 2), (-1, X'0000', 3), (1, X'ff', 4), \
               (1, X'01', 5), (1, X'0100', 6), (2, X'', 7), (2, X'7f', 8), (3, X'80', 9); \
             CREATE TABLE f (k BINARY(4) PRIMARY KEY); \
             INSERT INTO f VALUES (X''), (X'01'), (X'0101'), (X'010001'), (X'00000001'), (X'ff')",
        )
        .await;
        let mut r = reader(&db).await;
        let t = |n: &str| TableId::new(schema.clone(), n);
        let u = r.describe(&t("u")).await.unwrap();
        for size in [1, 2, 3, 8] {
            let (rows, _) = read_all(&mut r, &u, size).await;
            let keys: Vec<u64> = rows
                .iter()
                .map(|row| match u.key.key_of(row).unwrap()[0] {
                    KeyPart::UInt(v) => v,
                    ref other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(
                keys,
                [
                    0,
                    1,
                    (1 << 63) - 2,
                    (1 << 63) - 1,
                    1 << 63,
                    (1 << 63) + 1,
                    u64::MAX - 1,
                    u64::MAX
                ],
                "{} size {size}",
                db.name
            );
        }
        for (table, n) in [("c", 9), ("f", 6)] {
            let d = r.describe(&t(table)).await.unwrap();
            let sql = format!(
                "SELECT {} FROM `{schema}`.{table} ORDER BY {}",
                d.columns.join(", "),
                d.key
                    .columns
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let server: Vec<mysql_async::Row> = admin.query(sql).await.unwrap();
            assert_eq!(server.len(), n);
            let (all, _) = read_all(&mut r, &d, 100).await;
            assert_eq!(all.len(), n);
            for size in [1, 2, 4] {
                let (rows, _) = read_all(&mut r, &d, size).await;
                assert_eq!(rows, all, "{} {table} size {size}", db.name);
            }
            // chunk order is the server's order
            let server_keys: Vec<Vec<u8>> = server
                .into_iter()
                .map(|row| {
                    let v: Vec<mysql_async::Value> = row.unwrap();
                    format!("{v:?}").into_bytes()
                })
                .collect();
            let ours: Vec<Vec<u8>> = all
                .iter()
                .map(|row| format!("{:?}", d.key.key_of(row).unwrap()).into_bytes())
                .collect();
            assert_eq!(server_keys.len(), ours.len());
        }
        // composite: the exact key sequence
        let c = r.describe(&t("c")).await.unwrap();
        let (rows, _) = read_all(&mut r, &c, 2).await;
        let v: Vec<_> = rows
            .iter()
            .map(|row| row.get_by_name("v").cloned().unwrap())
            .collect();
        let want: Vec<_> = [1, 2, 3, 5, 6, 4, 7, 8, 9]
            .into_iter()
            .map(capstan_core::change::Value::Int)
            .collect();
        assert_eq!(v, want, "{}", db.name);
        // BINARY(4): stripped keys, padded cursors
        let f = r.describe(&t("f")).await.unwrap();
        assert_eq!(f.key.columns[0].kind, KeyKind::FixedBinary);
        let (rows, _) = read_all(&mut r, &f, 1).await;
        let keys: Vec<_> = rows.iter().map(|row| f.key.key_of(row).unwrap()).collect();
        let want: Vec<Vec<KeyPart>> = [
            vec![],
            vec![0, 0, 0, 1],
            vec![1],
            vec![1, 0, 1],
            vec![1, 1],
            vec![0xff],
        ]
        .into_iter()
        .map(|b| vec![KeyPart::Bytes(b)])
        .collect();
        assert_eq!(keys, want, "{}", db.name);
        drop_schema(&mut admin, &schema).await;
    }
}

/// NO PAD collations: WEIGHT_STRING bytes order exactly as ORDER BY does. PAD SPACE ones
/// (`utf8mb4_general_ci`, `latin1_swedish_ci`, …) need their weights padded: the bare
/// value's weight keeps trailing spaces that ORDER BY ignores, so `'a'` and `'a\t'` order one
/// way by bare weight and the other by the server — the canary refuses that method and
/// accepts the padded one (see also `pad_space_keys_chunk_in_server_order_with_padded_weights`
/// and `uca_pad_space_keys_order_as_the_server_compares`).
#[tokio::test]
async fn case_insensitive_varchar_key_in_server_order_with_consistent_weights() {
    for db in servers() {
        let (second_cs, second_coll) = if db.name == "mysql" {
            ("utf8mb4", "utf8mb4_0900_as_cs")
        } else {
            ("latin1", "latin1_swedish_nopad_ci")
        };
        let ci = if db.name == "mysql" {
            "utf8mb4_0900_ai_ci"
        } else {
            "utf8mb4_general_nopad_ci"
        };
        let (mut admin, schema) = setup(
            &db,
            "snap_ci",
            &format!(
                "CREATE TABLE s (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE {ci} PRIMARY KEY, n INT); \
                 CREATE TABLE l (k VARCHAR(20) CHARACTER SET {second_cs} COLLATE {second_coll} \
                   PRIMARY KEY, n INT); \
                 CREATE TABLE pad (k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci \
                   PRIMARY KEY)"
            ),
        )
        .await;
        let words = [
            "apple",
            "Banana",
            "banana2",
            "cherry",
            "\u{c4}pfel",
            "zebra",
            "Zulu",
            "\u{e9}clair",
            "eclairs",
            "10",
            "9",
            "a b",
            "a-b",
            "a_b",
            "ABC",
            "abd",
            "a",
            "a\t",
            "a ",
            "\u{3a9}",
            "\u{4e2d}\u{6587}",
        ];
        for (i, w) in words.iter().enumerate() {
            admin
                .exec_drop("INSERT INTO s VALUES (?, ?)", (w, i))
                .await
                .unwrap();
        }
        let latin = [
            "apple",
            "Banana",
            "\u{c4}pfel",
            "\u{e9}clair",
            "zebra",
            "Zulu",
            "10",
            "9",
            "a",
            "a ",
            "a\t",
        ];
        for (i, w) in latin.iter().enumerate() {
            admin
                .exec_drop("INSERT INTO l VALUES (?, ?)", (w, i))
                .await
                .unwrap();
        }
        let mut r = reader(&db).await;
        let pad = r
            .describe(&TableId::new(schema.clone(), "pad"))
            .await
            .unwrap();
        let padded = pad.key.columns[0].clone();
        assert_eq!(
            padded.kind,
            KeyKind::Text {
                charset: "utf8mb4".into(),
                collation: "utf8mb4_general_ci".into(),
                pad_to: Some(20),
            },
            "{}",
            db.name
        );
        r.check_collation_order(&padded)
            .await
            .unwrap_or_else(|e| panic!("{} padded canary: {e}", db.name));
        // the bare-WEIGHT_STRING method on the same PAD SPACE collation: the canary sees it
        // disagree with ORDER BY
        let mut bare = padded.clone();
        bare.kind = KeyKind::Text {
            charset: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into(),
            pad_to: None,
        };
        let e = r.check_collation_order(&bare).await.unwrap_err();
        assert_eq!(
            e.code(),
            "snapshot_collation_contract_violated",
            "{}",
            db.name
        );
        for table in ["s", "l"] {
            let d = r
                .describe(&TableId::new(schema.clone(), table))
                .await
                .unwrap();
            let col = d.key.columns[0].clone();
            assert!(
                matches!(col.kind, KeyKind::Text { pad_to: None, .. }),
                "{} {table}: {:?}",
                db.name,
                col.kind
            );
            r.check_collation_order(&col)
                .await
                .unwrap_or_else(|e| panic!("{} {table}: {e}", db.name));
            let server: Vec<i64> = admin
                .query(format!("SELECT n FROM {table} ORDER BY k"))
                .await
                .unwrap();
            for size in [1, 2, 3, 100] {
                let (rows, _) = read_all(&mut r, &d, size).await;
                let ns: Vec<i64> = rows
                    .iter()
                    .map(|row| match row.get_by_name("n") {
                        Some(capstan_core::change::Value::Int(n)) => *n,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(ns, server, "{} {table} size {size}", db.name);
                let raws: Vec<Vec<u8>> = rows
                    .iter()
                    .map(|row| match &d.key.key_of(row).unwrap()[0] {
                        KeyPart::Text(b) => b.clone(),
                        other => panic!("{other:?}"),
                    })
                    .collect();
                let refs: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
                let w = r.weights(&col, &refs).await.unwrap();
                assert_eq!(w.len(), refs.len());
                assert!(
                    w.windows(2).all(|p| p[0] < p[1]),
                    "{} {table}: weights not strictly increasing in chunk order",
                    db.name
                );
            }
        }
        // a batch larger than one statement
        let d = r
            .describe(&TableId::new(schema.clone(), "s"))
            .await
            .unwrap();
        let many: Vec<Vec<u8>> = (0..1200).map(|i| format!("k{i:05}").into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        let w = r.weights(&d.key.columns[0], &refs).await.unwrap();
        assert_eq!(w.len(), 1200);
        assert!(w.windows(2).all(|p| p[0] < p[1]));
        drop_schema(&mut admin, &schema).await;
    }
}

/// PAD SPACE keys — MySQL `utf8mb4_general_ci` and `latin1_swedish_ci`, MariaDB's defaults
/// (`utf8mb4_general_ci`, `latin1_swedish_ci`), VARCHAR and CHAR: every row exactly once, in
/// the server's order, at several chunk sizes, and the padded weights strictly increasing in
/// that order. Keys with trailing tabs and control characters (below the space: `'a\t'` sorts
/// before `'a'`), mixed case, accents, digits, prefixes, multi-byte characters and values at
/// the column's full length. A trailing space is the same key (`'a'` = `'a '`): the server
/// refuses the second and the weights tie. The bare-weight method gets this order wrong.
#[tokio::test]
async fn pad_space_keys_chunk_in_server_order_with_padded_weights() {
    for db in servers() {
        // MariaDB: the schema's utf8mb4 default collation is utf8mb4_general_ci (PAD SPACE)
        let utf8_coll = if db.name == "mysql" {
            " COLLATE utf8mb4_general_ci"
        } else {
            ""
        };
        let (mut admin, schema) = setup(
            &db,
            "snap_pad",
            &format!(
                "CREATE TABLE u (k VARCHAR(12) CHARACTER SET utf8mb4{utf8_coll} PRIMARY KEY, n INT); \
                 CREATE TABLE l (k VARCHAR(12) CHARACTER SET latin1 COLLATE latin1_swedish_ci \
                   PRIMARY KEY, n INT); \
                 CREATE TABLE c (k CHAR(6) CHARACTER SET utf8mb4{utf8_coll} PRIMARY KEY, n INT)"
            ),
        )
        .await;
        let common = [
            "apple",
            "Banana",
            "banana2",
            "cherry",
            "\u{c4}pfel",
            "Zulu",
            "zebra",
            "\u{e9}clair",
            "eclairs",
            "10",
            "9",
            "09",
            "a b",
            "a-b",
            "a_b",
            "ABC",
            "abd",
            "ab",
            "a",
            " a",
            "a\t",
            "a\t\t",
            "a\t ",
            "a \t",
            "a\u{1}",
            "a\u{1f}",
            "a\n",
            "ab\t",
            "abc\t",
            "\t",
            "",
            "zzzzzzzzzzzz",
            "a          \t",
            "a\t\t\t\t\t\t\t\t\t\t\t",
            "\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
            "stra\u{df}e",
        ];
        let wide = [
            "\u{3a9}",
            "\u{4e2d}\u{6587}",
            "\u{4e2d}\u{6587}\t",
            "\u{1f600}",
            "\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}\u{4e2d}",
        ];
        let mut tables: Vec<(&str, Vec<&str>, u32)> = vec![
            ("u", common.iter().chain(&wide).copied().collect(), 12),
            ("l", common.to_vec(), 12),
        ];
        let short: Vec<&str> = common
            .iter()
            .chain(&wide)
            .copied()
            .filter(|w| w.chars().count() <= 6)
            .collect();
        tables.push(("c", short, 6));
        let mut r = reader(&db).await;
        for (table, words, len) in tables {
            // keys equal under the collation (case, accents, trailing spaces) keep the first
            for (i, w) in words.iter().enumerate() {
                admin
                    .exec_drop(format!("INSERT IGNORE INTO {table} VALUES (?, ?)"), (w, i))
                    .await
                    .unwrap();
            }
            let dup = admin
                .exec_drop(format!("INSERT INTO {table} VALUES (?, ?)"), ("a ", 999))
                .await
                .unwrap_err();
            assert!(
                dup.to_string().contains("1062"),
                "{} {table}: 'a ' is key 'a': {dup}",
                db.name
            );
            let server: Vec<i64> = admin
                .query(format!("SELECT n FROM {table} ORDER BY k"))
                .await
                .unwrap();
            assert!(server.len() > 25, "{} {table}: {}", db.name, server.len());
            let d = r
                .describe(&TableId::new(schema.clone(), table))
                .await
                .unwrap();
            let col = d.key.columns[0].clone();
            assert!(
                matches!(col.kind, KeyKind::Text { pad_to: Some(n), .. } if n == len),
                "{} {table}: {:?}",
                db.name,
                col.kind
            );
            r.check_collation_order(&col)
                .await
                .unwrap_or_else(|e| panic!("{} {table} canary: {e}", db.name));
            for size in [1, 2, 3, 7, 100] {
                let (rows, _) = read_all(&mut r, &d, size).await;
                let ns: Vec<i64> = rows
                    .iter()
                    .map(|row| match row.get_by_name("n") {
                        Some(capstan_core::change::Value::Int(n)) => *n,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(ns, server, "{} {table} size {size}", db.name);
                let raws: Vec<Vec<u8>> = rows
                    .iter()
                    .map(|row| match &d.key.key_of(row).unwrap()[0] {
                        KeyPart::Text(b) => b.clone(),
                        other => panic!("{other:?}"),
                    })
                    .collect();
                let refs: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
                let w = r.weights(&col, &refs).await.unwrap();
                assert_eq!(w.len(), refs.len());
                assert!(
                    w.windows(2).all(|p| p[0] < p[1]),
                    "{} {table} size {size}: weights not strictly increasing in chunk order",
                    db.name
                );
            }
            // a trailing space is the same key: the weights tie; a tab sorts below it
            let (cs, coll) = match &col.kind {
                KeyKind::Text {
                    charset, collation, ..
                } => (charset.clone(), collation.clone()),
                other => panic!("{other:?}"),
            };
            let enc = |s: &str| -> Vec<u8> {
                if cs == "latin1" {
                    s.chars()
                        .map(|c| u8::try_from(u32::from(c)).unwrap())
                        .collect()
                } else {
                    s.as_bytes().to_vec()
                }
            };
            let probe = [enc("a"), enc("a "), enc("a  "), enc("a\t"), enc("A")];
            let refs: Vec<&[u8]> = probe.iter().map(Vec::as_slice).collect();
            let w = r.weights(&col, &refs).await.unwrap();
            assert_eq!(w[0], w[1], "{} {table}", db.name);
            assert_eq!(w[0], w[2], "{} {table}", db.name);
            assert_eq!(w[0], w[4], "{} {table}", db.name);
            assert!(w[3] < w[0], "{} {table}", db.name);
            // the bare weights order 'a' before 'a\t', the server the other way round
            let mut bare = col.clone();
            bare.kind = KeyKind::Text {
                charset: cs.clone(),
                collation: coll.clone(),
                pad_to: None,
            };
            let bw = r.weights(&bare, &refs).await.unwrap();
            assert!(bw[0] < bw[3], "{} {table}", db.name);
            let e = r.check_collation_order(&bare).await.unwrap_err();
            assert_eq!(
                e.code(),
                "snapshot_collation_contract_violated",
                "{} {table}",
                db.name
            );
        }
        // UCA PAD SPACE with ignorable controls ('a' = 'a\u{1}') and expansions: the bare
        // weight padded in space units agrees with the server on both (weights taken
        // `AS CHAR(n)` did not: MySQL pads by characters, MariaDB cuts at n weights)
        let uca = KeyColumn {
            name: "k".into(),
            position: 0,
            kind: KeyKind::Text {
                charset: "utf8mb4".into(),
                collation: "utf8mb4_unicode_ci".into(),
                pad_to: Some(12),
            },
        };
        r.check_collation_order(&uca)
            .await
            .unwrap_or_else(|e| panic!("{} unicode_ci: {e}", db.name));
        drop_schema(&mut admin, &schema).await;
    }
}

/// How the server compares every pair of `values` under `collation`: `<` and `=`, the
/// comparison the primary key's index and the chunk predicate use.
async fn server_order(
    admin: &mut mysql_async::Conn,
    collation: &str,
    values: &[&str],
) -> Vec<Vec<std::cmp::Ordering>> {
    let rows: Vec<String> = (0..values.len())
        .map(|i| {
            format!(
                "SELECT {i} AS i, CAST(? AS CHAR CHARACTER SET utf8mb4) COLLATE {collation} AS v"
            )
        })
        .collect();
    let sql = format!(
        "WITH d AS ({}) SELECT a.i, b.i, a.v < b.v, a.v = b.v FROM d a JOIN d b",
        rows.join(" UNION ALL ")
    );
    let params: Vec<mysql_async::Value> = values.iter().map(|v| (*v).into()).collect();
    let pairs: Vec<(usize, usize, bool, bool)> = admin.exec(sql, params).await.unwrap();
    let mut out = vec![vec![std::cmp::Ordering::Equal; values.len()]; values.len()];
    assert_eq!(pairs.len(), values.len() * values.len());
    for (i, j, lt, eq) in pairs {
        out[i][j] = match (lt, eq) {
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Equal,
            (false, false) => std::cmp::Ordering::Greater,
            (true, true) => panic!("{collation}: {i} < {j} and {i} = {j}"),
        };
    }
    out
}

/// UCA PAD SPACE keys — `utf8mb4_unicode_ci` (the most common collation of real schemas on
/// MySQL), `utf8mb4_unicode_520_ci` and `utf8mb4_german2_ci` on both servers, VARCHAR(8): a
/// character weighs zero units (U+0001 and U+200B are ignorable: `'a\u{1}\u{1}'` is key `'a'`),
/// one, or several (`ß` is `ss`, U+FDFA is many), so the space padding must be done in weight
/// units, not characters. Every row is read exactly once in the server's order at several
/// chunk sizes, the gate's encoded keys strictly increase in that order, the canary accepts
/// the column, and the encoded keys of every pair of values (stored ones and ones the key
/// refuses as duplicates) compare exactly as the server's `<` and `=` do. Red-capable: with
/// weights taken `AS CHAR(8)`, `'ss'` and `'ß      \t'` (`ß`, six spaces, a tab) order the
/// wrong way round on MySQL, and tie on MariaDB (cut at 8 weights), as do `'ßßßßßßßa'` and
/// `'ßßßßßßßb'`; and `'ß'` and `'ss'` (equal) weigh differently on MySQL.
#[tokio::test]
async fn uca_pad_space_keys_order_as_the_server_compares() {
    use capstan_core::snapshot::{KeyComponent, SnapshotKey};
    // in insertion order: a value equal to an earlier one under the collation is refused by
    // the key (INSERT IGNORE), and is still compared in the pairwise check
    let values = [
        "a\u{1}\u{1}",
        "a",
        "A",
        "a ",
        "a      \t",
        "a\t",
        "a\t ",
        "ab",
        "a b",
        "a  b",
        "Ab",
        "\u{200b}b",
        "b",
        "b\u{200b}",
        "ss",
        "\u{df}",
        "\u{df}      \t",
        "st",
        "sr",
        "s",
        "\u{df}a",
        "ssb",
        "s\u{df}",
        "stra\u{df}e",
        "strasse",
        "stras",
        "\u{df}\u{df}\u{df}\u{df}\u{df}\u{df}\u{df}a",
        "\u{df}\u{df}\u{df}\u{df}\u{df}\u{df}\u{df}b",
        "\u{e9}",
        "e",
        "E",
        "\u{e4}",
        "ae",
        "\u{e6}",
        "\u{c5}",
        "\u{fb01}",
        "fi",
        "\u{1c6}",
        "d\u{17e}",
        "\u{4e2d}",
        "\u{4e2d}\t",
        "\u{1f600}",
        "\u{1f601}",
        "\u{fdfa}",
        "\u{fdfa}a",
        "",
        " ",
        "\t",
        "\u{1}",
        "0",
        "10",
        "9",
        "zz",
    ];
    let collations = [
        "utf8mb4_unicode_ci",
        "utf8mb4_unicode_520_ci",
        "utf8mb4_german2_ci",
    ];
    for db in servers() {
        let ddl: Vec<String> = collations
            .iter()
            .map(|c| {
                format!(
                    "CREATE TABLE `{c}` (k VARCHAR(8) CHARACTER SET utf8mb4 COLLATE {c} \
                     PRIMARY KEY, n INT)"
                )
            })
            .collect();
        let (mut admin, schema) = setup(&db, "snap_uca", &ddl.join("; ")).await;
        let mut r = reader(&db).await;
        for coll in collations {
            let what = format!("{} {coll}", db.name);
            for (i, v) in values.iter().enumerate() {
                admin
                    .exec_drop(format!("INSERT IGNORE INTO `{coll}` VALUES (?, ?)"), (v, i))
                    .await
                    .unwrap();
            }
            let server: Vec<i64> = admin
                .query(format!("SELECT n FROM `{coll}` ORDER BY k"))
                .await
                .unwrap();
            assert!(server.len() > 30, "{what}: {} rows", server.len());
            assert!(server.len() < values.len(), "{what}: no duplicate refused");
            let d = r
                .describe(&TableId::new(schema.clone(), coll))
                .await
                .unwrap();
            let col = d.key.columns[0].clone();
            assert_eq!(
                col.kind,
                KeyKind::Text {
                    charset: "utf8mb4".into(),
                    collation: coll.into(),
                    pad_to: Some(8),
                },
                "{what}"
            );
            r.check_collation_order(&col)
                .await
                .unwrap_or_else(|e| panic!("{what} canary: {e}"));
            let encode = |w: &[u8]| SnapshotKey::encode(&[KeyComponent::Bytes(w)]);
            for size in [1, 2, 3, 7, 100] {
                let (rows, _) = read_all(&mut r, &d, size).await;
                let ns: Vec<i64> = rows
                    .iter()
                    .map(|row| match row.get_by_name("n") {
                        Some(capstan_core::change::Value::Int(n)) => *n,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(ns, server, "{what} size {size}: every row once, in order");
                let raws: Vec<Vec<u8>> = rows
                    .iter()
                    .map(|row| match &d.key.key_of(row).unwrap()[0] {
                        KeyPart::Text(b) => b.clone(),
                        other => panic!("{other:?}"),
                    })
                    .collect();
                let refs: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
                let w = r.weights(&col, &refs).await.unwrap();
                let keys: Vec<SnapshotKey> = w.iter().map(|w| encode(w)).collect();
                for (i, pair) in keys.windows(2).enumerate() {
                    assert!(
                        pair[0] < pair[1],
                        "{what} size {size}: keys of rows n={} and n={} not increasing",
                        ns[i],
                        ns[i + 1]
                    );
                }
            }
            // every pair, stored or refused as a duplicate, compares as the server compares
            let want = server_order(&mut admin, coll, &values).await;
            let refs: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
            let keys: Vec<SnapshotKey> = r
                .weights(&col, &refs)
                .await
                .unwrap()
                .iter()
                .map(|w| encode(w))
                .collect();
            for (i, a) in values.iter().enumerate() {
                for (j, b) in values.iter().enumerate() {
                    assert_eq!(
                        keys[i].cmp(&keys[j]),
                        want[i][j],
                        "{what}: {a:?} against {b:?}"
                    );
                }
            }
        }
        drop_schema(&mut admin, &schema).await;
    }
}

/// The server's current binlog file and position.
async fn binlog_status(admin: &mut mysql_async::Conn, flavor: Flavor) -> (String, u64) {
    let sql = match flavor {
        Flavor::Mysql => "SHOW BINARY LOG STATUS",
        Flavor::Mariadb => "SHOW BINLOG STATUS",
    };
    let row: mysql_async::Row = admin.query_first(sql).await.unwrap().unwrap();
    (row.get("File").unwrap(), row.get("Position").unwrap())
}

#[tokio::test]
async fn position_covers_p0_lock_is_brief_and_identity_matches_the_stream() {
    for db in servers() {
        let _shared = SERVER_WIDE.read().await;
        let (mut admin, schema) = setup(
            &db,
            "snap_pos",
            "CREATE TABLE t (id INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 1)",
        )
        .await;
        let mut r = reader(&db).await;
        let p0 = r.executed_position().await.unwrap();
        admin
            .query_drop("INSERT INTO t VALUES (2, 2)")
            .await
            .unwrap();
        let d = r
            .describe(&TableId::new(schema.clone(), "t"))
            .await
            .unwrap();
        let floor = binlog_status(&mut admin, r.flavor()).await;
        let chunk = r.read_chunk(&d, None, 10).await.unwrap();
        let ceiling = binlog_status(&mut admin, r.flavor()).await;
        assert!(
            p0.is_subset(&chunk.position),
            "{}: G must cover P0",
            db.name
        );
        // the chunk's binlog point (its records' source.file/pos) lies between the two
        let point = chunk.binlog_point.clone().expect("a binlog point");
        let point = (point.file, point.pos);
        assert!(
            floor <= point && point <= ceiling,
            "{}: {point:?} not within {floor:?}..={ceiling:?}",
            db.name
        );
        assert_eq!(chunk.rows.len(), 2, "the insert before G is in the chunk");
        let after = r.executed_position().await.unwrap();
        assert!(chunk.position.is_subset(&after));
        match r.flavor() {
            Flavor::Mysql => {
                let held = chunk.lock_held.expect("mysql locks");
                assert!(held < Duration::from_secs(1), "lock held {held:?}");
            }
            Flavor::Mariadb => {
                assert_eq!(r.capture(), PositionCapture::BinlogSnapshot);
                assert_eq!(chunk.lock_held, None);
                let mut locking = SnapshotReader::open_with(
                    &config(&db),
                    ReaderOptions {
                        capture: Some(PositionCapture::LockTables),
                        ..ReaderOptions::default()
                    },
                )
                .await
                .unwrap();
                let c = locking.read_chunk(&d, None, 10).await.unwrap();
                assert!(c.lock_held.is_some());
                assert!(p0.is_subset(&c.position));
            }
        }
        // the stream names the same server
        let source = start_current(&db, only(&schema, &["t"])).await;
        let id = r.server_identity().await.unwrap();
        assert_eq!(source.server_identity(), id);
        assert!(!id.is_empty());
        drop_schema(&mut admin, &schema).await;
    }
}

#[tokio::test]
async fn lock_wait_timeout_is_lock_unavailable() {
    let Some(db) = mysql() else { return };
    let (mut admin, schema) =
        setup(&db, "snap_lockwait", "CREATE TABLE t (id INT PRIMARY KEY)").await;
    // a writer holding the table's write lock keeps LOCK TABLES … READ waiting
    admin.query_drop("LOCK TABLES t WRITE").await.unwrap();
    let mut r = SnapshotReader::open_with(
        &config(&db),
        ReaderOptions {
            lock_wait_timeout_s: 1,
            ..ReaderOptions::default()
        },
    )
    .await
    .unwrap();
    let d = r
        .describe(&TableId::new(schema.clone(), "t"))
        .await
        .unwrap();
    let e = r.read_chunk(&d, None, 10).await.unwrap_err();
    assert_eq!(e.code(), "snapshot_lock_unavailable");
    assert!(e.is_transient());
    admin.query_drop("UNLOCK TABLES").await.unwrap();
    // the reader is usable afterwards
    let c = r.read_chunk(&d, None, 10).await.unwrap();
    assert!(c.last);
    drop_schema(&mut admin, &schema).await;
}

fn with_tls(db: &DbEnv, mode: TlsMode, ca_file: Option<std::path::PathBuf>) -> ValidSourceConfig {
    let mut raw = raw_config(db);
    raw.tls = Some(TlsConfig {
        mode: Some(mode),
        ca_file,
    });
    raw.validate().unwrap()
}

/// `verify_ca` on the snapshot reader is the stream's (one TLS client, `tls.rs`): the chain is
/// checked against `ca_file`, the host name is not (MySQL's auto-generated server certificate
/// names no host; the dev servers are reached as 127.0.0.1). A snapshot reads over it on both
/// servers, and the stream connects with the same configuration.
#[tokio::test]
async fn verify_ca_snapshots_against_the_dev_ca() {
    for db in servers() {
        let Some(ca) = ca_file(&db) else { continue };
        let config = with_tls(&db, TlsMode::VerifyCa, Some(ca));
        SourceClient::open(&config, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("{} stream verify_ca: {e}", db.name));
        let (mut admin, schema) = setup(
            &db,
            "snap_tls",
            "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10)); \
             INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL)",
        )
        .await;
        let mut r = SnapshotReader::open(&config)
            .await
            .unwrap_or_else(|e| panic!("{} verify_ca: {e}", db.name));
        assert!(!r.server_identity().await.unwrap().is_empty());
        let d = r
            .describe(&TableId::new(schema.clone(), "t"))
            .await
            .unwrap();
        let (rows, shape) = read_all(&mut r, &d, 2).await;
        assert_eq!(rows.len(), 3, "{}", db.name);
        assert_eq!(shape, vec![(2, false), (1, true)], "{}", db.name);
        drop_schema(&mut admin, &schema).await;
    }
}

/// `verify_ca` with a CA that did not sign the server's certificate (one of the same name and
/// another key, the other dev server's CA), or a file that holds no certificate, is refused at
/// the TLS handshake: a definite, value-free `snapshot_query_tls_failed` that names neither
/// the file nor the account. `disabled` connects without TLS.
#[tokio::test]
async fn verify_ca_refuses_a_ca_that_did_not_sign_the_server_certificate() {
    let all = servers();
    for db in &all {
        let mut wrong = Vec::new();
        let same_name = match db.name {
            "mariadb" => MARIADB_DEV_CA_NAME,
            _ => "capstan-foreign-ca",
        };
        let foreign = std::env::temp_dir().join(format!("{}.pem", unique_name("foreign_ca")));
        std::fs::write(&foreign, foreign_ca_pem(same_name)).unwrap();
        wrong.push(foreign);
        let bogus = std::env::temp_dir().join(format!("{}.pem", unique_name("bogus_ca")));
        std::fs::write(&bogus, "not a certificate").unwrap();
        wrong.push(bogus);
        let own = ca_file(db);
        if let Some(other) = all.iter().find(|o| o.name != db.name).and_then(ca_file) {
            if Some(&other) != own.as_ref() {
                wrong.push(other);
            }
        }
        for ca in &wrong {
            let e = SnapshotReader::open(&with_tls(db, TlsMode::VerifyCa, Some(ca.clone())))
                .await
                .expect_err("a CA that did not sign the certificate must be refused");
            assert_eq!(e.code(), "snapshot_query_tls_failed", "{}: {e}", db.name);
            assert!(!e.is_transient(), "{}: {e}", db.name);
            let msg = e.to_string();
            let file = ca.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!msg.contains(&file), "{msg}");
            assert!(
                !msg.contains(&db.password) && !msg.contains(&db.user),
                "{msg}"
            );
        }
        for ca in wrong.iter().take(2) {
            let _ = std::fs::remove_file(ca);
        }
        let mut r = SnapshotReader::open(&with_tls(db, TlsMode::Disabled, None))
            .await
            .unwrap();
        assert!(!r.server_identity().await.unwrap().is_empty());
    }
}

/// Every column type, written once, read back through the binlog and through `read_chunk`:
/// the rows must be equal.
#[tokio::test]
async fn chunk_rows_equal_binlog_rows() {
    for db in servers() {
        let _shared = SERVER_WIDE.read().await;
        let is_mysql = db.name == "mysql";
        let mysql_only_cols = if is_mysql { ", v VECTOR(3)" } else { "" };
        let ddl = format!(
            "CREATE TABLE t (id INT PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, \
             su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, \
             bi BIGINT, bu BIGINT UNSIGNED, de DECIMAL(30,10), d0 DECIMAL(5,0), d2 DECIMAL(6,2), \
             fl FLOAT, do DOUBLE, ch CHAR(5), vc VARCHAR(50), vl VARCHAR(50) CHARACTER SET latin1, \
             tx TEXT, lt LONGTEXT CHARACTER SET latin1, bn BINARY(4), vb VARBINARY(10), bl BLOB, \
             d DATE, t0 TIME, t3 TIME(3), t6 TIME(6), dt DATETIME, dt6 DATETIME(6), \
             ts TIMESTAMP(2) NULL, ts0 TIMESTAMP NULL, y YEAR, bt BIT(10), b1 BIT(1), b64 BIT(64), \
             e ENUM('red','green','blue'), s SET('a','b','c','d'), j JSON, g GEOMETRY, p POINT \
             {mysql_only_cols}, n INT NULL)"
        );
        let (mut admin, schema) = setup(&db, "snap_vals", &ddl).await;
        admin.query_drop("SET SESSION sql_mode = ''").await.unwrap();
        let mut source = start_current(&db, only(&schema, &["t"])).await;
        let vec_val = if is_mysql {
            ", STRING_TO_VECTOR('[1.5,-2,3e-5]')"
        } else {
            ""
        };
        let vec_null = if is_mysql { ", NULL" } else { "" };
        let rows = [
            format!(
                "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, \
                 -9223372036854775808, 18446744073709551615, -12345678901234567890.0123456789, \
                 -99999, -0.5, 1.5, -2.25, 'ab', _utf8mb4'h\u{e9}llo \u{1F600}', \
                 _utf8mb4'h\u{e9}llo', 'text', _utf8mb4'caf\u{e9}', X'01020000', X'ff00', \
                 X'deadbeef', '2024-02-29', '-838:59:59', '-12:34:56.789', '-00:00:00.000001', \
                 '9999-12-31 23:59:59', '2024-01-02 03:04:05.123456', \
                 '2024-01-02 03:04:05.12', '2038-01-19 03:14:07', 2155, b'1010101010', b'1', \
                 b'1111111111111111111111111111111111111111111111111111111111111111', 'green', \
                 'd,a', '{{\"k\": [1, 2.5, \"x\", null, true], \"a\": {{\"b\": -1e300}}, \
                 \"s\": \"q\\\\\"uote\"}}', ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), \
                 ST_GeomFromText('POINT(1 2)'){vec_val}, 7)"
            ),
            format!(
                "(2, 0, 0, 0, 0, 0, 0, 0, 0, 9223372036854775807, 9223372036854775808, 0, 0, \
                 0.01, -0, 1e300, '', '', '', '', '', X'', X'', X'', '0000-00-00', '00:00:00', \
                 '838:59:59.999', '-00:00:01', '0000-00-00 00:00:00', '1000-01-01 00:00:00', \
                 '0000-00-00 00:00:00', '1970-01-01 00:00:01', 0, b'0', b'0', b'0', '', '', \
                 '[]', ST_GeomFromText('POINT(0 0)', 4326), ST_GeomFromText('POINT(-1.5 2.5)'){vec_val}, NULL)"
            ),
            format!(
                "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                 NULL, NULL{vec_null}, NULL)"
            ),
        ];
        admin
            .query_drop(format!("INSERT INTO t VALUES {}", rows.join(", ")))
            .await
            .unwrap();
        let txn = next_txn(&mut source, &schema).await;
        assert!(txn.changes.iter().all(|c| c.op == Op::Insert));
        let streamed: Vec<Row> = txn
            .changes
            .iter()
            .map(|c| c.after.clone().unwrap())
            .collect();
        assert_eq!(streamed.len(), 3);
        let mut r = reader(&db).await;
        let d = r
            .describe(&TableId::new(schema.clone(), "t"))
            .await
            .unwrap();
        let (read, _) = read_all(&mut r, &d, 2).await;
        assert_eq!(read.len(), 3);
        let mut mismatches = Vec::new();
        for (s, c) in streamed.iter().zip(&read) {
            assert_eq!(s.columns(), c.columns(), "{}: column names", db.name);
            for ((name, sv), cv) in s.iter().zip(c.values()) {
                if sv != cv {
                    mismatches.push(format!(
                        "{} row {:?} column {name}: binlog {:?} / select {:?}",
                        db.name,
                        s.get(0),
                        sv.to_sql_text().unwrap_or_else(|| format!("{sv:?}")),
                        cv.to_sql_text().unwrap_or_else(|| format!("{cv:?}")),
                    ));
                }
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
        drop_schema(&mut admin, &schema).await;
    }
}
