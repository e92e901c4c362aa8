//! [`TopicReplay`]: a table's topic applied record by record as a consumer keeping a replica
//! would (docs/event-format.md): per key the latest `after` image, a delete or a tombstone
//! removes the key, records without `op` (the snapshot-complete marker) are skipped, and a
//! record whose `capstan.epoch` is lower than one already applied to its key is ignored (an
//! old owner's late replay). Pure; it keeps per key the digest of the image and what it needs
//! to recognise a duplicate, never a value.
//!
//! A duplicate is counted, and identified by key digest, partition and offset, when a record
//! - is older than its key's epoch (`stale_epoch`, ignored as above),
//! - repeats one of the key's last [`RECENT`] row events (`repeated_record`: same
//!   `capstan.position` and `capstan.record`), or
//! - creates (`c`, `r`) a key that is present, with no delete in between
//!   (`create_on_present_key`).
//!
//! These are what per-key state can see: a replay of more than [`RECENT`] changes of one key
//! shows only as its creates.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::row_digest::{row_identity, Digest};

/// How many of a key's latest row events are remembered (as 8-byte hashes of their
/// `capstan.position` and `capstan.record`) to recognise their replay.
pub const RECENT: usize = 4;

/// One consumed record, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct ReplayRecord<'a> {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes; `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The `capstan.epoch` header, parsed.
    pub epoch: Option<u64>,
    /// The `capstan.position` header.
    pub position: Option<&'a str>,
    /// The `capstan.record` header.
    pub record: Option<&'a str>,
}

/// Where a record is in its topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TopicOffset {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

/// Why a record counts as a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DuplicateKind {
    /// Its epoch is lower than one already applied to its key: ignored.
    StaleEpoch,
    /// Same position and record index as one of the key's last row events.
    RepeatedRecord,
    /// A create (`c` or `r`) of a key already present.
    CreateOnPresentKey,
}

impl DuplicateKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DuplicateKind::StaleEpoch => "stale_epoch",
            DuplicateKind::RepeatedRecord => "repeated_record",
            DuplicateKind::CreateOnPresentKey => "create_on_present_key",
        }
    }
}

/// One duplicate, value-free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// The key's digest.
    pub key: Digest,
    /// Where the duplicate is.
    pub at: TopicOffset,
    /// Why it counts.
    pub kind: DuplicateKind,
}

/// What a replay saw, by kind of record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayCounts {
    /// Records read.
    pub records: u64,
    /// Row events (`c`, `r`, `u`, `d`) applied.
    pub row_events: u64,
    /// Tombstones (null values) applied.
    pub tombstones: u64,
    /// Records that are not row events (no `op`: the snapshot-complete marker), skipped.
    pub skipped: u64,
    /// Row events of another table sharing the topic, skipped.
    pub other_table: u64,
    /// Records that are not a change event this format knows (no JSON, an unknown `op`, a
    /// row event without its image) or that no key identifies: a consumer could not apply
    /// them. Each is a difference.
    pub unreadable: u64,
    /// Duplicates (see the module documentation).
    pub duplicates: u64,
}

/// The state of one key.
#[derive(Clone, Copy, Debug)]
pub struct KeyState {
    /// The digest of the key's `after` image; `None` once deleted.
    pub after: Option<Digest>,
    /// Where the record that set it is.
    pub at: TopicOffset,
    /// The highest epoch applied to the key.
    epoch: Option<u64>,
    /// Hashes of the `(position, record)` of the key's last row events, newest first; 0 for
    /// none.
    recent: [u64; RECENT],
}

/// A table's topic, replayed. See the module documentation.
#[derive(Debug)]
pub struct TopicReplay {
    schema: String,
    table: String,
    key_columns: Vec<String>,
    keys: HashMap<Digest, KeyState>,
    counts: ReplayCounts,
    duplicates: Vec<Duplicate>,
    unreadable: Vec<TopicOffset>,
    examples: usize,
}

impl TopicReplay {
    /// A replay of the topic of `schema.table`, whose rows are identified by `key_columns`
    /// when a record has no key; keeps up to `examples` duplicates and unreadable records.
    pub fn new(schema: &str, table: &str, key_columns: Vec<String>, examples: usize) -> Self {
        TopicReplay {
            schema: schema.to_string(),
            table: table.to_string(),
            key_columns,
            keys: HashMap::new(),
            counts: ReplayCounts::default(),
            duplicates: Vec::new(),
            unreadable: Vec::new(),
            examples,
        }
    }

    /// Applies the next record of its partition.
    pub fn apply(&mut self, r: &ReplayRecord<'_>) {
        self.counts.records += 1;
        let at = TopicOffset {
            partition: r.partition,
            offset: r.offset,
        };
        let Some(value) = r.value else {
            self.tombstone(r, at);
            return;
        };
        let Ok(value) = serde_json::from_slice::<Value>(value) else {
            self.unreadable(at);
            return;
        };
        let Some(op) = value.get("op") else {
            self.counts.skipped += 1;
            return;
        };
        let source = value.get("source");
        let of = |field: &str| source.and_then(|s| s.get(field)).and_then(Value::as_str);
        if of("db").is_some_and(|db| db != self.schema)
            || of("table").is_some_and(|t| t != self.table)
        {
            self.counts.other_table += 1;
            return;
        }
        let (creates, image_field) = match op.as_str() {
            Some("c" | "r") => (true, "after"),
            Some("u") => (false, "after"),
            Some("d") => (false, "before"),
            _ => {
                self.unreadable(at);
                return;
            }
        };
        let image = value.get(image_field).filter(|i| i.is_object());
        let Some(image) = image else {
            self.unreadable(at);
            return;
        };
        let Some(key) = row_identity(r.key, Some(image), &self.key_columns) else {
            self.unreadable(at);
            return;
        };
        let identity = match (r.position, r.record) {
            (Some(p), Some(n)) => Some(record_hash(p, n)),
            _ => None,
        };
        let state = self.keys.get(&key).copied();
        if let Some(kind) = duplicate_kind(state.as_ref(), r.epoch, identity, creates) {
            self.duplicate(key, at, kind);
            if kind == DuplicateKind::StaleEpoch {
                return;
            }
        }
        self.counts.row_events += 1;
        let after = (image_field == "after").then(|| Digest::of_json(image));
        self.keys.insert(
            key,
            KeyState {
                after,
                at,
                epoch: max_epoch(state.and_then(|s| s.epoch), r.epoch),
                recent: remember(state.map(|s| s.recent), identity),
            },
        );
    }

    /// A null value: the key is removed (a tombstone follows every delete). A tombstone
    /// without a key is unreadable.
    fn tombstone(&mut self, r: &ReplayRecord<'_>, at: TopicOffset) {
        let Some(key) = row_identity(r.key, None, &self.key_columns) else {
            self.unreadable(at);
            return;
        };
        let state = self.keys.get(&key).copied();
        if let (Some(s), Some(epoch)) = (state, r.epoch) {
            if s.epoch.is_some_and(|applied| epoch < applied) {
                self.duplicate(key, at, DuplicateKind::StaleEpoch);
                return;
            }
        }
        self.counts.tombstones += 1;
        self.keys.insert(
            key,
            KeyState {
                after: None,
                at,
                epoch: max_epoch(state.and_then(|s| s.epoch), r.epoch),
                // a delete's replay is recognised by the delete, not its tombstone
                recent: state.map(|s| s.recent).unwrap_or_default(),
            },
        );
    }

    /// A record whose key or value could not be read back as JSON (a wrong framing, a schema
    /// the topic's subjects do not hold): counted as read and unreadable.
    pub fn unreadable_record(&mut self, partition: i32, offset: i64) {
        self.counts.records += 1;
        self.unreadable(TopicOffset { partition, offset });
    }

    fn duplicate(&mut self, key: Digest, at: TopicOffset, kind: DuplicateKind) {
        self.counts.duplicates += 1;
        if self.duplicates.len() < self.examples {
            self.duplicates.push(Duplicate { key, at, kind });
        }
    }

    fn unreadable(&mut self, at: TopicOffset) {
        self.counts.unreadable += 1;
        if self.unreadable.len() < self.examples {
            self.unreadable.push(at);
        }
    }

    /// Every key seen, deleted ones with `after: None`.
    pub fn keys(&self) -> &HashMap<Digest, KeyState> {
        &self.keys
    }

    /// Keys present (not deleted).
    pub fn present(&self) -> usize {
        self.keys.values().filter(|s| s.after.is_some()).count()
    }

    /// The counts.
    pub fn counts(&self) -> ReplayCounts {
        self.counts
    }

    /// The first duplicates, in topic order per partition.
    pub fn duplicates(&self) -> &[Duplicate] {
        &self.duplicates
    }

    /// Where the first unreadable records are.
    pub fn unreadable_at(&self) -> &[TopicOffset] {
        &self.unreadable
    }
}

/// Whether a row event on a key in `state` is a duplicate, and why (module documentation).
fn duplicate_kind(
    state: Option<&KeyState>,
    epoch: Option<u64>,
    identity: Option<u64>,
    creates: bool,
) -> Option<DuplicateKind> {
    let state = state?;
    if let (Some(applied), Some(epoch)) = (state.epoch, epoch) {
        if epoch < applied {
            return Some(DuplicateKind::StaleEpoch);
        }
    }
    if identity.is_some_and(|id| state.recent.contains(&id)) {
        return Some(DuplicateKind::RepeatedRecord);
    }
    if creates && state.after.is_some() {
        return Some(DuplicateKind::CreateOnPresentKey);
    }
    None
}

/// A non-zero 8-byte hash of a record's `(position, record)` headers.
fn record_hash(position: &str, record: &str) -> u64 {
    let d = Digest::of_bytes(format!("{position}\u{0}{record}").as_bytes());
    let bytes = d.prefix();
    u64::from_le_bytes(bytes).max(1)
}

/// `recent` with `identity` in front (the oldest dropped).
fn remember(recent: Option<[u64; RECENT]>, identity: Option<u64>) -> [u64; RECENT] {
    let mut recent = recent.unwrap_or_default();
    if let Some(id) = identity {
        recent.rotate_right(1);
        recent[0] = id;
    }
    recent
}

fn max_epoch(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
