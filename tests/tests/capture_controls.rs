//! Capture controls (issue 18 item 4) end to end on three real worker processes against the
//! MySQL 9.x and MariaDB dev servers and the real Kafka broker:
//!
//! - a masked, a hashed and an excluded column, snapshot and stream: no record, worker log
//!   line or metric holds an excluded or masked value (each inserted value is distinct and
//!   searched for), hashed values are `sha256(salt || value)`, the Connect schema lacks the
//!   excluded column and types the masked one a string;
//! - include/exclude patterns for schemas and tables pick exactly the intended tables, and a
//!   routed shard set (three shards with overlapping ids) lands in one topic whose replay by
//!   key is the union of the shards; `capstan verify` finds the routed pipeline clean.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use capstan_tests::unique_name;
use capstan_tests::verify_run::verify_pipeline;
use mysql_async::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use snapshot_common::*;

const PHYSICAL: &str = "__dbz__physicalTableIdentifier";

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The topics the broker has.
fn broker_topics(bootstrap: &str) -> BTreeSet<String> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    md.topics().iter().map(|t| t.name().to_string()).collect()
}

/// Every worker's whole log and `/metrics` text.
async fn logs_and_metrics(world: &World) -> String {
    let (logs, apis) = world
        .blocking(|c| {
            let ids: Vec<u64> = c.workers.keys().copied().collect();
            let logs: String = ids.iter().map(|&id| c.log(id)).collect();
            let apis: Vec<String> = ids.iter().map(|id| c.workers[id].api()).collect();
            (logs, apis)
        })
        .await;
    let mut text = logs;
    for api in apis {
        if let Ok(r) = reqwest::get(format!("{api}/metrics")).await {
            text.push_str(&r.text().await.unwrap_or_default());
        }
    }
    text
}

// ---------------------------------------------------------------------------------------
// 1. masked, hashed and excluded columns

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_masked_and_excluded_columns_never_leave_the_source() {
    masking("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_masked_and_excluded_columns_never_leave_the_source() {
    masking("mariadb").await;
}

async fn masking(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "cmask").await;
    // every secret value carries this tag, so a scan for it finds any of them
    let tag = unique_name("SECRETTAG").replace('_', "");
    let salt = unique_name("pepper");
    admin
        .query_drop(format!(
            "CREATE TABLE {} (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, \
             ssn VARCHAR(64), card VARCHAR(64), email VARCHAR(128))",
            qt(&schema, "customers")
        ))
        .await
        .unwrap();
    let row = |i: u32, v: &str| {
        format!(
            "({i}, 'name{i}', 'ssn{tag}{v}{i}', 'card{tag}{v}{i}', 'mail{tag}{v}{i}@example.com')"
        )
    };
    let seed: Vec<String> = (1..=20).map(|i| row(i, "s")).collect();
    admin
        .query_drop(format!(
            "INSERT INTO {} VALUES {}; INSERT INTO {} VALUES (21, 'name21', NULL, NULL, NULL)",
            qt(&schema, "customers"),
            seed.join(", "),
            qt(&schema, "customers")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let topic = topic("cm", &schema, "customers");
    world.one_partition(std::slice::from_ref(&topic));
    let mut def = world.definition(
        "masked",
        &[format!("{schema}.customers")],
        json!({"mode": "initial", "chunk_size": 7}),
        "at_least_once",
        "cm",
    );
    def["kafka"]["format"] = json!("debezium_json_schema");
    def["columns"] = json!({
        "exclude": [format!("{schema}.customers.ssn")],
        "mask": [{"chars": 5, "columns": [{"regex": format!("{schema}\\.cust[a-z]+\\.card")}]}],
        "hash": {"salt": salt, "columns": [format!("{schema}.customers.email")]}
    });
    world.create_and_resume(def).await;
    let table = format!("{schema}.customers");
    world
        .wait_status(
            "masked",
            Duration::from_secs(120),
            "snapshot complete",
            |s| table_status(s, &table)["status"] == "complete" && s["state"] == "streaming",
        )
        .await;
    // the stream: inserts, an update of every controlled column, a delete
    let streamed: Vec<String> = (22..=25).map(|i| row(i, "c")).collect();
    admin
        .query_drop(format!(
            "INSERT INTO {t} VALUES {}; \
             UPDATE {t} SET ssn = 'ssn{tag}u1', card = 'card{tag}u1', \
             email = 'mail{tag}u1@example.com' WHERE id = 1; \
             DELETE FROM {t} WHERE id = 2",
            streamed.join(", "),
            t = qt(&schema, "customers")
        ))
        .await
        .unwrap();
    let records = world
        .read_until(&topic, Duration::from_secs(120), |rs| {
            // 21 reads, 4 creates, 1 update, 1 delete and its tombstone
            rs.len() >= 28
        })
        .await;
    assert_eq!(records.len(), 28, "every event, once");

    // no raw secret in any key or value
    for r in &records {
        for bytes in [&r.key, &r.value].into_iter().flatten() {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains(&tag), "a secret left the source: {text}");
            assert!(!text.contains(&salt), "the salt left the source");
        }
    }
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    let mut checked_images = 0;
    for r in &records {
        let Some(value) = &r.value else { continue };
        let v: Value = serde_json::from_slice(value).unwrap();
        let payload = &v["payload"];
        *ops.entry(payload["op"].as_str().unwrap().to_string())
            .or_default() += 1;
        // the Connect schema: no ssn, card and email strings
        let fields = after_schema_fields(&v);
        let want: Vec<(String, String)> = [
            ("id", "int32"),
            ("name", "string"),
            ("card", "string"),
            ("email", "string"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(fields, want);
        let op = payload["op"].as_str().unwrap().to_string();
        for (side, image) in [("before", &payload["before"]), ("after", &payload["after"])] {
            let Some(image) = image.as_object() else {
                continue;
            };
            // (serde_json's map sorts its keys)
            let keys: Vec<&str> = image.keys().map(String::as_str).collect();
            assert_eq!(keys, ["card", "email", "id", "name"], "{image:?}");
            let id = image["id"].as_u64().unwrap();
            if id == 21 {
                assert_eq!(
                    (&image["card"], &image["email"]),
                    (&Value::Null, &Value::Null)
                );
                continue;
            }
            assert_eq!(image["card"], "*****");
            // which value the row held: seeded, streamed, or the update's
            let email = match (op.as_str(), side, id) {
                ("u", "after", _) => format!("{salt}mail{tag}u1@example.com"),
                (_, _, 22..=25) => format!("{salt}mail{tag}c{id}@example.com"),
                _ => format!("{salt}mail{tag}s{id}@example.com"),
            };
            assert_eq!(
                image["email"],
                sha256_hex(&email),
                "email of {id} ({op} {side})"
            );
            checked_images += 1;
        }
    }
    let want_ops: BTreeMap<String, usize> = [("r", 21), ("c", 4), ("u", 1), ("d", 1)]
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
    assert_eq!(ops, want_ops);
    assert_eq!(checked_images, 20 + 4 + 2 + 1);

    // nor in a log line or a metric of any worker
    let text = logs_and_metrics(&world).await;
    assert!(!text.contains(&tag), "a secret reached a log or a metric");
    assert!(!text.contains(&salt), "the salt reached a log or a metric");
    // the definition as the API shows it keeps the salt write-only
    let shown = world
        .blocking(|c| {
            let via = running(c);
            c.get(via, "/pipelines/masked/config").unwrap().1
        })
        .await;
    assert_eq!(shown["columns"]["hash"]["salt"], "<redacted>", "{shown}");
}

// ---------------------------------------------------------------------------------------
// 2. patterns pick the tables; a routed shard set replays to the union of the shards

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_patterns_pick_the_tables_and_routed_shards_replay_to_their_union() {
    routing("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_patterns_pick_the_tables_and_routed_shards_replay_to_their_union() {
    routing("mariadb").await;
}

const SHARDS: [&str; 3] = ["orders_1", "orders_2", "orders_3"];

async fn routing(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "croute").await;
    let other_schema = format!("{schema}_b");
    admin
        .query_drop(format!("CREATE DATABASE {}", q(&other_schema)))
        .await
        .unwrap();
    let all: Vec<(&str, &str)> = vec![
        (&schema, "orders_1"),
        (&schema, "orders_2"),
        (&schema, "orders_3"),
        (&schema, "orders_9"),
        (&schema, "orders_x"),
        (&schema, "other"),
        (&other_schema, "orders_1"),
    ];
    for (s, t) in &all {
        // overlapping ids 1..=30 in every table
        admin
            .query_drop(format!(
                "CREATE TABLE {q} (id INT PRIMARY KEY, note VARCHAR(32) NOT NULL); \
                 INSERT INTO {q} (id, note) \
                 WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 30) \
                 SELECT n, CONCAT('{t}-', n) FROM seq",
                q = qt(s, t)
            ))
            .await
            .unwrap();
    }
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let prefix = unique_name("cr").replace('_', "-");
    let routed_topic = format!("{prefix}.orders_all");
    let other_topic = topic(&prefix, &schema, "other");
    world.one_partition(&[routed_topic.clone(), other_topic.clone()]);
    let mut def = world.definition(
        "routed",
        &[],
        json!({"mode": "initial", "chunk_size": 8}),
        "at_least_once",
        &prefix,
    );
    def["tables"] = json!({
        "schemas": {"include": [{"regex": format!("{schema}.*")}], "exclude": [other_schema]},
        "include": [{"regex": "[^.]+\\.orders_\\d+"}, format!("{schema}.other")],
        "exclude": [format!("{schema}.orders_9")]
    });
    def["routes"] = json!([
        {"tables": [{"regex": "[^.]+\\.orders_\\d+"}], "topic": "{prefix}.orders_all"}
    ]);
    world.create_and_resume(def).await;
    let picked = [
        format!("{schema}.orders_1"),
        format!("{schema}.orders_2"),
        format!("{schema}.orders_3"),
        format!("{schema}.other"),
    ];
    let st = world
        .wait_status(
            "routed",
            Duration::from_secs(120),
            "snapshot complete",
            |s| {
                s["state"] == "streaming"
                    && picked
                        .iter()
                        .all(|t| table_status(s, t)["status"] == "complete")
            },
        )
        .await;
    // the snapshot read exactly the picked tables
    let snapshotted: BTreeSet<String> = st["snapshot"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(snapshotted, picked.iter().cloned().collect());

    // the stream: every table changes; only the picked ones may show
    for (s, t) in &all {
        admin
            .query_drop(format!(
                "INSERT INTO {q} VALUES (31, '{t}-31'); \
                 UPDATE {q} SET note = 'upd' WHERE id = 5; DELETE FROM {q} WHERE id = 7",
                q = qt(s, t)
            ))
            .await
            .unwrap();
    }
    // 3 shards: 30 reads, then c, u, d and a tombstone each
    let records = world
        .read_until(&routed_topic, Duration::from_secs(120), |rs| {
            rs.len() >= 3 * (30 + 4)
        })
        .await;
    let other = world
        .read_until(&other_topic, Duration::from_secs(60), |rs| rs.len() >= 34)
        .await;
    assert_eq!(other.len(), 34);

    // the routed topic: the three shards, keyed apart by their table
    let mut replayed: BTreeMap<String, Value> = BTreeMap::new();
    let mut tables_seen = BTreeSet::new();
    for r in &records {
        let key: Value = serde_json::from_slice(r.key.as_ref().unwrap()).unwrap();
        let physical = key[PHYSICAL].as_str().unwrap().to_string();
        let key_text = key.to_string();
        match &r.value {
            None => {
                assert!(!replayed.contains_key(&key_text), "tombstone after delete");
            }
            Some(value) => {
                let v: Value = serde_json::from_slice(value).unwrap();
                let table = format!(
                    "{}.{}",
                    v["source"]["db"].as_str().unwrap(),
                    v["source"]["table"].as_str().unwrap()
                );
                assert_eq!(table, physical, "the key names the record's table");
                tables_seen.insert(table);
                match v["op"].as_str().unwrap() {
                    "d" => {
                        replayed.remove(&key_text);
                    }
                    _ => {
                        replayed.insert(key_text, v["after"].clone());
                    }
                }
            }
        }
    }
    assert_eq!(tables_seen, picked[..3].iter().cloned().collect());
    let mut union: BTreeMap<String, Value> = BTreeMap::new();
    for shard in SHARDS {
        for (_, image) in source_rows(&mut admin, &schema, shard, &["id"]).await {
            let key = json!({"id": image["id"], PHYSICAL: format!("{schema}.{shard}")});
            union.insert(key.to_string(), image);
        }
    }
    assert_eq!(
        union.len(),
        3 * 30,
        "three shards of 30 rows (31 in, 7 out)"
    );
    assert_same(&replayed, &union, "routed topic vs the union of the shards");
    assert_eq!(records.len(), 3 * 34, "every event of the shards once");

    // no topic for the tables left out (nor, routed, for the shards themselves)
    let topics = broker_topics(world.kafka.bootstrap_servers());
    for (s, t) in [
        (&schema, "orders_9"),
        (&schema, "orders_x"),
        (&other_schema, "orders_1"),
        (&schema, "orders_1"),
    ] {
        assert!(
            !topics.contains(&topic(&prefix, s, t)),
            "{s}.{t} has a topic"
        );
    }

    // capstan verify: each table, the shards through their routed topic
    let (url, password) = (
        world
            .blocking(|c| {
                let via = running(c);
                c.workers[&via].api()
            })
            .await,
        db.password.clone(),
    );
    let run = tokio::task::spawn_blocking(move || {
        verify_pipeline(
            &url,
            "routed",
            &password,
            &["--format", "json", "--wait-for-checkpoint", "60"],
        )
    })
    .await
    .unwrap();
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = run.report();
    assert_eq!(report["clean"], true, "{run:?}");
    for shard in SHARDS {
        let t = run.table(&format!("{schema}.{shard}"));
        assert_eq!(t["topic"], routed_topic, "{t}");
        assert_eq!(t["source_rows"], 30, "{t}");
    }
    assert_eq!(run.table(&format!("{schema}.other"))["source_rows"], 30);
    assert_eq!(report["tables"].as_array().unwrap().len(), 4, "{run:?}");
}

// ---------------------------------------------------------------------------------------
// 3. an include rule: only the listed columns of the matched tables leave the source

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_an_unlisted_column_never_leaves_the_source() {
    including("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_an_unlisted_column_never_leaves_the_source() {
    including("mariadb").await;
}

/// The `after` fields of a `debezium_json_schema` value's Connect schema, with their types.
fn after_schema_fields(v: &Value) -> Vec<(String, String)> {
    let after = v["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap();
    after["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().to_string(),
                f["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn including(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let mut admin = db.admin_conn().await;
    let schema = create_schema(&mut admin, "cincl").await;
    let tag = unique_name("UNLISTEDTAG").replace('_', "");
    // `orders` is matched by the include rule; `notes` is not and keeps every column
    admin
        .query_drop(format!(
            "CREATE TABLE {o} (id INT PRIMARY KEY, secret VARCHAR(64), total INT NOT NULL, \
             memo VARCHAR(64)); \
             CREATE TABLE {n} (id INT PRIMARY KEY, body VARCHAR(64)); \
             INSERT INTO {n} VALUES (1, 'kept{tag}')",
            o = qt(&schema, "orders"),
            n = qt(&schema, "notes"),
        ))
        .await
        .unwrap();
    let row = |i: u32, v: &str| format!("({i}, 'sec{tag}{v}{i}', {i}0, 'memo{tag}{v}{i}')");
    let seed: Vec<String> = (1..=10).map(|i| row(i, "s")).collect();
    admin
        .query_drop(format!(
            "INSERT INTO {} VALUES {}",
            qt(&schema, "orders"),
            seed.join(", ")
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let orders = topic("ci", &schema, "orders");
    let notes = topic("ci", &schema, "notes");
    world.one_partition(&[orders.clone(), notes.clone()]);
    let mut def = world.definition(
        "included",
        &[format!("{schema}.orders"), format!("{schema}.notes")],
        json!({"mode": "initial", "chunk_size": 3}),
        "at_least_once",
        "ci",
    );
    def["kafka"]["format"] = json!("debezium_json_schema");
    def["columns"] = json!({
        "include": [{"table": {"regex": format!("{schema}\\.ord[a-z]+")}, "columns": ["id", {"regex": "tot.l"}]}]
    });
    world.create_and_resume(def).await;
    let table = format!("{schema}.orders");
    world
        .wait_status(
            "included",
            Duration::from_secs(120),
            "snapshot complete",
            |s| table_status(s, &table)["status"] == "complete" && s["state"] == "streaming",
        )
        .await;
    let streamed: Vec<String> = (11..=13).map(|i| row(i, "c")).collect();
    admin
        .query_drop(format!(
            "INSERT INTO {t} VALUES {}; \
             UPDATE {t} SET secret = 'sec{tag}u1', memo = 'memo{tag}u1', total = 99 WHERE id = 1; \
             DELETE FROM {t} WHERE id = 2",
            streamed.join(", "),
            t = qt(&schema, "orders")
        ))
        .await
        .unwrap();
    let records = world
        .read_until(&orders, Duration::from_secs(120), |rs| {
            // 10 reads, 3 creates, 1 update, 1 delete and its tombstone
            rs.len() >= 16
        })
        .await;
    assert_eq!(records.len(), 16, "every event, once");
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        for bytes in [&r.key, &r.value].into_iter().flatten() {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(&tag),
                "an unlisted value left the source: {text}"
            );
            assert!(!text.contains("secret") && !text.contains("memo"), "{text}");
        }
        let Some(value) = &r.value else { continue };
        let v: Value = serde_json::from_slice(value).unwrap();
        assert_eq!(
            after_schema_fields(&v),
            [
                ("id".to_string(), "int32".to_string()),
                ("total".to_string(), "int32".to_string())
            ]
        );
        let payload = &v["payload"];
        let op = payload["op"].as_str().unwrap();
        *seen.entry(op.to_string()).or_default() += 1;
        for image in [&payload["before"], &payload["after"]] {
            let Some(image) = image.as_object() else {
                continue;
            };
            let keys: Vec<&str> = image.keys().map(String::as_str).collect();
            assert_eq!(keys, ["id", "total"], "{image:?}");
            let id = image["id"].as_u64().unwrap();
            let want = if op == "u" && image == payload["after"].as_object().unwrap() {
                99
            } else {
                id * 10
            };
            assert_eq!(image["total"], want, "{op} {image:?}");
        }
    }
    let want: BTreeMap<String, usize> = [("r", 10), ("c", 3), ("u", 1), ("d", 1)]
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
    assert_eq!(seen, want);
    // the table no rule matches keeps its columns
    let notes_records = world
        .read_until(&notes, Duration::from_secs(60), |rs| !rs.is_empty())
        .await;
    let v: Value = serde_json::from_slice(notes_records[0].value.as_ref().unwrap()).unwrap();
    assert_eq!(v["payload"]["after"]["body"], format!("kept{tag}"));
    let text = logs_and_metrics(&world).await;
    assert!(
        !text.contains(&format!("sec{tag}")),
        "an unlisted value reached a log"
    );
}
