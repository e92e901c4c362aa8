//! The pure core of `capstan verify`: a topic replayed as a consumer would, compared with
//! the source's rows, and the report's verdict and text.

use serde_json::{json, Value};

use super::expected_rows::ExpectedRows;
use super::row_digest::Digest;
use super::table_report::{compare, Example, TableReport};
use super::topic_replay::ReplayRecord;
use super::topic_replay::{DuplicateKind, TopicOffset, TopicReplay};
use super::verify_report::VerifyReport;

/// One record of the test topic, owned.
struct Rec {
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    epoch: Option<u64>,
    position: Option<String>,
    record: Option<String>,
}

/// Builds the test topic's records (all in partition 0, offsets from 0).
#[derive(Default)]
struct Topic {
    records: Vec<Rec>,
}

fn key(id: i64) -> Vec<u8> {
    json!({"id": id}).to_string().into_bytes()
}

fn image(id: i64, note: &str) -> Value {
    json!({"id": id, "note": note})
}

fn envelope(op: &str, before: Option<Value>, after: Option<Value>, table: &str) -> Vec<u8> {
    json!({"before": before, "after": after,
           "source": {"db": "db", "table": table, "ts_ms": 1, "snapshot": "false"},
           "op": op, "ts_ms": 2})
    .to_string()
    .into_bytes()
}

impl Topic {
    fn push(
        &mut self,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        epoch: u64,
        pos: &str,
        rec: u32,
    ) {
        let offset = self.records.len() as i64;
        self.records.push(Rec {
            offset,
            key,
            value,
            epoch: Some(epoch),
            position: Some(pos.to_string()),
            record: Some(rec.to_string()),
        });
    }

    /// `c`, `r` or `u` of row `id` with `note`.
    fn upsert(&mut self, op: &str, id: i64, note: &str, epoch: u64, pos: &str) -> &mut Self {
        let value = envelope(op, None, Some(image(id, note)), "t");
        self.push(Some(key(id)), Some(value), epoch, pos, 0);
        self
    }

    /// `d` of row `id`, then its tombstone.
    fn delete(&mut self, id: i64, epoch: u64, pos: &str) -> &mut Self {
        let value = envelope("d", Some(image(id, "gone")), None, "t");
        self.push(Some(key(id)), Some(value), epoch, pos, 0);
        self.push(Some(key(id)), None, epoch, pos, 1);
        self
    }

    fn replay(&self, examples: usize) -> TopicReplay {
        let mut r = TopicReplay::new("db", "t", vec!["id".into()], examples);
        for rec in &self.records {
            r.apply(&ReplayRecord {
                partition: 0,
                offset: rec.offset,
                key: rec.key.as_deref(),
                value: rec.value.as_deref(),
                epoch: rec.epoch,
                position: rec.position.as_deref(),
                record: rec.record.as_deref(),
            });
        }
        r
    }
}

/// The source holding rows `(id, note)`.
fn source(rows: &[(i64, &str)]) -> ExpectedRows {
    let mut e = ExpectedRows::default();
    for (id, note) in rows {
        let value = envelope("r", None, Some(image(*id, note)), "t");
        e.add("db.t", Some(&key(*id)), Some(&value), &["id".to_string()])
            .unwrap();
    }
    e
}

fn report(rows: &[(i64, &str)], topic: &Topic) -> TableReport {
    compare("db.t", "cdc.db.t", &source(rows), &topic.replay(20), 20)
}

fn short(id: i64) -> String {
    Digest::of_json(&json!({"id": id})).short()
}

fn at(offset: i64) -> Option<TopicOffset> {
    Some(TopicOffset {
        partition: 0,
        offset,
    })
}

#[test]
fn a_topic_that_replays_to_the_source_is_clean() {
    let mut t = Topic::default();
    t.upsert("r", 1, "a", 1, "snapshot:x")
        .upsert("c", 2, "b", 1, "g:1")
        .upsert("u", 1, "a2", 1, "g:2")
        .upsert("c", 3, "c", 1, "g:3")
        .delete(3, 1, "g:4");
    // the snapshot-complete marker is no row event
    t.push(
        Some(br#"{"snapshot_complete":"db.t"}"#.to_vec()),
        Some(br#"{"snapshot_complete":{"db":"db","table":"t","rows":1}}"#.to_vec()),
        1,
        "snapshot:db.t:complete",
        0,
    );
    let r = report(&[(1, "a2"), (2, "b")], &t);
    assert_eq!(r.differences(), 0, "{r:?}");
    assert_eq!((r.source_rows, r.topic_keys), (2, 2));
    assert_eq!(r.records.records, 7);
    assert_eq!(r.records.row_events, 5);
    assert_eq!(r.records.tombstones, 1);
    assert_eq!(r.records.skipped, 1);
    assert_eq!(r.duplicates.count, 0);
}

#[test]
fn missing_extra_and_differing_rows_are_identified_by_key_digest_and_offset() {
    let mut t = Topic::default();
    t.upsert("c", 1, "a", 1, "g:1")
        .upsert("c", 2, "stale", 1, "g:2")
        .upsert("c", 9, "extra", 1, "g:3");
    let r = report(&[(1, "a"), (2, "fresh"), (3, "c"), (4, "d")], &t);
    assert_eq!(r.missing.count, 2);
    let mut missing = vec![short(3), short(4)];
    missing.sort();
    let keys: Vec<String> = r
        .missing
        .examples
        .iter()
        .filter_map(|e| e.key.clone())
        .collect();
    assert_eq!(keys, missing);
    assert!(r.missing.examples.iter().all(|e| e.at.is_none()));
    assert_eq!(
        r.extra.examples,
        vec![Example {
            key: Some(short(9)),
            at: at(2),
            kind: None
        }]
    );
    assert_eq!(
        r.differing.examples,
        vec![Example {
            key: Some(short(2)),
            at: at(1),
            kind: None
        }]
    );
    assert_eq!(r.differences(), 4);
    // a row deleted on the topic but present in the source is missing
    let mut t = Topic::default();
    t.upsert("c", 1, "a", 1, "g:1").delete(1, 1, "g:2");
    let r = report(&[(1, "a")], &t);
    assert_eq!((r.missing.count, r.extra.count), (1, 0));
}

#[test]
fn duplicates_are_counted_and_identified_but_are_no_difference() {
    let mut t = Topic::default();
    // a snapshot chunk read a row whose insert the stream publishes again (MySQL's read
    // view may hold a transaction after the chunk's position): a create of a present key
    t.upsert("r", 1, "a", 1, "snapshot:db.t/0")
        .upsert("c", 1, "a", 1, "g:1");
    // an owner publishes, dies; the next one (epoch 2) replays from the checkpoint: the
    // update again repeats the key's last record
    t.upsert("u", 2, "b2", 1, "g:2")
        .upsert("u", 2, "b2", 2, "g:2");
    // a late record of the dead owner (epoch 1) after epoch 2's: ignored by the epoch rule
    t.upsert("u", 2, "b-old", 1, "g:0");
    let r = report(&[(1, "a"), (2, "b2")], &t);
    assert_eq!(r.differences(), 0, "{r:?}");
    assert_eq!(r.duplicates.count, 3);
    let kinds: Vec<(Option<String>, Option<TopicOffset>, Option<&str>)> = r
        .duplicates
        .examples
        .iter()
        .map(|e| (e.key.clone(), e.at, e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (Some(short(1)), at(1), Some("create_on_present_key")),
            (Some(short(2)), at(3), Some("repeated_record")),
            (Some(short(2)), at(4), Some("stale_epoch")),
        ]
    );
    // strict: a duplicate fails the report
    let lenient = VerifyReport::new("p", vec![r.clone()], false);
    assert!(lenient.clean);
    assert_eq!(lenient.exit_code(), 0);
    let strict = VerifyReport::new("p", vec![r], true);
    assert!(!strict.clean);
    assert_eq!(strict.exit_code(), 1);
}

#[test]
fn a_replay_of_several_changes_of_a_key_is_recognised_record_by_record() {
    let mut t = Topic::default();
    // epoch 1 publishes g:1..g:3 for key 1; epoch 2 resumes from the checkpoint before g:1
    t.upsert("c", 1, "a", 1, "g:1")
        .upsert("u", 1, "b", 1, "g:2")
        .upsert("u", 1, "c", 1, "g:3")
        .upsert("c", 1, "a", 2, "g:1")
        .upsert("u", 1, "b", 2, "g:2")
        .upsert("u", 1, "c", 2, "g:3")
        .upsert("u", 1, "d", 2, "g:4");
    let r = report(&[(1, "d")], &t);
    assert_eq!(r.differences(), 0, "{r:?}");
    let kinds: Vec<(Option<TopicOffset>, Option<&str>)> = r
        .duplicates
        .examples
        .iter()
        .map(|e| (e.at, e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (at(3), Some("repeated_record")),
            (at(4), Some("repeated_record")),
            (at(5), Some("repeated_record")),
        ]
    );
    // more changes of one key than are remembered: the oldest's replay is no repeat
    let mut t = Topic::default();
    for i in 0..=super::topic_replay::RECENT {
        t.upsert("u", 1, "x", 1, &format!("g:{i}"));
    }
    t.upsert("u", 1, "x", 2, "g:0");
    assert_eq!(report(&[(1, "x")], &t).duplicates.count, 0);
    t.upsert("u", 1, "x", 2, "g:2");
    assert_eq!(report(&[(1, "x")], &t).duplicates.count, 1);
}

#[test]
fn a_delete_then_a_create_of_the_same_key_is_no_duplicate() {
    let mut t = Topic::default();
    t.upsert("c", 1, "a", 1, "g:1")
        .delete(1, 1, "g:2")
        .upsert("c", 1, "again", 1, "g:3");
    let r = report(&[(1, "again")], &t);
    assert_eq!(r.differences(), 0, "{r:?}");
    assert_eq!(r.duplicates.count, 0);
    // a delete replayed after its tombstone repeats the key's last row event
    let mut t = Topic::default();
    t.upsert("c", 1, "a", 1, "g:1")
        .delete(1, 1, "g:2")
        .delete(1, 2, "g:2");
    let r = report(&[], &t);
    assert_eq!(r.differences(), 0, "{r:?}");
    assert_eq!(r.duplicates.count, 1);
    assert_eq!(
        r.duplicates.examples[0].kind,
        Some(DuplicateKind::RepeatedRecord.as_str())
    );
}

#[test]
fn a_tombstone_alone_removes_its_key_and_one_without_a_key_is_unreadable() {
    let mut t = Topic::default();
    t.upsert("c", 1, "a", 1, "g:1")
        .upsert("c", 2, "b", 1, "g:2");
    t.push(Some(key(2)), None, 1, "g:3", 1);
    t.push(None, None, 1, "g:4", 0);
    let r = report(&[(1, "a")], &t);
    assert_eq!(r.records.tombstones, 1);
    assert_eq!(r.topic_keys, 1);
    assert_eq!((r.missing.count, r.extra.count), (0, 0));
    assert_eq!(r.unreadable.count, 1);
    assert_eq!(r.unreadable.examples[0].at, at(3));
    assert_eq!(r.differences(), 1);
}

#[test]
fn foreign_and_broken_records_are_unreadable_and_other_tables_are_skipped() {
    let mut t = Topic::default();
    t.upsert("c", 1, "a", 1, "g:1");
    // not JSON, an unknown op, an update without its image
    t.push(Some(key(5)), Some(b"not json".to_vec()), 1, "g:2", 0);
    t.push(
        Some(key(5)),
        Some(envelope("x", None, Some(image(5, "e")), "t")),
        1,
        "g:3",
        0,
    );
    t.push(
        Some(key(5)),
        Some(envelope("u", None, None, "t")),
        1,
        "g:4",
        0,
    );
    // another table sharing the topic
    t.push(
        Some(key(6)),
        Some(envelope("c", None, Some(image(6, "f")), "u")),
        1,
        "g:5",
        0,
    );
    // a record another producer wrote, without capstan headers, still applies
    t.records.push(Rec {
        offset: 5,
        key: Some(key(7)),
        value: Some(envelope("c", None, Some(image(7, "g")), "t")),
        epoch: None,
        position: None,
        record: None,
    });
    let r = report(&[(1, "a")], &t);
    assert_eq!(r.unreadable.count, 3);
    assert_eq!(r.records.other_table, 1);
    assert_eq!(r.extra.count, 1);
    assert_eq!(r.extra.examples[0].key, Some(short(7)));
    assert_eq!(r.differences(), 4);
}

#[test]
fn rows_without_a_record_key_are_identified_by_their_key_columns() {
    let mut r = TopicReplay::new("db", "t", vec!["id".into()], 5);
    let value = envelope("c", None, Some(image(4, "k")), "t");
    r.apply(&ReplayRecord {
        partition: 1,
        offset: 0,
        key: None,
        value: Some(&value),
        epoch: Some(1),
        position: Some("g:1"),
        record: Some("0"),
    });
    let report = compare("db.t", "cdc.db.t", &source(&[(4, "k")]), &r, 5);
    assert_eq!(report.differences(), 0, "{report:?}");
    assert_eq!(report.topic_keys, 1);
}

#[test]
fn examples_are_capped_and_the_text_says_how_many_more() {
    let t = Topic::default();
    let rows: Vec<(i64, &str)> = (0..5).map(|i| (i, "x")).collect();
    let r = compare("db.t", "cdc.db.t", &source(&rows), &t.replay(2), 2);
    assert_eq!(r.missing.count, 5);
    assert_eq!(r.missing.examples.len(), 2);
    let report = VerifyReport::new("p", vec![r], false);
    assert_eq!(report.exit_code(), 1);
    let text = report.to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "table db.t (topic cdc.db.t)");
    assert_eq!(lines[1], "  source rows 5, topic keys 0, records read 0");
    assert_eq!(
        lines[2],
        "  missing 5, extra 0, differing 0, unreadable 0, duplicates 0"
    );
    assert!(lines[3].starts_with("    missing key "), "{text}");
    assert_eq!(lines[5], "    … and 3 more missing");
    assert_eq!(
        lines[6],
        "pipeline p: DIFFERENT: 1 table(s), 5 source rows, 0 topic keys, missing 5, extra 0, \
         differing 0, unreadable 0, duplicates 0"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["totals"]["missing"], 5);
    assert_eq!(json["clean"], false);
    assert_eq!(
        json["tables"][0]["missing"]["examples"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert!(json["tables"][0]["missing"]["examples"][0]
        .get("partition")
        .is_none());
}

#[test]
fn no_value_appears_in_a_report() {
    let secret = "hunter2-row-value";
    let mut t = Topic::default();
    t.upsert("c", 1, secret, 1, "g:1")
        .upsert("c", 2, secret, 1, "g:2");
    let r = report(&[(1, "other"), (3, secret)], &t);
    let report = VerifyReport::new("p", vec![r], true);
    let text = report.to_text();
    let json = serde_json::to_string(&report).unwrap();
    assert!(
        !text.contains(secret) && !json.contains(secret),
        "{text}\n{json}"
    );
    assert!(!text.contains("\"id\""), "{text}");
}
