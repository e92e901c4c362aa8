//! Scale of the control plane (issue 17, item 4): 200 pipelines over three real workers, one
//! of them listing 5,000 tables with snapshot progress for each, and what that costs: Raft
//! commit round trips, state and snapshot size, failover of a worker owning a third of the
//! pipelines, a rebalance after it comes back, and the workers' memory. Ignored by default;
//! figures are recorded in docs/performance.md:
//!
//! ```text
//! cargo build --workspace --all-targets
//! cargo test -p capstan-tests --test cluster_scale -- --ignored --nocapture
//! ```
//!
//! The pipelines are created through the REST API with full definitions and kept `paused`, so
//! each is owned (placed by the scheduler) but runs nothing: the figures are the control
//! plane's, not 200 binlog streams'. The 5,000 tables' snapshot progress is written as an
//! owner writes it (`BeginSnapshot`, then one `CommitSnapshotProgress` per table, under the
//! owner's epoch, to the leader's `/raft/write`), without a MySQL server holding the tables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(60);
const PIPELINES: usize = 200;
const WIDE_TABLES: usize = 5_000;
const SOURCE_UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The leader the writes go to; changed when an election moved it.
static LEADER: AtomicU64 = AtomicU64::new(0);
/// Writes sent again because the leader had changed.
static RESENT: AtomicU64 = AtomicU64::new(0);

/// Posts `command` to the current leader's `/raft/write` until it is applied (a write that
/// reached a node no longer leader is sent to the new one): the round trip of the attempt
/// that was applied.
fn leader_write(c: &Cluster, http: &reqwest::blocking::Client, command: &Value) -> Duration {
    loop {
        let leader = LEADER.load(Ordering::SeqCst);
        let sent = Instant::now();
        let r = raft_write(c, http, leader, command);
        let took = sent.elapsed();
        if r["Ok"]["outcome"] == "applied" {
            return took;
        }
        let code = r["Err"]["error_code"].as_str().unwrap_or_default();
        assert!(
            matches!(code, "not_leader" | "no_leader" | "no_quorum"),
            "{command}: {r}"
        );
        RESENT.fetch_add(1, Ordering::SeqCst);
        let now = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("a leader");
        LEADER.store(now, Ordering::SeqCst);
    }
}

fn raft_write(c: &Cluster, http: &reqwest::blocking::Client, id: u64, command: &Value) -> Value {
    http.post(format!(
        "http://127.0.0.1:{}/raft/write",
        c.workers[&id].raft_port
    ))
    .json(command)
    .send()
    .unwrap()
    .json()
    .unwrap()
}

/// A full definition (validated like any create) of pipeline `name` over `tables`.
fn definition(name: &str, server_id: usize, tables: Vec<String>) -> Value {
    json!({
        "name": name,
        "source": {
            "host": "127.0.0.1", "port": 3306, "user": "capstan", "password": "not-a-real-one",
            "tls": {"mode": "verify_none"}, "server_id": 10_000 + server_id, "flavor": "mysql"
        },
        "tables": {"include": tables},
        "kafka": {"bootstrap_servers": "127.0.0.1:9092", "topic_prefix": "scale"}
    })
}

fn quantile(v: &[Duration], q: f64) -> Duration {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn summary(label: &str, mut v: Vec<Duration>) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{label}: n={} p50={:.1}ms p99={:.1}ms max={:.1}ms",
        v.len(),
        ms(quantile(&v, 0.50)),
        ms(quantile(&v, 0.99)),
        ms(v[v.len() - 1]),
    );
}

/// Owned pipelines per member as worker `via` serves `/cluster`.
fn owned(c: &Cluster, via: u64) -> BTreeMap<u64, Vec<String>> {
    let (_, v) = c.get(via, "/cluster").unwrap();
    v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let names = m["owned_pipelines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            (m["id"].as_u64().unwrap(), names)
        })
        .collect()
}

fn counts(o: &BTreeMap<u64, Vec<String>>) -> BTreeMap<u64, usize> {
    o.iter().map(|(id, v)| (*id, v.len())).collect()
}

/// Resident and peak resident memory of every running worker, MiB.
fn memory(c: &Cluster) -> String {
    let mut parts = Vec::new();
    for (id, w) in &c.workers {
        let Some(pid) = w.pid() else { continue };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| {
                    v.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .unwrap_or(0)
                        / 1024
                })
                .unwrap_or(0)
        };
        parts.push(format!(
            "worker {id}: rss {} MiB (peak {} MiB)",
            field("VmRSS:"),
            field("VmHWM:")
        ));
    }
    parts.join("; ")
}

/// kill -9 `victim`; the time until worker `observer` shows every pipeline owned by a
/// survivor.
fn failover(c: &mut Cluster, victim: u64, observer: u64) {
    let moved = owned(c, observer)[&victim].len();
    let killed = Instant::now();
    c.kill9(victim);
    c.wait_until(SETTLE, |c| {
        let o = owned(c, observer);
        (o.get(&victim).map_or(0, Vec::len) == 0
            && o.values().map(Vec::len).sum::<usize>() == PIPELINES)
            .then_some(())
    })
    .expect("the victim's pipelines moved");
    println!(
        "failover: kill -9 of worker {victim} owning {moved} pipelines; all owned again after {:.2}s; {:?}",
        killed.elapsed().as_secs_f64(),
        counts(&owned(c, observer))
    );
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn bench_two_hundred_pipelines_and_five_thousand_tables() {
    // a snapshot every 500 entries (default 5,000), so the state size is read from a
    // snapshot that covers every write below
    let Some(mut c) = Cluster::start_with(3, |_| "raft_snapshot_logs = 500\n".to_string()) else {
        return;
    };
    let http = client();
    let began = Instant::now();
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let names: Vec<String> = (0..PIPELINES).map(|i| format!("s{i:03}")).collect();
    let wide_tables: Vec<String> = (0..WIDE_TABLES)
        .map(|t| format!("scale5k.t{t:04}"))
        .collect();

    // create and pause 200 through the REST API of a follower (forwarded to the leader)
    let via = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    let mut creates = Vec::new();
    let mut pauses = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let tables = if i == 0 {
            wide_tables.clone()
        } else {
            vec![format!("shop{i}.orders"), format!("shop{i}.order_items")]
        };
        let body = definition(name, i, tables);
        if i == 0 {
            println!(
                "the 5,000-table definition: {} bytes as json",
                serde_json::to_vec(&body).unwrap().len()
            );
        }
        let sent = Instant::now();
        let (s, b) = c
            .send_within(
                Duration::from_secs(30),
                via,
                Method::POST,
                "/pipelines",
                Some(&body),
            )
            .unwrap();
        creates.push(sent.elapsed());
        assert_eq!(s, 201, "{name}: {b}");
        let sent = Instant::now();
        let (s, b) = c
            .send(via, Method::PUT, &format!("/pipelines/{name}/pause"), None)
            .unwrap();
        pauses.push(sent.elapsed());
        assert_eq!(s, 202, "{name}: {b}");
    }
    println!(
        "created and paused {PIPELINES} pipelines in {:.1}s",
        began.elapsed().as_secs_f64()
    );
    summary(
        "POST /pipelines via a follower (the 5,000-table one included)",
        creates,
    );
    summary("PUT /pipelines/{name}/pause via a follower", pauses);

    // placed: every one owned, counts within one
    let placed = c
        .wait_until(SETTLE, |c| {
            let o = owned(c, via);
            (o.values().map(Vec::len).sum::<usize>() == PIPELINES).then_some(o)
        })
        .expect("all owned");
    let n = counts(&placed);
    println!("placement: {n:?}");
    let (lo, hi) = (n.values().min().unwrap(), n.values().max().unwrap());
    assert!(hi - lo <= 1, "placement not balanced: {n:?}");

    // the wide pipeline's snapshot progress, written as its owner writes it
    let (_, st) = c.get(leader, "/pipelines/s000/status").unwrap();
    let epoch = st["epoch"].as_u64().unwrap();
    let tables: Vec<Value> = wide_tables.iter().map(|t| json!([t, 1000])).collect();
    LEADER.store(leader, Ordering::SeqCst);
    leader_write(
        &c,
        &http,
        &json!({"command": "begin_snapshot", "pipeline": "s000", "epoch": epoch,
                "position": {"flavor": "mysql", "gtids": format!("{SOURCE_UUID}:1-5")},
                "tables": tables}),
    );
    let progress_began = Instant::now();
    let progress: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = wide_tables
            .chunks(WIDE_TABLES / 8)
            .map(|chunk| {
                let c = &c;
                s.spawn(move || {
                    let http = client();
                    let mut lat = Vec::new();
                    for t in chunk {
                        let cmd = json!({"command": "commit_snapshot_progress", "pipeline": "s000",
                            "epoch": epoch, "table": t, "pk_cursor": "00ff", "delivered_pk": "00ff",
                            "status": "complete", "rows_done": 1000, "rows_estimated": 1000});
                        lat.push(leader_write(c, &http, &cmd));
                    }
                    lat
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let took = progress_began.elapsed();
    println!(
        "{WIDE_TABLES} snapshot progress commits by 8 writers in {:.1}s = {:.0}/s",
        took.as_secs_f64(),
        WIDE_TABLES as f64 / took.as_secs_f64()
    );
    summary("CommitSnapshotProgress, 8 writers", progress);
    let (_, cluster) = c.get(LEADER.load(Ordering::SeqCst), "/cluster").unwrap();
    let mark = cluster["last_applied"].as_u64().unwrap();

    // the commit round trip of one command on the full state, one at a time
    let mut apply = Vec::new();
    for i in 0..300 {
        let name = &names[1 + i % (PIPELINES - 1)];
        apply.push(leader_write(
            &c,
            &http,
            &json!({"command": "set_desired_state", "name": name, "state": "paused"}),
        ));
    }
    summary(
        "raft commit round trip (set_desired_state to the leader, sequential)",
        apply,
    );
    println!(
        "writes sent again after a leader change: {}",
        RESENT.load(Ordering::SeqCst)
    );
    let leader = LEADER.load(Ordering::SeqCst);
    println!("after the writes: {}", memory(&c));

    // state size: every worker's snapshot once it covers the progress
    let (_, cluster) = c.get(leader, "/cluster").unwrap();
    let applied = cluster["last_applied"].as_u64().unwrap();
    for id in [1, 2, 3] {
        let v = c
            .wait_until(SETTLE, |c| {
                let (_, v) = c.get(id, "/cluster")?;
                (v["snapshot_index"].as_u64()? >= mark).then_some(v)
            })
            .expect("a snapshot covering the progress");
        let file = c.data_dir(id).join("raft").join("snapshot.capstan");
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        println!(
            "worker {id}: last applied {}, snapshot index {}, snapshot file {:.2} MiB",
            v["last_applied"],
            v["snapshot_index"],
            bytes as f64 / (1 << 20) as f64
        );
    }
    println!("leader last applied {applied}");
    let (_, offsets) = c.get(via, "/pipelines/s000/offsets").unwrap();
    assert_eq!(offsets["snapshot"].as_array().unwrap().len(), WIDE_TABLES);
    let sent = Instant::now();
    let (s, _) = c.get(via, "/pipelines/s000/status").unwrap();
    println!(
        "GET status of the 5,000-table pipeline: {s} in {:.1}ms",
        sent.elapsed().as_secs_f64() * 1e3
    );

    // failover: kill -9 a follower owning a third
    let before = owned(&c, leader);
    let victim = [1, 2, 3]
        .into_iter()
        .filter(|&id| id != leader)
        .max_by_key(|id| (before[id].len(), *id))
        .unwrap();
    let observer = leader;
    failover(&mut c, victim, observer);

    // it comes back empty; a rebalance evens the load out again
    c.spawn(victim);
    c.wait_until(SETTLE, |c| {
        let (_, v) = c.get(observer, "/cluster")?;
        v["members"]
            .as_array()?
            .iter()
            .any(|m| m["id"] == victim && m["health"] == "live")
            .then_some(())
    })
    .expect("victim live again");
    let sent = Instant::now();
    let (s, plan) = c
        .send_within(
            Duration::from_secs(60),
            observer,
            Method::POST,
            "/cluster/rebalance",
            Some(&json!({"dry_run": false})),
        )
        .unwrap();
    assert_eq!(s, 202, "{plan}");
    let planned = plan["moves"].as_array().unwrap().len();
    println!(
        "rebalance: {planned} moves started in {:.2}s",
        sent.elapsed().as_secs_f64()
    );
    let balanced = c
        .wait_until(SETTLE, |c| {
            let n = counts(&owned(c, observer));
            let (lo, hi) = (n.values().min()?, n.values().max()?);
            (hi - lo <= 1 && n.values().sum::<usize>() == PIPELINES).then_some(n)
        })
        .expect("balanced again");
    println!(
        "rebalanced after {:.2}s: {balanced:?}",
        sent.elapsed().as_secs_f64()
    );
    // and the leader, owning a third again: an election on top of the lease
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let observer = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    failover(&mut c, leader, observer);
    println!("at the end: {}", memory(&c));
    println!("whole run {:.1}s", began.elapsed().as_secs_f64());
}

/// One live pipeline over 5,000 real tables: a schema of 5,000 empty tables on the dev MySQL
/// (dropped after), a pipeline with `snapshot: initial` over all of them, resumed; the time
/// until it streams (the snapshot has begun with 5,000 tables and completed each), its owner's
/// memory, and a row inserted into the last table arriving as the status's `rows_total`.
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn bench_a_live_pipeline_over_five_thousand_tables() {
    let Some(db) = capstan_tests::mysql() else {
        return;
    };
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let began = Instant::now();
    let ddl: String = (0..WIDE_TABLES)
        .map(|t| format!("CREATE TABLE `{{schema}}`.t{t:04} (id INT PRIMARY KEY, v INT);"))
        .collect();
    let live = capstan_tests::live_pipeline::LiveSchema::create(db, "scale5k", &ddl);
    println!(
        "created {WIDE_TABLES} tables in {:.1}s",
        began.elapsed().as_secs_f64()
    );
    let Some(c) = Cluster::start(3) else {
        live.sql("DROP DATABASE `{schema}`");
        return;
    };
    c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let db = &live.db;
    let tables: Vec<String> = (0..WIDE_TABLES)
        .map(|t| format!("{}.t{t:04}", live.name))
        .collect();
    let definition = json!({
        "name": "wide",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": 7600 + (std::process::id() % 300),
            "flavor": "mysql"
        },
        "tables": {"include": tables},
        "snapshot": {"mode": "initial"},
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "wide"},
        "start_position": "current"
    });
    let resumed = Instant::now();
    let name = c.create_running(1, &definition);
    // bounded: CAPSTAN_SCALE_SNAPSHOT_SECS (600 by default), then the progress is reported
    let budget = std::env::var("CAPSTAN_SCALE_SNAPSHOT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let streaming = c.wait_until(Duration::from_secs(budget), |c| {
        let st = c.pipeline_status(1, &name)?;
        (st["state"] == "streaming").then_some(st)
    });
    let Some(st) = streaming else {
        let st = c.pipeline_status(1, &name).unwrap_or_default();
        let done = st["snapshot"].as_array().map_or(0, |t| {
            t.iter().filter(|t| t["status"] == "complete").count()
        });
        let took = resumed.elapsed().as_secs_f64();
        println!(
            "not streaming within {budget} s: state {}, {done} of {WIDE_TABLES} tables complete \
             after {took:.0}s = {:.1} tables/s; {}",
            st["state"],
            done as f64 / took,
            memory(&c)
        );
        drop(c);
        live.sql("DROP DATABASE `{schema}`");
        assert!(done > 0, "no table of the snapshot completed");
        return;
    };
    let owner = st["owner"].as_u64().unwrap();
    let complete = st["snapshot"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "complete")
        .count();
    println!(
        "streaming {:.1}s after the resume, owner {owner}, {complete} of {} tables complete",
        resumed.elapsed().as_secs_f64(),
        st["snapshot"].as_array().unwrap().len()
    );
    assert_eq!(complete, WIDE_TABLES);
    live.sql("INSERT INTO `{schema}`.t4999 VALUES (1, 1)");
    let inserted = Instant::now();
    let rows = c.wait_until(SETTLE, |c| {
        let st = c.pipeline_status(owner, &name)?;
        (st["rows_total"].as_u64()? >= 1).then_some(st["rows_total"].clone())
    });
    println!(
        "a row in the last table published after {:.2}s (rows_total {rows:?})",
        inserted.elapsed().as_secs_f64()
    );
    println!("{}", memory(&c));
    for id in [1, 2, 3] {
        let file = c.data_dir(id).join("raft").join("snapshot.capstan");
        let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        println!(
            "worker {id}: snapshot file {:.2} MiB",
            bytes as f64 / (1 << 20) as f64
        );
    }
    drop(c);
    live.sql("DROP DATABASE `{schema}`");
    println!("whole run {:.1}s", began.elapsed().as_secs_f64());
    assert!(rows.is_some(), "the row never arrived");
}
