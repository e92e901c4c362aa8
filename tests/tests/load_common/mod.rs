//! Shared support of the failover tests: writers with a history that is known exactly, and an
//! independent consumer of the table topic.
//!
//! Each writer `w` commits, one after another, "insert key `k` with `v = i`; bump key `k - 1`
//! by 1,000,000" (`k = (w + 1) * 1,000,000 + i`), so the change events a topic must hold are
//! known from the number of transactions each writer committed: per key an insert `c` with
//! `v = i`, then, unless it is the writer's last key, an update `u` with `v = i + 1,000,000`.
//!
//! [`read_topic`] is a plain rdkafka consumer (no group, no commits) configured here, not
//! capstan's `TopicReader`: what it sees is what a user's consumer sees.

#![allow(dead_code)]

pub mod topic_tap;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_tests::DbEnv;
use mysql_async::prelude::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

/// Each key's change events in topic order: `(op, v)`.
pub type Histories = BTreeMap<i64, Vec<(String, i64)>>;

/// Running writers on `schema.t (id BIGINT PRIMARY KEY, v BIGINT)`.
pub struct Writers {
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<u64>>,
}

impl Writers {
    /// Starts `n` writers, each committing about 200 transactions/s.
    pub fn start(db: &DbEnv, schema: &str, n: u64) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..n)
            .map(|w| {
                let db = db.clone();
                let stop = stop.clone();
                let schema = schema.to_string();
                tokio::spawn(async move {
                    let mut conn = db.admin_conn().await;
                    let base = (w + 1) * 1_000_000;
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let k = base + i;
                        let sql = if i == 1 {
                            format!("INSERT INTO `{schema}`.t VALUES ({k}, {i})")
                        } else {
                            format!(
                                "START TRANSACTION; INSERT INTO `{schema}`.t VALUES ({k}, {i}); \
                                 UPDATE `{schema}`.t SET v = v + 1000000 WHERE id = {}; COMMIT",
                                k - 1
                            )
                        };
                        conn.query_drop(sql).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    i
                })
            })
            .collect();
        Writers { stop, handles }
    }

    /// Stops the writers; the histories every topic must now hold.
    pub async fn stop(self) -> (u64, Histories) {
        self.stop.store(true, Ordering::Relaxed);
        let mut expected = Histories::new();
        let mut total = 0;
        for (w, h) in self.handles.into_iter().enumerate() {
            let n = h.await.unwrap();
            total += n;
            let base = (w as u64 + 1) * 1_000_000;
            for i in 1..=n {
                let mut h = vec![("c".to_string(), i as i64)];
                if i < n {
                    h.push(("u".to_string(), i as i64 + 1_000_000));
                }
                expected.insert((base + i) as i64, h);
            }
        }
        (total, expected)
    }
}

/// The number of change events in `h`.
pub fn events(h: &Histories) -> usize {
    h.values().map(Vec::len).sum()
}

/// What an independent consumer read from a table topic.
#[derive(Debug, Default)]
pub struct TopicContents {
    /// Each key's change events in topic order, the first copy of each record.
    pub histories: Histories,
    /// Records seen again: same `capstan.position` and `capstan.record` headers as an
    /// earlier one (checked to carry the same change).
    pub replays: usize,
    /// The `capstan.epoch` header of each record, counted.
    pub epochs: BTreeMap<u64, usize>,
}

/// A plain rdkafka consumer (no group, no commits) with `isolation.level` `isolation`,
/// assigned every partition of `topic` from its first offset.
pub fn consumer_from_start(bootstrap: &str, topic: &str, isolation: &str) -> BaseConsumer {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "unused-no-commits")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    let meta = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for t in meta.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .unwrap();
        }
    }
    consumer.assign(&tpl).unwrap();
    consumer
}

/// Folds a topic's records, read in offset order per partition, into [`TopicContents`].
#[derive(Debug, Default)]
pub struct Collector {
    out: TopicContents,
    first: BTreeMap<(Option<String>, Option<String>), Value>,
}

impl Collector {
    /// Adds one record; its `capstan.epoch` header, if it has one.
    pub fn add<M: Message>(&mut self, m: &M) -> Option<u64> {
        let header = |name: &str| {
            m.headers().and_then(|h| {
                h.iter()
                    .find(|x| x.key == name)
                    .and_then(|x| x.value)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            })
        };
        let epoch = header("capstan.epoch").and_then(|e| e.parse().ok());
        if let Some(e) = epoch {
            *self.out.epochs.entry(e).or_default() += 1;
        }
        let value = m.payload()?;
        let v: Value = serde_json::from_slice(value).unwrap();
        let id = (header("capstan.position"), header("capstan.record"));
        if let Some(first) = self.first.get(&id) {
            // a replay: the same change, byte for byte apart from epoch and processing time
            self.out.replays += 1;
            for field in ["before", "after"] {
                assert_eq!(first[field], v[field], "replayed {field}");
            }
            assert_eq!(first["source"]["gtid"], v["source"]["gtid"]);
            return epoch;
        }
        let key = v["after"]["id"]
            .as_i64()
            .or(v["before"]["id"].as_i64())
            .unwrap();
        let op = v["op"].as_str().unwrap().to_string();
        let val = v["after"]["v"].as_i64().unwrap();
        self.out.histories.entry(key).or_default().push((op, val));
        self.first.insert(id, v);
        epoch
    }

    /// The change events collected so far (first copies).
    pub fn events(&self) -> usize {
        events(&self.out.histories)
    }

    /// What was collected.
    pub fn into_contents(self) -> TopicContents {
        self.out
    }
}

/// Reads `topic` with `isolation.level` `isolation` (`read_committed` or `read_uncommitted`)
/// until it holds at least `want` change events and then nothing new for two seconds, or
/// `timeout` passed.
pub fn read_topic(
    bootstrap: &str,
    topic: &str,
    isolation: &str,
    want: usize,
    timeout: Duration,
) -> TopicContents {
    let consumer = consumer_from_start(bootstrap, topic, isolation);
    let mut collector = Collector::default();
    let deadline = Instant::now() + timeout;
    let mut last_new = Instant::now();
    while Instant::now() < deadline {
        if collector.events() >= want && last_new.elapsed() > Duration::from_secs(2) {
            break;
        }
        let Some(m) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let Ok(m) = m else { continue };
        last_new = Instant::now();
        collector.add(&m);
    }
    collector.into_contents()
}

/// [`read_topic`] on the blocking pool, up to two minutes.
pub async fn read_topic_async(
    bootstrap: &str,
    topic: &str,
    isolation: &'static str,
    want: usize,
) -> TopicContents {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        read_topic(
            &bootstrap,
            &topic,
            isolation,
            want,
            Duration::from_secs(120),
        )
    })
    .await
    .unwrap()
}

/// Asserts that `got` is exactly `expected`: every key, every event, in order, once.
pub fn assert_histories(got: &Histories, expected: &Histories) {
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{} keys missing (first {:?}), {} unexpected (first {:?})",
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first()
    );
    for (k, h) in expected {
        assert_eq!(got.get(k), Some(h), "history of key {k}");
    }
}
