//! `capstan verify` against a real pipeline (MySQL → Kafka, three workers): after an initial
//! snapshot and streamed changes it reports the topics equal to the source (exit 0, exact
//! counts); after the topic and the source are made to disagree on purpose — a forged record
//! produced to the topic, a row deleted and another updated with the binlog off for that
//! session, so the pipeline never sees them — it reports exactly those rows, by key digest
//! (exit 1), value-free; a pipeline it cannot find is exit 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use capstan_tests::live_pipeline::LiveSchema;
use capstan_tests::verify_run::{key_digest, verify_pipeline};
use capstan_tests::{kafka, mysql};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(60);

#[test]
fn verify_reports_a_matching_pipeline_clean_and_each_planted_difference() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let password = db.password.clone();
    // orders: 40 rows with a primary key; tags: keyed by a unique key only (null record keys)
    let live = LiveSchema::with_orders(db, "verify", 40);
    live.sql(
        "CREATE TABLE `{schema}`.tags (code INT NOT NULL, n INT, UNIQUE KEY by_code (code)); \
         INSERT INTO `{schema}`.tags VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50)",
    );
    let Some(c) = Cluster::start(3) else { return };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("a leader");
    let url = c.workers[&leader].api();
    let bootstrap = kafka.bootstrap_servers().to_string();
    let server_id = 7000 + std::process::id() % 500;
    let mut def = live.definition("verified", "mysql", server_id, "orders", &bootstrap, "vf");
    def["tables"]["include"] = json!([
        format!("{}.orders", live.name),
        format!("{}.tags", live.name)
    ]);
    def["snapshot"] = json!({"mode": "initial"});
    c.create_streaming(leader, &def, SETTLE);

    // streamed changes of both tables
    live.sql(
        "INSERT INTO `{schema}`.orders VALUES (41, 'n'), (42, 'n'), (43, 'n'), (44, 'n'), (45, 'n'); \
         UPDATE `{schema}`.orders SET note = 'updated' WHERE id = 1; \
         DELETE FROM `{schema}`.orders WHERE id = 2; \
         UPDATE `{schema}`.tags SET n = 11 WHERE code = 1; \
         DELETE FROM `{schema}`.tags WHERE code = 2; \
         INSERT INTO `{schema}`.tags VALUES (6, 60)",
    );
    let orders = format!("{}.orders", live.name);
    let tags = format!("{}.tags", live.name);

    // clean: waits until the checkpoint covers the source, then compares
    let run = verify_pipeline(
        &url,
        "verified",
        &password,
        &["--format", "json", "--wait-for-checkpoint", "60"],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.report();
    assert_eq!(report["clean"], true, "{run:?}");
    assert_eq!(report["pipeline"], "verified");
    let o = run.table(&orders);
    assert_eq!(o["topic"], format!("vf.{orders}"));
    // 40 snapshot rows + 5 inserts - 1 delete
    assert_eq!(
        (o["source_rows"].as_u64(), o["topic_keys"].as_u64()),
        (Some(44), Some(44))
    );
    // 40 r, 5 c, 1 u, 1 d and its tombstone (the snapshot-complete marker is on the
    // control topic)
    assert_eq!(o["records"]["records"], 48, "{o}");
    assert_eq!(o["records"]["row_events"], 47, "{o}");
    assert_eq!(o["records"]["tombstones"], 1, "{o}");
    assert_eq!(o["records"]["skipped"], 0, "{o}");
    for category in ["missing", "extra", "differing", "unreadable", "duplicates"] {
        assert_eq!(o[category]["count"], 0, "{category}: {o}");
    }
    let t = run.table(&tags);
    assert_eq!(
        (t["source_rows"].as_u64(), t["topic_keys"].as_u64()),
        (Some(5), Some(5))
    );
    // 5 r, u, d, its tombstone, c: a table keyed by a NOT NULL unique key only is keyed
    // by it, in the snapshot's records and the streamed ones alike (MySQL's binlog names
    // that key as the table's primary key)
    assert_eq!(t["records"]["records"], 9, "{t}");
    assert_eq!(t["records"]["tombstones"], 1, "{t}");
    assert_eq!(t["missing"]["count"], 0, "{t}");
    assert_eq!(t["differing"]["count"], 0, "{t}");
    assert_eq!(report["totals"]["source_rows"], 49);

    // now make them disagree: a forged record on the topic, and two source changes the
    // pipeline never sees (binlog off for the session)
    let forged_value = json!({
        "before": null, "after": {"id": 1000, "note": "forged-value"},
        "source": {"db": live.name, "table": "orders"}, "op": "c", "ts_ms": 0
    });
    produce(
        &bootstrap,
        &format!("vf.{orders}"),
        r#"{"id":1000}"#,
        &forged_value,
    );
    live.sql(
        "SET SESSION sql_log_bin = 0; \
         DELETE FROM `{schema}`.orders WHERE id = 3; \
         UPDATE `{schema}`.orders SET note = 'hidden-change' WHERE id = 4; \
         SET SESSION sql_log_bin = 1",
    );
    let run = verify_pipeline(&url, "verified", &password, &["--format", "json"]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let report = run.report();
    assert_eq!(report["clean"], false);
    let o = run.table(&orders);
    assert_eq!(o["source_rows"], 43, "{o}");
    assert_eq!(o["topic_keys"], 45, "{o}");
    let example = |category: &str| -> Value { o[category]["examples"].clone() };
    assert_eq!(o["missing"]["count"], 0, "{o}");
    // id 3: on the topic, not in the source any more
    assert_eq!(o["extra"]["count"], 2, "{o}");
    let mut extra: Vec<String> = example("extra")
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect();
    extra.sort();
    let mut want = vec![key_digest(r#"{"id":1000}"#), key_digest(r#"{"id":3}"#)];
    want.sort();
    assert_eq!(extra, want, "{o}");
    assert!(
        example("extra")
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["partition"].is_i64() && e["offset"].is_i64()),
        "{o}"
    );
    assert_eq!(o["differing"]["count"], 1, "{o}");
    assert_eq!(example("differing")[0]["key"], key_digest(r#"{"id":4}"#));
    assert_eq!(report["totals"]["extra"], 2);
    assert_eq!(report["totals"]["differing"], 1);
    // the other table is untouched
    assert_eq!(run.table(&tags)["extra"]["count"], 0);

    // a row the pipeline never saw inserted is missing
    live.sql(
        "SET SESSION sql_log_bin = 0; \
         INSERT INTO `{schema}`.tags VALUES (77, 770); \
         SET SESSION sql_log_bin = 1",
    );
    let run = verify_pipeline(&url, "verified", &password, &["--table", &tags]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let text = &run.stdout;
    assert!(
        text.contains(&format!(
            "    missing key {}\n",
            key_digest(r#"{"code":77}"#)
        )),
        "{text}"
    );
    assert!(text.contains("missing 1, extra 0, differing 0"), "{text}");
    assert!(!text.contains(&orders), "--table limits the check: {text}");
    // value-free: no row value, no password
    for secret in ["forged-value", "hidden-change", "an order", &password] {
        assert!(
            !text.contains(secret) && !run.stderr.contains(secret),
            "{run:?}"
        );
    }

    // cannot compare: exit 2 with the code
    let run = verify_pipeline(&url, "no-such-pipeline", &password, &[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr.contains("capstan: unknown_pipeline: "),
        "{run:?}"
    );
    let run = verify_pipeline(&url, "verified", &password, &["--table", "other.t"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("capstan: invalid_table: --table other.t: is not captured by the pipeline"),
        "{run:?}"
    );
    live.sql("DROP DATABASE `{schema}`");
}

/// Produces one record as a foreign producer would (no capstan headers).
fn produce(bootstrap: &str, topic: &str, key: &str, value: &Value) {
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let payload = value.to_string();
    producer
        .send(BaseRecord::to(topic).key(key).payload(&payload))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// The registry of the dev services (`deploy/dev/services.sh up`), or a skip.
fn registry_url() -> Option<String> {
    std::env::var("CAPSTAN_TEST_REGISTRY_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            capstan_tests::skip_or_fail(
                "CAPSTAN_TEST_REGISTRY_URL is not set; run `deploy/dev/services.sh up`",
            )
        })
}

/// Every `kafka.format` reads back: pipelines of the same two tables in
/// `debezium_json_schema` (the payload of each schema'd record) and `avro` (each datum decoded
/// with the schema its framing's id names in the registry) verify clean, with exact counts;
/// then a source change the pipelines never see — a decimal and a note, binlog off — shows in
/// both as exactly those two differing rows, so the values of these formats are really
/// compared; and a record on the Avro topic that is not Avro is unreadable, not ignored.
#[test]
fn verify_reads_schema_json_and_avro_topics_back() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let Some(registry) = registry_url() else {
        return;
    };
    let password = db.password.clone();
    let live = LiveSchema::with_orders(db, "verifyfmt", 20);
    live.sql(
        "CREATE TABLE `{schema}`.typed (id INT PRIMARY KEY, price DECIMAL(10,2), ratio FLOAT, \
         d DOUBLE, dt DATETIME(3), ts TIMESTAMP(6) NULL, b VARBINARY(8), bits BIT(10), \
         e ENUM('x','y'), j JSON, day DATE); \
         INSERT INTO `{schema}`.typed VALUES \
         (1, 12.34, 0.5, -1.25, '2024-01-31 10:11:12.123', '2024-01-31 10:11:12.654321', \
          x'00ff', b'1010101010', 'y', '{\"a\": 1}', '2024-01-31'), \
         (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), \
         (3, -0.01, 3.4e38, 1e300, '1970-01-01 00:00:00', '1999-12-31 23:59:59', x'', b'0', \
          'x', '[]', '1000-01-01')",
    );
    let Some(c) = Cluster::start(3) else { return };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("a leader");
    let url = c.workers[&leader].api();
    let bootstrap = kafka.bootstrap_servers().to_string();
    let orders = format!("{}.orders", live.name);
    let typed = format!("{}.typed", live.name);
    let pipelines = [("vjs", "debezium_json_schema"), ("vav", "avro")];
    for (i, (name, format)) in pipelines.iter().enumerate() {
        let server_id = 7600 + std::process::id() % 300 + i as u32;
        // the topic prefix is unique per run: the registry keeps the subjects of earlier runs
        let prefix = format!("{name}{}", std::process::id());
        let mut def = live.definition(name, "mysql", server_id, "orders", &bootstrap, &prefix);
        def["tables"]["include"] = json!([orders, typed]);
        def["snapshot"] = json!({"mode": "initial"});
        def["kafka"]["format"] = json!(format);
        if *format == "avro" {
            def["kafka"]["schema_registry"] = json!({"url": registry});
        }
        c.create_streaming(leader, &def, SETTLE);
    }
    live.sql(
        "INSERT INTO `{schema}`.orders VALUES (21, 'n'); \
         DELETE FROM `{schema}`.orders WHERE id = 2; \
         UPDATE `{schema}`.typed SET price = 99.99, dt = '2025-02-03 04:05:06.789' WHERE id = 1; \
         DELETE FROM `{schema}`.typed WHERE id = 3; \
         INSERT INTO `{schema}`.typed (id, price, bits, day) VALUES (4, 1.00, b'1', '2000-02-29')",
    );
    for (name, format) in pipelines {
        let run = verify_pipeline(
            &url,
            name,
            &password,
            &["--format", "json", "--wait-for-checkpoint", "60"],
        );
        assert_eq!(run.code, Some(0), "{format}: {run:?}");
        let o = run.table(&orders);
        // 20 r, 1 c, 1 d and its tombstone
        assert_eq!(
            (o["source_rows"].as_u64(), o["topic_keys"].as_u64()),
            (Some(20), Some(20)),
            "{format}: {o}"
        );
        assert_eq!(o["records"]["records"], 23, "{format}: {o}");
        let t = run.table(&typed);
        // 3 r, 1 u, 1 d and its tombstone, 1 c
        assert_eq!(
            (t["source_rows"].as_u64(), t["topic_keys"].as_u64()),
            (Some(3), Some(3)),
            "{format}: {t}"
        );
        assert_eq!(t["records"]["records"], 7, "{format}: {t}");
        for table in [&o, &t] {
            assert_eq!(table["records"]["unreadable"], 0, "{format}: {table}");
            for category in ["missing", "extra", "differing", "unreadable", "duplicates"] {
                assert_eq!(table[category]["count"], 0, "{format} {category}: {table}");
            }
        }
    }

    // changes the pipelines never see: one decimal, one note
    live.sql(
        "SET SESSION sql_log_bin = 0; \
         UPDATE `{schema}`.typed SET price = 12.35 WHERE id = 1; \
         UPDATE `{schema}`.orders SET note = 'hidden-change' WHERE id = 5; \
         SET SESSION sql_log_bin = 1",
    );
    // and a record on the Avro topic that is not Avro
    let avro_orders = format!("vav{}.{orders}", std::process::id());
    produce(
        &bootstrap,
        &avro_orders,
        r#"{"id":1000}"#,
        &json!({"after": {"id": 1000}, "op": "c"}),
    );
    for (name, format) in pipelines {
        let run = verify_pipeline(&url, name, &password, &["--format", "json"]);
        assert_eq!(run.code, Some(1), "{format}: {run:?}");
        let t = run.table(&typed);
        assert_eq!(t["differing"]["count"], 1, "{format}: {t}");
        assert_eq!(
            t["differing"]["examples"][0]["key"],
            key_digest(r#"{"id":1}"#),
            "{format}: {t}"
        );
        let o = run.table(&orders);
        assert_eq!(o["differing"]["count"], 1, "{format}: {o}");
        assert_eq!(
            o["differing"]["examples"][0]["key"],
            key_digest(r#"{"id":5}"#),
            "{format}: {o}"
        );
        let foreign = u64::from(format == "avro");
        assert_eq!(o["unreadable"]["count"], foreign, "{format}: {o}");
        assert_eq!(o["extra"]["count"], 0, "{format}: {o}");
        assert!(
            !run.stdout.contains("hidden-change") && !run.stderr.contains("hidden-change"),
            "{run:?}"
        );
    }
    live.sql("DROP DATABASE `{schema}`");
}
