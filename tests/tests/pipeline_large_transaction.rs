//! A transaction far larger than any stage's byte budget streams through in slices (issue
//! 14): one UPDATE of 2,097,152 rows, published by an owner whose peak RSS stays under
//! 512 MiB, killed with SIGKILL in the middle of the transaction; the next owner replays it
//! from the checkpoint (which never moved inside it) under the same budget, and the topic then
//! holds every row's update from the new owner, each exactly once.
//!
//! Before slicing, the owner held the whole transaction decoded and then every record of it:
//! about 2.5 KiB per row change, 5 GB for this one.
//!
//! The exactly-once variant commits each slice in a Kafka transaction of its own, with an
//! offsets record naming the point inside the source transaction (one Kafka transaction for
//! the whole of it outlived the broker's transaction timeout and was aborted, its producer
//! fenced, so it never finished: live run of 2026-12-05). Killed in the middle, the next owner
//! resumes after the last committed slice: a read_committed consumer sees every row's update
//! exactly once, the killed owner's committed slices numbered first and the new owner's going
//! on from there, and nothing of the slice the killed owner left open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use capstan_core::position::{Flavor, Position};
use capstan_tests::cluster::Cluster;
use capstan_tests::live_pipeline::LiveSchema;
use capstan_tests::{kafka, mysql, unique_name};
use load_common::consumer_from_start;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(30);
/// 2^21 rows, one UPDATE.
const DOUBLINGS: u32 = 21;
const ROWS: u64 = 1 << DOUBLINGS;
/// The owner's peak resident set, at most.
const RSS_BUDGET: u64 = 512 << 20;
/// The owner is killed once the topic holds this many records of the update.
const KILL_AFTER: i64 = 300_000;
/// A generous bound on publishing the whole transaction (debug build, loaded machine).
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(900);

/// Records in `topic` (the sum of its partitions' high watermarks).
fn records_in(consumer: &BaseConsumer, topic: &str, partitions: &[i32]) -> i64 {
    partitions
        .iter()
        .map(|&p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(5))
                .map(|(_, high)| high)
                .unwrap_or(0)
        })
        .sum()
}

fn header<'m>(m: &'m rdkafka::message::BorrowedMessage<'_>, name: &str) -> &'m str {
    m.headers()
        .and_then(|h| h.iter().find(|x| x.key == name).and_then(|x| x.value))
        .map(|v| std::str::from_utf8(v).unwrap())
        .unwrap_or_else(|| panic!("no {name} header"))
}

#[test]
fn a_two_million_row_transaction_streams_in_slices_under_the_memory_budget_across_a_kill() {
    two_million_rows_in_one_transaction("at_least_once");
}

#[test]
fn exactly_once_a_two_million_row_transaction_commits_slice_by_slice_under_the_memory_budget_across_a_kill(
) {
    two_million_rows_in_one_transaction("exactly_once");
}

/// The two modes run one after the other: each asserts that the checkpoint stays where it was
/// while its transaction streams, which the other's writes to the same server would move.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn two_million_rows_in_one_transaction(delivery: &str) {
    let _serial = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let exactly_once = delivery == "exactly_once";
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let bootstrap = kafka.bootstrap_servers().to_string();
    let live = LiveSchema::create(
        db,
        "large_tx",
        "CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(64) NOT NULL); \
         INSERT INTO `{schema}`.t VALUES (0, 0, REPEAT('p', 40))",
    );
    for i in 0..DOUBLINGS {
        let n = 1u64 << i;
        live.sql(&format!(
            "INSERT INTO `{{schema}}`.t SELECT id + {n}, v, pad FROM `{{schema}}`.t"
        ));
    }
    let Some(mut cluster) = Cluster::start(3) else {
        return;
    };
    let leader = cluster.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let prefix = unique_name("lt");
    let server_id = if exactly_once { 8200 } else { 8100 } + std::process::id() % 90;
    let mut definition = live.definition("lt", "mysql", server_id, "t", &bootstrap, &prefix);
    definition["kafka"]["delivery"] = delivery.into();
    let (first, first_epoch) = cluster.create_streaming(leader, &definition, SETTLE);

    live.sql("UPDATE `{schema}`.t SET v = v + 1");
    // the topic exists once the first slice is published
    let topic = format!("{prefix}.{}.t", live.name);
    let isolation = if exactly_once {
        "read_committed"
    } else {
        "read_uncommitted"
    };
    let consumer = consumer_from_start_when_created(&bootstrap, &topic, isolation);
    let partitions: Vec<i32> = consumer
        .fetch_metadata(Some(&topic), Duration::from_secs(10))
        .unwrap()
        .topics()[0]
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    let deadline = Instant::now() + PUBLISH_TIMEOUT;
    while records_in(&consumer, &topic, &partitions) < KILL_AFTER {
        assert!(
            Instant::now() < deadline,
            "the first owner published too little"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let first_rss = cluster.peak_rss_bytes(first).expect("the owner runs");
    let checkpoint_at_kill = cluster.pipeline_status(leader, "lt").unwrap()["position"].clone();
    cluster.kill9(first);
    // what the first owner landed (the new owner needs a lease to pass before it publishes)
    std::thread::sleep(Duration::from_millis(300));
    let published_by_first = records_in(&consumer, &topic, &partitions);
    // the checkpoint had not moved into the transaction (other transactions on the server may
    // move it up to the update, not past it)
    let update = update_gtid(&bootstrap, &topic);
    assert!(
        !covers(&checkpoint_at_kill, &update),
        "the checkpoint moved past the update while it streamed"
    );
    // killed in the middle of the transaction (exactly-once: the high watermark counts
    // uncommitted records and commit markers too; the consumer below proves the middle)
    assert!(
        published_by_first < ROWS as i64,
        "killed in the middle of the transaction"
    );
    let via = [1, 2, 3].into_iter().find(|&w| w != first).unwrap();
    let (second, second_epoch) = cluster
        .wait_until(SETTLE * 2, |c| {
            c.pipeline_owner(via, "lt")
                .filter(|(o, e, s)| *o != first && *e > first_epoch && s == "streaming")
                .map(|(o, e, _)| (o, e))
        })
        .unwrap_or_else(|| panic!("no takeover: {:?}", cluster.pipeline_status(via, "lt")));
    if exactly_once {
        exactly_once_rows(
            &consumer,
            &mut cluster,
            (first_epoch, first_rss),
            (second, second_epoch),
            deadline,
        );
    } else {
        at_least_once_rows(
            &consumer,
            &mut cluster,
            (&topic, &partitions),
            published_by_first,
            (first_epoch, first_rss),
            (second, second_epoch),
            deadline,
        );
    }
    // the checkpoint moved past the transaction once its last part was acknowledged
    let moved = cluster.wait_until(SETTLE, |c| {
        covers(&c.pipeline_status(via, "lt")?["position"], &update).then_some(())
    });
    assert!(
        moved.is_some(),
        "the checkpoint never moved past the update"
    );
}

/// Exactly-once: the read_committed topic holds every row's update exactly once: the killed
/// owner's committed slices numbered from 0, the next owners' records going on from there,
/// nothing of the killed owner's open slice; both owners under the memory budget.
fn exactly_once_rows(
    consumer: &BaseConsumer,
    cluster: &mut Cluster,
    (first_epoch, first_rss): (u64, u64),
    (second, second_epoch): (u64, u64),
    deadline: Instant,
) {
    let mut records = BTreeSet::new();
    let mut keys = BTreeSet::new();
    let mut first_records = BTreeSet::new();
    let mut later_epochs = BTreeSet::new();
    let mut second_rss = 0;
    let mut polls = 0u64;
    while (records.len() as u64) < ROWS {
        assert!(
            Instant::now() < deadline,
            "read {} of {ROWS} committed updates",
            records.len()
        );
        polls += 1;
        if polls.is_multiple_of(2048) {
            second_rss = second_rss.max(cluster.peak_rss_bytes(second).unwrap_or(0));
        }
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let epoch: u64 = header(&m, "capstan.epoch").parse().unwrap();
        let record: u64 = header(&m, "capstan.record").parse().unwrap();
        assert!(
            records.insert(record),
            "record {record} twice (epoch {epoch})"
        );
        let key: Value = serde_json::from_slice(m.key().unwrap()).unwrap();
        assert!(keys.insert(key["id"].as_u64().unwrap()), "a key twice");
        if epoch == first_epoch {
            first_records.insert(record);
        } else {
            assert!(epoch >= second_epoch, "record of epoch {epoch}");
            if epoch != second_epoch {
                later_epochs.insert(epoch);
            }
        }
    }
    second_rss = second_rss.max(cluster.peak_rss_bytes(second).unwrap_or(0));
    // nothing more comes: the killed owner's open slice stays invisible
    assert!(
        !matches!(consumer.poll(Duration::from_secs(3)), Some(Ok(_))),
        "a record beyond the transaction's"
    );
    let from_first = first_records.len() as u64;
    eprintln!(
        "exactly_once: peak rss: first owner {} MiB ({from_first} records committed before the kill), new owner {} MiB; later epochs {later_epochs:?}",
        first_rss >> 20,
        second_rss >> 20
    );
    // the scenario happened: the first owner committed slices, and died inside the
    // transaction; its records are a prefix, the new owner's the rest
    assert!(
        from_first > 0 && from_first < ROWS,
        "{from_first} records of the first owner"
    );
    assert_eq!(first_records.last(), Some(&(from_first - 1)), "a prefix");
    assert_eq!(records.len() as u64, ROWS);
    assert_eq!(records.last(), Some(&(ROWS - 1)));
    assert_eq!(keys.len() as u64, ROWS);
    assert_both_under_budget(first_rss, second_rss);
}

/// At-least-once: the new owner replays the transaction whole; every row's update from it,
/// exactly once, numbered 0..ROWS in order, after the killed owner's records.
fn at_least_once_rows(
    consumer: &BaseConsumer,
    cluster: &mut Cluster,
    (topic, partitions): (&str, &[i32]),
    published_by_first: i64,
    (first_epoch, first_rss): (u64, u64),
    (second, second_epoch): (u64, u64),
    deadline: Instant,
) {
    let want_total = published_by_first + ROWS as i64;
    let mut second_rss = 0;
    while records_in(consumer, topic, partitions) < want_total {
        assert!(
            Instant::now() < deadline,
            "the new owner published {} of {ROWS}",
            records_in(consumer, topic, partitions) - published_by_first
        );
        second_rss = second_rss.max(cluster.peak_rss_bytes(second).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(200));
    }
    second_rss = second_rss.max(cluster.peak_rss_bytes(second).unwrap_or(0));
    eprintln!(
        "at_least_once: peak rss: first owner {} MiB (killed after {published_by_first} records), new owner {} MiB",
        first_rss >> 20,
        second_rss >> 20
    );
    assert_both_under_budget(first_rss, second_rss);

    // every row's update from the new owner, exactly once, numbered 0..ROWS in order
    let mut records = BTreeSet::new();
    let mut keys = BTreeSet::new();
    let (mut from_first, mut other) = (0u64, 0u64);
    let mut seen = 0i64;
    let read_deadline = Instant::now() + Duration::from_secs(600);
    while seen < want_total {
        assert!(
            Instant::now() < read_deadline,
            "read {seen} of {want_total}"
        );
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        seen += 1;
        let epoch: u64 = header(&m, "capstan.epoch").parse().unwrap();
        if epoch == first_epoch {
            from_first += 1;
            continue;
        }
        if epoch != second_epoch {
            other += 1;
            continue;
        }
        let record: u64 = header(&m, "capstan.record").parse().unwrap();
        assert!(records.insert(record), "record {record} twice");
        let key: Value = serde_json::from_slice(m.key().unwrap()).unwrap();
        keys.insert(key["id"].as_u64().unwrap());
    }
    assert_eq!(other, 0, "records of a third epoch");
    assert_eq!(from_first as i64, published_by_first);
    assert_eq!(records.len() as u64, ROWS);
    assert_eq!(records.first(), Some(&0));
    assert_eq!(records.last(), Some(&(ROWS - 1)));
    assert_eq!(keys.len() as u64, ROWS);
    assert_eq!(keys.last(), Some(&(ROWS - 1)));
}

/// Both owners' peak resident sets stayed under [`RSS_BUDGET`].
fn assert_both_under_budget(first_rss: u64, second_rss: u64) {
    assert!(
        first_rss < RSS_BUDGET,
        "first owner peak rss {} MiB",
        first_rss >> 20
    );
    assert!(
        second_rss < RSS_BUDGET,
        "new owner peak rss {} MiB",
        second_rss >> 20
    );
}

/// The update's GTID, from the `capstan.position` header of the first record on the topic
/// (read uncommitted: exactly-once, it is still inside an open Kafka transaction).
fn update_gtid(bootstrap: &str, topic: &str) -> Position {
    let peek = consumer_from_start(bootstrap, topic, "read_uncommitted");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "no record to read the update's gtid from"
        );
        if let Some(Ok(m)) = peek.poll(Duration::from_millis(500)) {
            return Position::parse(Flavor::Mysql, header(&m, "capstan.position")).unwrap();
        }
    }
}

/// True when the status `position` (a MySQL GTID set) covers `gtid`.
fn covers(position: &Value, gtid: &Position) -> bool {
    let set = Position::parse(Flavor::Mysql, position.as_str().unwrap()).unwrap();
    gtid.is_subset(&set)
}

/// A consumer of `topic` from its start, once the topic exists.
fn consumer_from_start_when_created(bootstrap: &str, topic: &str, isolation: &str) -> BaseConsumer {
    let deadline = Instant::now() + PUBLISH_TIMEOUT;
    loop {
        let probe: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .unwrap();
        let exists = probe
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .ok()
            .is_some_and(|m| {
                m.topics()
                    .first()
                    .is_some_and(|t| t.error().is_none() && !t.partitions().is_empty())
            });
        if exists {
            return consumer_from_start(bootstrap, topic, isolation);
        }
        assert!(Instant::now() < deadline, "the topic was never created");
        std::thread::sleep(Duration::from_millis(500));
    }
}
