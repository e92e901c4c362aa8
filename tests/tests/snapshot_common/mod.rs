//! Shared support of the initial-snapshot end-to-end tests: a three-worker cluster with the
//! dev services' real Kafka broker, pipeline definitions with a `snapshot` block, status polling, concurrent writers,
//! and the oracle: the topic replayed as upserts/deletes by key compared with the source table.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capstan_kafka::topic_reader::{ConsumedRecord, Isolation, TopicReader};
use capstan_tests::cluster::Cluster;
use capstan_tests::{mariadb, mysql, unique_name, DbEnv};
use mysql_async::consts::ColumnType;
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Map, Value};

pub const SETTLE: Duration = Duration::from_secs(30);

/// The dev server of `flavor` (`"mysql"` or `"mariadb"`), if configured.
pub fn flavor_db(flavor: &str) -> Option<DbEnv> {
    match flavor {
        "mysql" => mysql(),
        _ => mariadb(),
    }
}

/// Creates a database with a unique name starting with `prefix`; returns its name.
pub async fn create_schema(admin: &mut mysql_async::Conn, prefix: &str) -> String {
    let schema = unique_name(prefix);
    admin
        .query_drop(format!("CREATE DATABASE {}", q(&schema)))
        .await
        .unwrap();
    schema
}

/// `name` quoted as a MySQL identifier (backquotes doubled).
pub fn q(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `schema`.`table`, quoted.
pub fn qt(schema: &str, table: &str) -> String {
    format!("{}.{}", q(schema), q(table))
}

/// The topic of `schema.table` under prefix `prefix` (docs/event-format.md: every character
/// outside `[a-zA-Z0-9._-]` becomes `_`).
pub fn topic(prefix: &str, schema: &str, table: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{prefix}.{}.{}", clean(schema), clean(table))
}

/// The control topic of the snapshot-complete markers under prefix `prefix`
/// (docs/event-format.md: table topics hold change events only).
pub fn marker_topic(prefix: &str) -> String {
    format!("{prefix}.snapshot_complete")
}

/// Standard base64 with padding (how the events carry binary columns).
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A small deterministic PRNG (xorshift64*), for writers.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A server id unique among the pipelines of this process (and unlikely to clash with
/// other test binaries, which use 5000..7000).
pub fn server_id() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    20_000 + (std::process::id() % 4000) * 16 + N.fetch_add(1, Ordering::Relaxed) % 16
}

/// One test's world: a source, the real Kafka broker, a three-worker cluster.
pub struct World {
    pub db: DbEnv,
    pub flavor: &'static str,
    pub kafka: capstan_tests::KafkaEnv,
    pub cluster: Arc<Mutex<Cluster>>,
    pub reader: TopicReader,
}

/// Raft and lease timings for these suites' clusters: a lease of 4 s (expiry after 4.5 s) and
/// a 100 ms heartbeat with 400–800 ms elections, where the defaults are 700 ms and 50 ms with
/// 150–230 ms. Up to a dozen three-worker clusters of one test binary share two cores with
/// both database servers and Kafka; under that load the default lease lapsed every few
/// seconds (the runner fenced `lease_expired` and restarted each time, so a 200,000-row
/// snapshot under writers had not finished after 900 s). None of these tests is about lease
/// timing (the cluster and failover suites keep the defaults); a failover here takes ~5 s.
const LOADED_MACHINE_TIMINGS: &str = "lease_ms = 4000\nheartbeat_interval_ms = 100\n\
     election_timeout_min_ms = 400\nelection_timeout_max_ms = 800\n";

impl World {
    /// Starts the cluster and waits for a leader; `None` when the binary is missing (skip).
    pub async fn start(db: DbEnv, flavor: &'static str) -> Option<World> {
        Self::start_with_env(db, flavor, Vec::new()).await
    }

    /// Like [`World::start`], with `env` set for every worker process.
    pub async fn start_with_env(
        db: DbEnv,
        flavor: &'static str,
        env: Vec<(String, String)>,
    ) -> Option<World> {
        let kafka = capstan_tests::kafka()?;
        let cluster = tokio::task::spawn_blocking(move || {
            Cluster::start_with_env(3, |_| LOADED_MACHINE_TIMINGS.to_string(), env)
        })
        .await
        .unwrap()?;
        let cluster = Arc::new(Mutex::new(cluster));
        let reader = TopicReader::new(
            kafka.bootstrap_servers(),
            Isolation::ReadUncommitted,
            Duration::from_secs(180),
        );
        let w = World {
            db,
            flavor,
            kafka,
            cluster,
            reader,
        };
        w.blocking(|c| {
            c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
        })
        .await;
        Some(w)
    }

    /// Runs `f` on the cluster in a blocking task.
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Cluster) -> T + Send + 'static,
    ) -> T {
        let c = self.cluster.clone();
        tokio::task::spawn_blocking(move || f(&mut c.lock().unwrap()))
            .await
            .unwrap()
    }

    /// A pipeline definition capturing `tables` with `snapshot`.
    pub fn definition(
        &self,
        name: &str,
        tables: &[String],
        snapshot: Value,
        delivery: &str,
        prefix: &str,
    ) -> Value {
        let db = &self.db;
        json!({
            "name": name,
            "source": {
                "host": db.host, "port": db.port, "user": db.user, "password": db.password,
                "tls": {"mode": "verify_none"}, "server_id": server_id(), "flavor": self.flavor
            },
            "tables": {"include": tables},
            "snapshot": snapshot,
            "kafka": {
                "bootstrap_servers": self.kafka.bootstrap_servers(), "topic_prefix": prefix,
                "delivery": delivery
            },
            "start_position": "current"
        })
    }

    /// Creates `topics` with one partition each, so the whole topic has one order.
    pub fn one_partition(&self, topics: &[String]) {
        for t in topics {
            self.kafka.create_topic(t, 1, 1).unwrap();
        }
    }

    /// POSTs `definition` and resumes it.
    pub async fn create_and_resume(&self, definition: Value) {
        let name = definition["name"].as_str().unwrap().to_string();
        self.blocking(move |c| {
            let via = running(c);
            let (s, b) = c
                .send(via, Method::POST, "/pipelines", Some(&definition))
                .unwrap();
            assert_eq!(s, 201, "{b}");
            let (s, b) = c
                .send(via, Method::PUT, &format!("/pipelines/{name}/resume"), None)
                .unwrap();
            assert_eq!(s, 202, "{b}");
        })
        .await;
    }

    /// PUTs `/pipelines/{name}/{verb}` (`pause`, `resume`, `stop`).
    pub async fn control(&self, name: &str, verb: &str) {
        let path = format!("/pipelines/{name}/{verb}");
        self.blocking(move |c| {
            let via = running(c);
            let (s, b) = c.send(via, Method::PUT, &path, None).unwrap();
            assert_eq!(s, 202, "{path}: {b}");
        })
        .await;
    }

    /// The pipeline's status via a running worker.
    pub async fn status(&self, name: &str) -> Option<Value> {
        let name = name.to_string();
        self.blocking(move |c| {
            let via = running(c);
            c.pipeline_status(via, &name)
        })
        .await
    }

    /// Polls the status until `pred` holds (returning that status), or panics after
    /// `timeout` with the last status and the owner's log tail.
    pub async fn wait_status(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            if let Some(v) = self.status(name).await {
                if pred(&v) {
                    return v;
                }
                if v["state"] == "failed" && what != "failed" {
                    let tail = self.owner_log(&v).await;
                    panic!("pipeline {name} failed while waiting for {what}: {v}\n{tail}");
                }
                last = v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let tail = self.owner_log(&last).await;
        panic!("pipeline {name}: no {what} within {timeout:?}; last status {last}\n{tail}");
    }

    /// Polls the status of `names` for `during` (every 250 ms), failing at once if one shows
    /// `failed`; per pipeline the states seen and the `reason: detail` of each `retrying`.
    pub async fn watch_outage(
        &self,
        names: &[&str],
        during: Duration,
    ) -> Vec<(BTreeSet<String>, BTreeSet<String>)> {
        let mut seen = vec![(BTreeSet::new(), BTreeSet::new()); names.len()];
        let start = Instant::now();
        while start.elapsed() < during {
            for (name, (states, details)) in names.iter().zip(seen.iter_mut()) {
                let Some(v) = self.status(name).await else {
                    continue;
                };
                let state = v["state"].as_str().unwrap_or("").to_string();
                assert_ne!(state, "failed", "{name} halted on an outage: {v}");
                if state == "retrying" {
                    details.insert(format!(
                        "{}: {}",
                        v["reason"].as_str().unwrap_or(""),
                        v["detail"].as_str().unwrap_or("")
                    ));
                }
                states.insert(state);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        seen
    }

    /// The log tail of the worker owning the pipeline in `status`.
    pub async fn owner_log(&self, status: &Value) -> String {
        let owner = status["owner"].as_u64();
        self.blocking(move |c| match owner {
            Some(o) if c.workers.contains_key(&o) => c.log_tail(o),
            _ => String::new(),
        })
        .await
    }

    /// A metric of pipeline `name` on worker `owner` (`capstan_pipeline_<metric>`).
    pub async fn metric(&self, owner: u64, name: &str, metric: &str) -> Option<f64> {
        self.metric_labelled(owner, name, metric, "").await
    }

    /// As [`World::metric`], of the series that also has the label text `label`
    /// (`outcome="used"`).
    pub async fn metric_labelled(
        &self,
        owner: u64,
        name: &str,
        metric: &str,
        label: &str,
    ) -> Option<f64> {
        let url = format!(
            "{}/metrics",
            self.blocking(move |c| c.workers[&owner].api()).await
        );
        let text = reqwest::get(url).await.ok()?.text().await.ok()?;
        let pipeline = format!("pipeline=\"{name}\"");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find(|l| {
                l.starts_with(&format!("capstan_pipeline_{metric}"))
                    && l.contains(&pipeline)
                    && l.contains(label)
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// The snapshot's chunks read ahead by outcome: used, stale, wasted.
    pub async fn read_ahead(&self, owner: u64, name: &str) -> [u64; 3] {
        let mut out = [0; 3];
        for (slot, outcome) in out.iter_mut().zip(["used", "stale", "wasted"]) {
            let label = format!("outcome=\"{outcome}\"");
            let v = self
                .metric_labelled(owner, name, "snapshot_read_ahead", &label)
                .await;
            *slot = v.unwrap_or(0.0) as u64;
        }
        out
    }

    /// Every record of `topic`.
    pub async fn read(&self, topic: &str) -> Vec<ConsumedRecord> {
        self.reader.read_all(topic).await.unwrap()
    }

    /// The snapshot-complete markers of `schema.table` on the control topic of `prefix`, in
    /// order.
    pub async fn markers(&self, prefix: &str, schema: &str, table: &str) -> Vec<Rec> {
        let key = json!({ "snapshot_complete": format!("{schema}.{table}") });
        parse(&self.read(&marker_topic(prefix)).await)
            .into_iter()
            .filter(|r| r.key.as_ref() == Some(&key))
            .collect()
    }

    /// Reads `topic` until `done` holds for the records, up to `timeout`.
    pub async fn read_until(
        &self,
        topic: &str,
        timeout: Duration,
        mut done: impl FnMut(&[ConsumedRecord]) -> bool,
    ) -> Vec<ConsumedRecord> {
        let deadline = Instant::now() + timeout;
        loop {
            let records = self.read(topic).await;
            if done(&records) || Instant::now() > deadline {
                return records;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// A running worker to ask.
pub fn running(c: &mut Cluster) -> u64 {
    let ids: Vec<u64> = c.workers.keys().copied().collect();
    ids.into_iter()
        .find(|&n| c.workers.get_mut(&n).unwrap().is_running())
        .expect("a running worker")
}

/// Kills the owner of `pipeline` with SIGKILL, waits for another worker to own it at a
/// higher epoch in state `want`, restarts the victim. Returns (victim, old epoch, new owner,
/// new epoch).
pub async fn kill_owner(world: &World, pipeline: &str, want: &'static str) -> (u64, u64, u64, u64) {
    let name = pipeline.to_string();
    world
        .blocking(move |c| {
            let via = running(c);
            let (victim, epoch, _) = c.pipeline_owner(via, &name).expect("owned");
            c.kill9(victim);
            assert!(
                !c.workers.get_mut(&victim).unwrap().is_running(),
                "the owner really died"
            );
            let via = [1, 2, 3].into_iter().find(|&n| n != victim).unwrap();
            let killed = Instant::now();
            let (owner, new_epoch, _) = c
                .wait_until(SETTLE, |c| {
                    c.pipeline_owner(via, &name)
                        .filter(|(o, e, s)| *o != victim && *e > epoch && s == want)
                })
                .unwrap_or_else(|| {
                    panic!(
                        "the pipeline did not move: {:?}",
                        c.pipeline_status(via, &name)
                    )
                });
            eprintln!(
                "killed owner {victim} (epoch {epoch}); {owner} is {want} at epoch {new_epoch} \
                 after {:?}",
                killed.elapsed()
            );
            c.spawn(victim);
            (victim, epoch, owner, new_epoch)
        })
        .await
}

/// Every key read more than once was re-read only as part of the same chunk (its
/// `capstan.position`): the in-flight chunk re-published by the next owner. With
/// `once_per_epoch`, each copy also came from another epoch; without it, the same owner's
/// runner may have published the chunk again after a transient fault (an ad-hoc snapshot on
/// MariaDB showed it once). Returns the count of duplicate reads.
pub fn assert_duplicates_are_replayed_chunks(
    reads: &[Rec],
    key: &[&str],
    once_per_epoch: bool,
) -> usize {
    let mut by_key: BTreeMap<String, Vec<&Rec>> = BTreeMap::new();
    for r in reads {
        by_key
            .entry(key_of(&r.value.as_ref().unwrap()["after"], key))
            .or_default()
            .push(r);
    }
    let mut dups = 0;
    for (k, rs) in by_key.iter().filter(|(_, rs)| rs.len() > 1) {
        dups += rs.len() - 1;
        let positions: BTreeSet<&str> = rs.iter().map(|r| r.position.as_str()).collect();
        assert_eq!(
            positions.len(),
            1,
            "{k} read by different chunks: {positions:?}"
        );
        if once_per_epoch {
            let epochs: BTreeSet<u64> = rs.iter().map(|r| r.epoch).collect();
            assert_eq!(epochs.len(), rs.len(), "{k} read twice by one epoch");
        }
    }
    dups
}

/// One table's `snapshot` entry in a status document.
pub fn table_status<'v>(status: &'v Value, table: &str) -> &'v Value {
    status["snapshot"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["table"] == table))
        .unwrap_or(&Value::Null)
}

/// The source table as `key → row image`, each value as the events write it.
pub async fn source_rows(
    conn: &mut mysql_async::Conn,
    schema: &str,
    table: &str,
    key: &[&str],
) -> BTreeMap<String, Value> {
    let rows: Vec<mysql_async::Row> = conn
        .exec(format!("SELECT * FROM {}", qt(schema, table)), ())
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for row in rows {
        let mut image = Map::new();
        for (i, col) in row.columns_ref().iter().enumerate() {
            let v = match row.as_ref(i).unwrap() {
                mysql_async::Value::NULL => Value::Null,
                mysql_async::Value::Int(n) => json!(n),
                mysql_async::Value::UInt(n) => json!(n),
                mysql_async::Value::Double(d) => json!(d),
                mysql_async::Value::Float(f) => json!(f),
                mysql_async::Value::Bytes(b) => {
                    if col.column_type() == ColumnType::MYSQL_TYPE_NEWDECIMAL
                        || col.character_set() != 63
                    {
                        Value::String(String::from_utf8(b.clone()).unwrap())
                    } else {
                        Value::String(base64(b))
                    }
                }
                other => panic!("unexpected value {other:?} in {}", col.name_str()),
            };
            image.insert(col.name_str().to_string(), v);
        }
        let image = Value::Object(image);
        out.insert(key_of(&image, key), image);
    }
    out
}

/// The canonical key text of a row image.
pub fn key_of(image: &Value, key: &[&str]) -> String {
    let mut m = Map::new();
    for k in key {
        m.insert((*k).to_string(), image[*k].clone());
    }
    Value::Object(m).to_string()
}

/// One record, parsed.
#[derive(Clone, Debug)]
pub struct Rec {
    pub index: usize,
    pub key: Option<Value>,
    pub value: Option<Value>,
    pub epoch: u64,
    pub position: String,
    pub record: String,
}

impl Rec {
    pub fn op(&self) -> Option<&str> {
        self.value.as_ref()?["op"].as_str()
    }
    pub fn is_marker(&self) -> bool {
        self.value
            .as_ref()
            .is_some_and(|v| v.get("snapshot_complete").is_some())
    }
}

pub fn parse(records: &[ConsumedRecord]) -> Vec<Rec> {
    records
        .iter()
        .enumerate()
        .map(|(index, r)| Rec {
            index,
            key: r.key.as_ref().map(|k| serde_json::from_slice(k).unwrap()),
            value: r.value.as_ref().map(|v| serde_json::from_slice(v).unwrap()),
            epoch: r
                .header_str("capstan.epoch")
                .and_then(|e| e.parse().ok())
                .unwrap_or(0),
            position: r.header_str("capstan.position").unwrap_or("").to_string(),
            record: r.header_str("capstan.record").unwrap_or("").to_string(),
        })
        .collect()
}

/// What a topic says about one table.
#[derive(Debug, Default)]
pub struct Replay {
    /// The table as the topic's upserts and deletes leave it, by key.
    pub state: BTreeMap<String, Value>,
    /// How many `op: r` records each key has.
    pub reads: BTreeMap<String, usize>,
    /// The `op: r` records, in order.
    pub read_recs: Vec<Rec>,
    /// Streamed change records (`c`, `u`, `d`).
    pub changes: Vec<Rec>,
}

/// Replays `records` of a table keyed by `key` (keys taken from the row images, so a table
/// keyed by a unique key only, whose records have a null key, replays too). A table topic
/// holds change events and tombstones only: a record without `op` (the snapshot-complete
/// marker, which goes to its control topic) fails the replay.
pub fn replay(records: &[Rec], key: &[&str]) -> Replay {
    let mut out = Replay::default();
    for r in records {
        let Some(v) = &r.value else { continue }; // tombstone: follows its delete
        let op = v["op"].as_str().unwrap_or_else(|| panic!("no op: {v}"));
        match op {
            "r" | "c" | "u" => {
                let k = key_of(&v["after"], key);
                if let Some(rk) = &r.key {
                    assert_eq!(rk.to_string(), k, "record key vs after image");
                }
                if op == "r" {
                    *out.reads.entry(k.clone()).or_default() += 1;
                    out.read_recs.push(r.clone());
                } else {
                    out.changes.push(r.clone());
                }
                out.state.insert(k, v["after"].clone());
            }
            "d" => {
                let k = key_of(&v["before"], key);
                out.state.remove(&k);
                out.changes.push(r.clone());
            }
            other => panic!("unexpected op {other}"),
        }
    }
    out
}

/// Asserts that the replayed topic equals the source table, listing the first differences.
pub fn assert_same(
    replayed: &BTreeMap<String, Value>,
    source: &BTreeMap<String, Value>,
    what: &str,
) {
    if replayed == source {
        return;
    }
    let mut diffs = Vec::new();
    for (k, v) in source {
        match replayed.get(k) {
            None => diffs.push(format!("missing {k}: {v}")),
            Some(r) if r != v => diffs.push(format!("differs {k}: topic {r} source {v}")),
            _ => {}
        }
    }
    for (k, v) in replayed {
        if !source.contains_key(k) {
            diffs.push(format!("extra {k}: {v}"));
        }
    }
    let n = diffs.len();
    diffs.truncate(20);
    panic!(
        "{what}: topic replay != source ({} topic rows, {} source rows, {n} differences):\n{}",
        replayed.len(),
        source.len(),
        diffs.join("\n")
    );
}

/// How often each of [`start_writers`]' writers may start a statement: 8 writers run at most
/// 200 statements a second (a quarter of them transactions of three).
pub const WRITER_PACE: Duration = Duration::from_millis(40);

/// Counters of concurrent writers.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Set to stop the writers.
    pub stop: AtomicBool,
    pub statements: AtomicU64,
    pub errors: AtomicU64,
}

/// Starts `n` writers on table `schema.table` (`id BIGINT PRIMARY KEY, v BIGINT, s
/// VARCHAR`), seeded with the even ids `2..=2*rows`: inserts of odd ids, updates,
/// deletes, PK changes (to a random id) and multi-statement transactions, all over the
/// whole key range (before and after the snapshot cursor). Stops when `stats.stop` is set.
///
/// Each writer starts a statement at most every [`WRITER_PACE`]: the writers' rate is fixed,
/// not whatever the server allows. A chunk is published only once the stream reaches the
/// position it was read at, so writers that outrun the stream (unpaced, 8 of them outran a
/// debug build's stream on two shared cores in CI, 2026-12-07: the stream fell 30 s behind
/// and each chunk waited that long) stall the snapshot and the test measures the machine
/// instead of the gate.
pub fn start_writers(
    db: &DbEnv,
    schema: &str,
    table: &str,
    n: u64,
    rows: u64,
    stats: Arc<WriterStats>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let t = qt(schema, table);
    (0..n)
        .map(|w| {
            let db = db.clone();
            let stats = stats.clone();
            let t = t.clone();
            tokio::spawn(async move {
                let mut conn = db.admin_conn().await;
                let mut rng = Rng::new(w + 1);
                let mut i = 0u64;
                let mut pace = tokio::time::interval(WRITER_PACE);
                pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stats.stop.load(Ordering::Relaxed) {
                    pace.tick().await;
                    i += 1;
                    let key = |rng: &mut Rng| 1 + rng.below(2 * rows + 2);
                    let one = |rng: &mut Rng, i: u64| -> String {
                        let k = key(rng);
                        match rng.below(5) {
                            0 => format!(
                                "INSERT INTO {t} VALUES ({}, {i}, 'w{w}i{i}') \
                                 ON DUPLICATE KEY UPDATE v = v + 1",
                                k | 1
                            ),
                            1 | 2 => {
                                format!("UPDATE {t} SET v = v + 1, s = 'w{w}u{i}' WHERE id = {k}")
                            }
                            3 => format!("DELETE FROM {t} WHERE id = {k}"),
                            _ => format!("UPDATE IGNORE {t} SET id = {} WHERE id = {k}", key(rng)),
                        }
                    };
                    let sql = if rng.below(4) == 0 {
                        let a = one(&mut rng, i);
                        let b = one(&mut rng, i);
                        let c = one(&mut rng, i);
                        format!("START TRANSACTION; {a}; {b}; {c}; COMMIT")
                    } else {
                        one(&mut rng, i)
                    };
                    stats.statements.fetch_add(1, Ordering::Relaxed);
                    if conn.query_drop(&sql).await.is_err() {
                        // a deadlock between writers: the transaction is rolled back
                        stats.errors.fetch_add(1, Ordering::Relaxed);
                        let _ = conn.query_drop("ROLLBACK").await;
                    }
                }
            })
        })
        .collect()
}

/// Seeds `schema.table` (`id BIGINT PRIMARY KEY, v BIGINT NOT NULL, s VARCHAR(40)`) with
/// the even ids `2..=2*rows`, in one INSERT…SELECT over a digits cross join.
pub async fn seed_big(conn: &mut mysql_async::Conn, schema: &str, table: &str, rows: u64) {
    let t = qt(schema, table);
    let d = qt(schema, "digits");
    conn.query_drop(format!(
        "CREATE TABLE {t} (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, s VARCHAR(40) NOT NULL); \
         CREATE TABLE {d} (i INT PRIMARY KEY); \
         INSERT INTO {d} VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)"
    ))
    .await
    .unwrap();
    conn.query_drop(format!(
        "INSERT INTO {t} SELECT 2 * n, n, CONCAT('seed-', n) FROM (SELECT a.i + 10 * b.i + \
         100 * c.i + 1000 * d.i + 10000 * e.i + 100000 * f.i + 1 AS n FROM {d} a, {d} b, {d} c, \
         {d} d, {d} e, {d} f) x WHERE n <= {rows}"
    ))
    .await
    .unwrap();
    let count: Option<u64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {t}"))
        .await
        .unwrap();
    assert_eq!(count, Some(rows), "seeded");
}

/// The `op: r` records grouped by chunk (their `capstan.position`), in order of appearance.
pub fn chunks(reads: &[Rec]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for r in reads {
        match out.last_mut() {
            Some((p, n)) if *p == r.position => *n += 1,
            _ => out.push((r.position.clone(), 1)),
        }
    }
    out
}

/// A consumer thread reading partition 0 of a one-partition topic from the beginning,
/// continuously, parsing as it goes. Offsets must only grow: a gap is legitimate on a real
/// broker (a transaction's commit or abort marker takes an offset), an offset read twice or
/// out of order is reported.
pub struct Tail {
    stop: Arc<AtomicBool>,
    recs: Arc<Mutex<Vec<Rec>>>,
    gap: Arc<Mutex<Option<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Tail {
    pub fn start(bootstrap: &str, topic: &str) -> Tail {
        use rdkafka::config::ClientConfig;
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::message::{Headers, Message};
        use rdkafka::{Offset, TopicPartitionList};
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "capstan-snapshot-tail")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("fetch.wait.max.ms", "5")
            .set("isolation.level", "read_uncommitted")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let recs = Arc::new(Mutex::new(Vec::new()));
        let gap = Arc::new(Mutex::new(None));
        let (s, r, g) = (stop.clone(), recs.clone(), gap.clone());
        let thread = std::thread::spawn(move || {
            let mut next_offset = 0i64;
            while !s.load(Ordering::Relaxed) {
                let Some(Ok(m)) = consumer.poll(Duration::from_millis(20)) else {
                    continue;
                };
                if m.offset() < next_offset {
                    g.lock().unwrap().get_or_insert(format!(
                        "offset {} read where {next_offset} or later was expected",
                        m.offset()
                    ));
                }
                next_offset = m.offset() + 1;
                let header = |name: &str| -> String {
                    m.headers()
                        .and_then(|h| {
                            h.iter()
                                .find(|h| h.key == name)
                                .and_then(|h| Some(std::str::from_utf8(h.value?).ok()?.to_string()))
                        })
                        .unwrap_or_default()
                };
                let mut list = r.lock().unwrap();
                let index = list.len();
                list.push(Rec {
                    index,
                    key: m.key().map(|k| serde_json::from_slice(k).unwrap()),
                    value: m.payload().map(|v| serde_json::from_slice(v).unwrap()),
                    epoch: header("capstan.epoch").parse().unwrap_or(0),
                    position: header("capstan.position"),
                    record: header("capstan.record"),
                });
            }
        });
        Tail {
            stop,
            recs,
            gap,
            thread: Some(thread),
        }
    }

    /// The records so far (panics if an offset came twice or out of order).
    pub fn records(&self) -> Vec<Rec> {
        if let Some(g) = self.gap.lock().unwrap().as_ref() {
            panic!("the tail read out of order: {g}");
        }
        self.recs.lock().unwrap().clone()
    }

    /// How many records arrived so far.
    pub fn len(&self) -> usize {
        self.recs.lock().unwrap().len()
    }

    /// Waits until `done` holds for the records (checked on the newest ones), up to `timeout`.
    pub async fn until(&self, timeout: Duration, mut done: impl FnMut(&[Rec]) -> bool) -> Vec<Rec> {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = done(&self.recs.lock().unwrap());
            if ok || Instant::now() > deadline {
                return self.records();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Inserts the sentinel row [`SENTINEL_ID`] into `schema.table` (a [`seed_big`] table)
    /// and waits up to `timeout` for it to be the newest record: everything committed before
    /// it is on the topic by then.
    pub async fn through_sentinel(
        &self,
        admin: &mut mysql_async::Conn,
        schema: &str,
        table: &str,
        timeout: Duration,
    ) -> Vec<Rec> {
        admin
            .query_drop(format!(
                "INSERT INTO {} VALUES ({SENTINEL_ID}, 0, 'sentinel')",
                qt(schema, table)
            ))
            .await
            .unwrap();
        let key = serde_json::json!({ "id": SENTINEL_ID });
        self.until(timeout, |rs| {
            rs.last().and_then(|r| r.key.as_ref()) == Some(&key)
        })
        .await
    }
}

/// The key of the sentinel row [`Tail::through_sentinel`] inserts.
pub const SENTINEL_ID: i64 = 9_000_000_000;

impl Drop for Tail {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `customers` table of flink-cdc/customer.sql, created in `schema` (the file is read in
/// place; `None` when it is absent: skip, or fail under CI).
pub async fn load_customers(conn: &mut mysql_async::Conn, schema: &str, table: &str) -> Option<()> {
    let dir = capstan_tests::external_testdata()?;
    let sql = std::fs::read_to_string(dir.join("flink-cdc/customer.sql")).unwrap();
    // comments first: the licence header contains a `;`
    let sql: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let statements: Vec<&str> = sql.split(';').map(str::trim).collect();
    let create = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE customers ("))
        .expect("CREATE TABLE customers");
    let insert = statements
        .iter()
        .find(|s| s.starts_with("INSERT INTO customers\n"))
        .expect("INSERT INTO customers");
    let target = qt(schema, table);
    conn.query_drop(create.replacen("customers", &target, 1))
        .await
        .unwrap();
    conn.query_drop(insert.replacen("customers", &target, 1))
        .await
        .unwrap();
    let n: Option<u64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {target}"))
        .await
        .unwrap();
    assert_eq!(n, Some(21), "the fixture's 21 customers");
    Some(())
}
