//! A deposed at-least-once owner stops publishing at its next lease check, mid-batch (issue
//! 14, ADR-0004 "What is guaranteed, exactly").
//!
//! Three workers share `CAPSTAN_FAULT=publish_lease_checked@1000/stop` (exactly one process
//! fires, once). The pipeline streams an idle table; one transaction then inserts 2,000 rows,
//! one batch of 2,000 records, and the owner freezes (SIGSTOP) right after the lease check of
//! the batch's 1,000th record. Its lease runs out, another worker takes over at a higher epoch
//! and publishes the whole transaction again, then an update of every row. Then the frozen
//! owner is resumed (SIGCONT): a zombie in the middle of its batch of inserts, whose lease
//! renewal is confirmed before its publishing thread goes on (the fault point waits for it;
//! CI once saw that order let a zombie pass 159 more lease checks).
//!
//! What must hold, read by a plain rdkafka consumer in topic order:
//! - no record the zombie would have enqueued after its last passed lease check lands: every
//!   record of the old epoch found after the new epoch's first record of its partition is one
//!   of the batch's first 1,000 (`capstan.record` ≤ 999: handed to the client before the
//!   freeze, or the one guarded by the check that passed). Before the per-record check the
//!   zombie went on to enqueue records 1,000–1,999 after the new owner's;
//! - a consumer applying the documented rule (ignore a record whose `capstan.epoch` is lower
//!   than the highest seen for its key) ends with exactly the table's rows, where a replay
//!   without the rule keeps each late insert's stale value.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::live_pipeline::LiveSchema;
use capstan_tests::{kafka, mysql, unique_name};
use load_common::consumer_from_start;
use rdkafka::message::{Headers, Message};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(30);
const ROWS: i64 = 2_000;
/// The lease check that freezes the owner: the 1,000th record of the batch.
const AT: i64 = 1_000;

/// One record as the topic holds it.
#[derive(Debug)]
struct Landed {
    partition: i32,
    epoch: u64,
    record: i64,
    id: i64,
    v: i64,
}

/// Every record of `topic`, partition by partition in offset order, until at least `want`
/// arrived and nothing new came for two seconds.
fn read_all(bootstrap: &str, topic: &str, want: usize) -> Vec<Landed> {
    let consumer = consumer_from_start(bootstrap, topic, "read_uncommitted");
    let mut out: Vec<(i32, i64, Landed)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last_new = Instant::now();
    while Instant::now() < deadline {
        if out.len() >= want && last_new.elapsed() > Duration::from_secs(2) {
            break;
        }
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        last_new = Instant::now();
        let header = |name: &str| -> String {
            m.headers()
                .and_then(|h| {
                    h.iter()
                        .find(|x| x.key == name)
                        .and_then(|x| x.value)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                })
                .unwrap_or_else(|| panic!("no {name} header"))
        };
        let v: Value = serde_json::from_slice(m.payload().unwrap()).unwrap();
        out.push((
            m.partition(),
            m.offset(),
            Landed {
                partition: m.partition(),
                epoch: header("capstan.epoch").parse().unwrap(),
                record: header("capstan.record").parse().unwrap(),
                id: v["after"]["id"].as_i64().unwrap(),
                v: v["after"]["v"].as_i64().unwrap(),
            },
        ));
    }
    out.sort_by_key(|(p, o, _)| (*p, *o));
    out.into_iter().map(|(_, _, l)| l).collect()
}

#[test]
fn a_zombie_owner_resumed_mid_batch_enqueues_nothing_past_its_lease_check() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let bootstrap = kafka.bootstrap_servers().to_string();
    let live = LiveSchema::create(
        db,
        "zombie",
        "CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT)",
    );
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("fired");
    let env = vec![(
        "CAPSTAN_FAULT".to_string(),
        format!("publish_lease_checked@{AT}/stop:{}", marker.display()),
    )];
    let Some(cluster) = Cluster::start_with_env(3, |_| String::new(), env) else {
        return;
    };
    let leader = cluster.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let prefix = unique_name("zb");
    let server_id = 7900 + std::process::id() % 90;
    let definition = live.definition("zb", "mysql", server_id, "t", &bootstrap, &prefix);
    let (victim, old_epoch) = cluster.create_streaming(leader, &definition, SETTLE);
    // one transaction, one batch of ROWS records
    let values: Vec<String> = (0..ROWS).map(|i| format!("({i}, {})", i * 3)).collect();
    live.sql(&format!(
        "INSERT INTO `{{schema}}`.t VALUES {}",
        values.join(",")
    ));
    let deadline = Instant::now() + SETTLE;
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the lease check never froze");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        cluster.is_stopped(victim),
        "the owner {victim} really is stopped"
    );
    // another worker takes over and publishes the whole transaction again
    let via = [1, 2, 3].into_iter().find(|&w| w != victim).unwrap();
    let (new_owner, new_epoch) = cluster
        .wait_until(SETTLE, |c| {
            c.pipeline_owner(via, "zb")
                .filter(|(o, e, s)| *o != victim && *e > old_epoch && s == "streaming")
                .map(|(o, e, _)| (o, e))
        })
        .unwrap_or_else(|| panic!("no takeover: {:?}", cluster.pipeline_status(via, "zb")));
    let topic = format!("{prefix}.{}.t", live.name);
    let wait_new_epoch = |records: usize| {
        let deadline = Instant::now() + SETTLE;
        loop {
            let landed = read_all(&bootstrap, &topic, 0);
            let by_new = landed.iter().filter(|l| l.epoch == new_epoch).count();
            if by_new >= records {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new owner published {by_new} of {records}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_new_epoch(ROWS as usize);
    // and then an update of every row, so a late insert of the zombie is stale
    live.sql("UPDATE `{schema}`.t SET v = v + 1");
    wait_new_epoch(2 * ROWS as usize);
    // the zombie goes on from right after its lease check
    cluster.signal(victim, "CONT");
    let deadline = Instant::now() + SETTLE;
    let ended = loop {
        let log = cluster.log(victim);
        if let Some(at) = log.find("continued after stop") {
            if let Some(line) = log[at..].lines().find(|l| l.contains("runner ended")) {
                break line.to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the zombie's runner never ended:\n{}",
            cluster.log_tail(victim)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(ended.contains("lease_expired"), "{ended}");
    // the race that matters happened: the zombie's lease renewal was confirmed before its
    // publishing thread went on (a renewed lease must not revive the deposed runner)
    let log = cluster.log(victim);
    let goes_on = log
        .lines()
        .find(|l| l.contains("the stopped thread goes on"))
        .unwrap_or_else(|| panic!("no resume line:\n{}", cluster.log_tail(victim)));
    assert!(goes_on.contains("renewed=true"), "{goes_on}");
    std::thread::sleep(Duration::from_secs(3));

    let landed = read_all(&bootstrap, &topic, 3 * ROWS as usize);
    // records of the old epoch after the new epoch's first record of their partition
    let mut first_new: BTreeMap<i32, usize> = BTreeMap::new();
    for (i, l) in landed.iter().enumerate() {
        if l.epoch == new_epoch {
            first_new.entry(l.partition).or_insert(i);
        }
    }
    let late: Vec<&Landed> = landed
        .iter()
        .enumerate()
        .filter(|(i, l)| l.epoch == old_epoch && first_new.get(&l.partition).is_some_and(|f| i > f))
        .map(|(_, l)| l)
        .collect();
    let past_check: Vec<i64> = late.iter().map(|l| l.record).filter(|r| *r >= AT).collect();
    assert!(
        past_check.is_empty(),
        "the zombie enqueued {} records past its lease check (first {:?})",
        past_check.len(),
        past_check.first()
    );
    // the consumer rule: per key, ignore a record of an epoch below the highest seen
    let mut replica: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
    for l in &landed {
        match replica.get(&l.id) {
            Some((seen, _)) if l.epoch < *seen => {}
            _ => {
                replica.insert(l.id, (l.epoch, l.v));
            }
        }
    }
    let got: BTreeMap<i64, i64> = replica.into_iter().map(|(k, (_, v))| (k, v)).collect();
    let want: BTreeMap<i64, i64> = (0..ROWS).map(|i| (i, i * 3 + 1)).collect();
    assert_eq!(got, want, "the replay by the consumer rule");
    // without the rule, each late record of the zombie leaves its key stale
    let naive: BTreeMap<i64, i64> = landed.iter().map(|l| (l.id, l.v)).collect();
    for l in &late {
        assert_eq!(
            naive[&l.id],
            l.id * 3,
            "key {} replayed without the rule",
            l.id
        );
    }
    let old = landed.iter().filter(|l| l.epoch == old_epoch).count();
    eprintln!(
        "zombie {victim} (epoch {old_epoch}) -> {new_owner} (epoch {new_epoch}): {old} records of \
         the old epoch, {} of them after the new epoch's first (records {:?}..={:?}); {ended}",
        late.len(),
        late.iter().map(|l| l.record).min(),
        late.iter().map(|l| l.record).max()
    );
}
