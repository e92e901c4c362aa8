//! A Flink-style `debezium-json` reader reads capstan's topics end to end (issue 15):
//! `deploy/dev/flink_debezium_json.py` follows the rules of Flink's `debezium-json` format
//! (every non-tombstone record a JSON object with an `op` of c/r/u/d and the images the op
//! needs; `debezium-json.schema-include` takes the event from `payload`; anything else is
//! "Corrupt Debezium JSON message" and fails the run — parse errors are never ignored) and
//! applies the changelog (+I, -U, +U, -D) to a multiset of rows, where a retraction must find
//! its row. A live pipeline's snapshot + stream topic, in `debezium_json` and in
//! `debezium_json_schema`, must read without a single refused record and give the rows the
//! source table holds. The reader's own self-test checks it refuses a record without `op`
//! (capstan's earlier snapshot-complete marker on a table topic) and the other malformed cases.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::process::Command;
use std::time::Duration;

use capstan_kafka::topic_reader::ConsumedRecord;
use mysql_async::prelude::*;
use serde_json::{json, Value};
use snapshot_common::*;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/dev/flink_debezium_json.py"
);

#[test]
fn the_reader_refuses_what_flink_refuses() {
    if Command::new("python3").arg("-V").output().is_err() {
        capstan_tests::skip_or_fail::<()>("python3 is not installed");
        return;
    }
    let out = Command::new("python3")
        .args([SCRIPT, "--self-test"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // and a topic holding the old marker fails the whole run
    let file = tempfile::NamedTempFile::new().unwrap();
    let marker = br#"{"snapshot_complete":{"db":"shop","table":"orders","rows":1}}"#;
    let change = br#"{"before":null,"after":{"id":1},"op":"r"}"#;
    let doc = json!({"records": [{"key": null, "value": base64(change)},
                                 {"key": null, "value": base64(marker)}]});
    std::fs::write(file.path(), serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = Command::new("python3")
        .arg(SCRIPT)
        .arg(file.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "flink_debezium_json: record 1: Corrupt Debezium JSON message: unknown \"op\" value None"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_and_stream_read_as_flink_reads_them() {
    flink("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_snapshot_and_stream_read_as_flink_reads_them() {
    flink("mariadb").await;
}

async fn flink(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    if Command::new("python3").arg("-V").output().is_err() {
        capstan_tests::skip_or_fail::<()>("python3 is not installed");
        return;
    }
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "flink").await;
    let t = qt(&schema, "t");
    let rows: Vec<String> = (1..=6)
        .map(|n| format!("({n}, 'n{n}', {}, {n}.25, '2024-01-{n:02}')", n * 10))
        .collect();
    admin
        .query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(40), qty INT, \
             price DECIMAL(10,2), d DATE); INSERT INTO {t} VALUES {}",
            rows.join(",")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let table = format!("{schema}.t");
    let cases = [
        ("flinkplain", "fp", "debezium_json", false),
        ("flinkschema", "fs", "debezium_json_schema", true),
    ];
    for (name, prefix, format, _) in cases {
        world.one_partition(&[topic(prefix, &schema, "t")]);
        let mut def = world.definition(
            name,
            std::slice::from_ref(&table),
            json!({"mode": "initial", "chunk_size": 2}),
            "at_least_once",
            prefix,
        );
        def["kafka"]["format"] = json!(format);
        def["kafka"]["type_mapping"] = json!({"decimal_handling_mode": "string"});
        world.create_and_resume(def).await;
    }
    // the stream starts once both snapshots are complete (their markers are on the control
    // topics), so no change is both in a chunk and streamed
    for (name, prefix, _, _) in cases {
        world
            .wait_status(name, Duration::from_secs(120), "streaming", |s| {
                s["state"] == "streaming" || s["state"] == "failed"
            })
            .await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while world.markers(prefix, &schema, "t").await.is_empty() {
            assert!(std::time::Instant::now() < deadline, "{name}: no marker");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    admin
        .query_drop(format!(
            "INSERT INTO {t} VALUES (7, 'n7', 70, 7.5, '2024-02-29'); \
             UPDATE {t} SET name = 'renamed', price = -0.01 WHERE id = 2; \
             UPDATE {t} SET qty = NULL, d = NULL WHERE id IN (3, 4); \
             DELETE FROM {t} WHERE id = 5; \
             UPDATE {t} SET id = 60 WHERE id = 6; \
             INSERT INTO {t} (id) VALUES (999)"
        ))
        .await
        .unwrap();
    let want = source_rows_flink(&mut admin, &t).await;
    for (name, prefix, _, schema_include) in cases {
        let records = world
            .read_until(
                &topic(prefix, &schema, "t"),
                Duration::from_secs(90),
                |rs| rs.iter().any(|r| is_sentinel(r, schema_include)),
            )
            .await;
        let result = run_reader(&records, schema_include);
        assert_eq!(by_id(&result["rows"]), want, "{flavor} {name}: rows");
        // 6 reads + 2 inserts = +I; 3 updates; the delete and the key change's delete = -D
        assert_eq!(
            result["changes"],
            json!({"+I": 9, "-U": 3, "+U": 3, "-D": 2}),
            "{flavor} {name}"
        );
        assert_eq!(result["tombstones"], 2, "{flavor} {name}");
    }
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}

fn is_sentinel(r: &ConsumedRecord, schema_include: bool) -> bool {
    r.value.as_ref().is_some_and(|v| {
        let v: Value = serde_json::from_slice(v).unwrap();
        let p = if schema_include { &v["payload"] } else { &v };
        p["after"]["id"] == 999
    })
}

/// The reader over `records`: its output, or a panic with its refusal.
fn run_reader(records: &[ConsumedRecord], schema_include: bool) -> Value {
    let file = tempfile::NamedTempFile::new().unwrap();
    let b64 = |b: &Option<Vec<u8>>| b.as_ref().map(|b| base64(b));
    let doc = json!({"records": records.iter()
        .map(|r| json!({"key": b64(&r.key), "value": b64(&r.value)}))
        .collect::<Vec<_>>()});
    std::fs::write(file.path(), serde_json::to_vec(&doc).unwrap()).unwrap();
    let mut cmd = Command::new("python3");
    cmd.arg(SCRIPT);
    if schema_include {
        cmd.arg("--schema-include");
    }
    let out = cmd.arg(file.path()).output().unwrap();
    assert!(
        out.status.success(),
        "the reader refused the topic: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// id, name, qty, price as text, days since the epoch.
type SourceRow = (
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
);

/// The source rows as `debezium_json` writes them with `decimal_handling_mode: string`
/// (DATE as days since the epoch), by id.
async fn source_rows_flink(conn: &mut mysql_async::Conn, t: &str) -> Vec<Value> {
    let rows: Vec<SourceRow> = conn
        .query(format!(
            "SELECT id, name, qty, CAST(price AS CHAR), DATEDIFF(d, '1970-01-01') FROM {t} \
             ORDER BY id"
        ))
        .await
        .unwrap();
    rows.into_iter()
        .map(|(id, name, qty, price, d)| {
            json!({"id": id, "name": name, "qty": qty, "price": price, "d": d})
        })
        .collect()
}

/// The reader's rows (a multiset: duplicates stay) by id.
fn by_id(rows: &Value) -> Vec<Value> {
    let mut rows = rows.as_array().unwrap().clone();
    rows.sort_by_key(|r| r["id"].as_i64().unwrap());
    rows
}
