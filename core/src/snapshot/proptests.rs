//! A model check of the snapshot handoff: writers, a lagging stream, chunk reads (whose read
//! view may include a few transactions beyond their position, as MySQL's lock path allows),
//! crashes at every durable step, and a consumer that applies what was published as
//! upserts/deletes by key. After everything drains, the consumer must equal the source table;
//! without crashes no row is published twice by the snapshot.
//!
//! Chunks are read in rounds, as the driver reads them in parallel: up to three consecutive
//! key ranges of the table (all but the last bounded above, the last open), each read at its
//! own G with writes landing between the reads in any order, offered in key order; a bounded
//! range holding more than a chunk ends the round there. At most one chunk is published per
//! streamed transaction (the runner publishes one per batch); a chunk that cannot wait is
//! dropped and read again.
//!
//! Two-phase XA is modelled as the source handles it with `xa: track` (ADR-0008): a prepare
//! inserts a reserved key, is in G once written (the server's executed set has its GTID) but
//! not in any read view until it commits, and is pooled by the stream (handed out with its
//! resolution, so the processed set has a hole while it waits; the checkpoint is held before
//! it). A restart resumes from the checkpoint and skips what was handed out.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::change::{Op, TableId, TransactionGtid};
use crate::position::{Flavor, Gtid, Position};

const SID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const CHUNK: usize = 3;

/// The first `n` binlog entries.
fn pos(n: usize) -> Position {
    pos_of(&(0..n).collect())
}

/// The set of binlog entries `handed` (entry i is GNO i + 1).
fn pos_of(handed: &BTreeSet<usize>) -> Position {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &i in handed {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == i + 1 => *end = i + 1,
            _ => ranges.push((i + 1, i + 1)),
        }
    }
    if ranges.is_empty() {
        return Position::empty(Flavor::Mysql);
    }
    let text: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    Position::parse(Flavor::Mysql, &format!("{SID}:{}", text.join(":"))).expect("valid gtid set")
}

fn gtid(i: usize) -> TransactionGtid {
    TransactionGtid::Mysql(
        format!("{SID}:{}", i + 1)
            .parse::<Gtid>()
            .expect("valid gtid"),
    )
}

fn key(k: u64) -> SnapshotKey {
    SnapshotKey::encode(&[KeyComponent::UInt(k)])
}

#[derive(Clone, Copy, Debug)]
enum Write {
    Insert,
    Update,
    Delete,
    ChangeKey,
    OtherTable,
    /// XA PREPARE of an insert of a reserved key (at most two pending).
    Prepare,
    /// XA COMMIT (even pick) or ROLLBACK of the oldest pending prepare.
    Resolve,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Write(Write, u8, u32),
    Stream(u8, Option<u8>),
    /// A round of reads: ranges, range width, view extras, the reads' time order, and the
    /// writes landing between them.
    ReadRound(u8, u8, u8, u8, [Option<(Write, u8, u32)>; 2]),
    Flush,
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    let write = prop_oneof![
        Just(Write::Insert),
        Just(Write::Update),
        Just(Write::Delete),
        Just(Write::ChangeKey),
        Just(Write::OtherTable),
        Just(Write::Prepare),
        Just(Write::Resolve),
    ];
    prop_oneof![
        4 => (write.clone(), any::<u8>(), any::<u32>()).prop_map(|(w, p, v)| Step::Write(w, p, v)),
        3 => (1u8..4, proptest::option::weighted(0.15, 0u8..2)).prop_map(|(n, c)| Step::Stream(n, c)),
        2 => (
            1u8..4,
            1u8..6,
            0u8..3,
            any::<u8>(),
            [
                proptest::option::weighted(0.3, (write.clone(), any::<u8>(), any::<u32>())),
                proptest::option::weighted(0.3, (write.clone(), any::<u8>(), any::<u32>())),
            ],
        )
            .prop_map(|(k, w, x, o, b)| Step::ReadRound(k, w, x, o, b)),
        1 => Just(Step::Flush),
        1 => Just(Step::Crash),
    ]
}

/// One row change of the snapshot table: (key, value) images.
type Image = Option<(u64, u64)>;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Plain,
    Prepare,
    Resolve { prepare: usize },
}

#[derive(Clone, Debug)]
struct Txn {
    changes: Vec<(Op, Image, Image)>,
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Published {
    Upsert(u64, u64),
    Delete(u64),
}

#[derive(Clone, Debug, Default)]
struct Durable {
    checkpoint: usize,
    /// The processed set beside the checkpoint (entries handed out).
    handed: BTreeSet<usize>,
    cursor: Option<u64>,
    delivered: Option<u64>,
    started: bool,
    complete: bool,
}

/// A chunk's rows and where its range ends (its last row, or the bound of a range read whole).
type Rows = (Vec<(u64, u64)>, Option<u64>);

struct Node {
    session: SnapshotSession<Rows>,
    /// The cursor as a number, beside the gate's encoded one (the model reads by it).
    cursor: Option<u64>,
    /// Binlog entries read so far.
    processed: usize,
    /// Entries handed out (the processed set; a pooled prepare is not).
    handed: BTreeSet<usize>,
    /// Prepares read and pooled, waiting for their resolution.
    held: BTreeSet<usize>,
}

struct World {
    table: TableId,
    /// states[i]: the table after i transactions.
    states: Vec<BTreeMap<u64, u64>>,
    binlog: Vec<Txn>,
    /// Unresolved prepares (binlog entries), oldest first, and the keys they insert.
    pending: Vec<usize>,
    reserved: BTreeSet<u64>,
    durable: Durable,
    node: Node,
    published: Vec<Published>,
    snapshot_rows: Vec<u64>,
    suppressed: usize,
    crashed: bool,
}

impl World {
    fn new(initial: &[u64]) -> World {
        let table = TableId::new("shop", "t");
        let state: BTreeMap<u64, u64> = initial.iter().map(|&k| (k, k * 10)).collect();
        let durable = Durable::default();
        let node = Self::boot(&table, &durable);
        World {
            table,
            states: vec![state],
            binlog: Vec::new(),
            pending: Vec::new(),
            reserved: BTreeSet::new(),
            durable,
            node,
            published: Vec::new(),
            snapshot_rows: Vec::new(),
            suppressed: 0,
            crashed: false,
        }
    }

    /// A node started from the durable state only.
    fn boot(table: &TableId, d: &Durable) -> Node {
        let mut gate = CursorGate::new();
        let status = if d.complete {
            TableStatus::Complete
        } else if d.started {
            TableStatus::InProgress
        } else {
            TableStatus::Pending
        };
        gate.track(
            table.clone(),
            TableCursor {
                status,
                pk_cursor: d.cursor.map(key),
                delivered_pk: d.delivered.map(key),
            },
        );
        Node {
            session: SnapshotSession::new(vec![table.clone()], gate),
            cursor: d.cursor,
            processed: d.checkpoint,
            handed: d.handed.clone(),
            held: BTreeSet::new(),
        }
    }

    fn write(&mut self, w: Write, pick: u8, value: u32) {
        let mut state = self.states.last().cloned().unwrap_or_default();
        let keys: Vec<u64> = state.keys().copied().collect();
        let existing = (!keys.is_empty()).then(|| keys[usize::from(pick) % keys.len()]);
        let fresh = (0..64u64)
            .map(|i| (u64::from(pick) + i * 7) % 64 + (u64::MAX - 64))
            .chain(0..64)
            .find(|k| !state.contains_key(k) && !self.reserved.contains(k));
        let v = u64::from(value);
        let mut kind = Kind::Plain;
        let changes = match (w, existing, fresh) {
            (Write::Prepare, _, Some(k)) if self.pending.len() < 2 => {
                // the row exists only once the prepare commits
                self.pending.push(self.binlog.len());
                self.reserved.insert(k);
                kind = Kind::Prepare;
                vec![(Op::Insert, None, Some((k, v)))]
            }
            (Write::Resolve, _, _) if !self.pending.is_empty() => {
                let prepare = self.pending.remove(0);
                let changes = self.binlog[prepare].changes.clone();
                for (_, _, after) in &changes {
                    if let Some((k, v)) = after {
                        self.reserved.remove(k);
                        if pick.is_multiple_of(2) {
                            state.insert(*k, *v);
                        }
                    }
                }
                kind = Kind::Resolve { prepare };
                if pick.is_multiple_of(2) {
                    changes
                } else {
                    vec![]
                }
            }
            (Write::OtherTable | Write::Prepare | Write::Resolve, _, _) => vec![],
            (Write::Insert, _, Some(k)) | (_, None, Some(k)) => {
                state.insert(k, v);
                vec![(Op::Insert, None, Some((k, v)))]
            }
            (Write::Update, Some(k), _) | (Write::ChangeKey, Some(k), None) => {
                let old = state.insert(k, v).unwrap_or_default();
                vec![(Op::Update, Some((k, old)), Some((k, v)))]
            }
            (Write::Delete, Some(k), _) => {
                let old = state.remove(&k).unwrap_or_default();
                vec![(Op::Delete, Some((k, old)), None)]
            }
            (Write::ChangeKey, Some(k), Some(n)) => {
                let old = state.remove(&k).unwrap_or_default();
                state.insert(n, old);
                vec![(Op::Update, Some((k, old)), Some((n, old)))]
            }
            (_, _, None) => vec![],
        };
        self.binlog.push(Txn { changes, kind });
        self.states.push(state);
    }

    /// Processes the next streamed transaction; `crash` is where to crash if a chunk is
    /// published after it (0: after `delivered_pk` is durable, 1: after the publish).
    fn stream_one(&mut self, crash: Option<u8>) -> bool {
        let i = self.node.processed;
        let Some(txn) = self.binlog.get(i).cloned() else {
            return false;
        };
        self.node.processed += 1;
        if self.node.handed.contains(&i) {
            // handed out before the restart: skipped
            return true;
        }
        if let Kind::Prepare = txn.kind {
            self.node.held.insert(i);
            return true;
        }
        // a transaction outside a waiting chunk's G releases the chunk first (one per batch)
        let released = self.node.session.take_before(&gtid(i), true);
        let before = released.is_some();
        if let Some(chunk) = released {
            if self.publish(chunk, crash) {
                return true;
            }
        }
        for (op, before, after) in txn.changes {
            let (bk, ak) = (before.map(|b| key(b.0)), after.map(|a| key(a.0)));
            let keys = match (op, &bk, &ak) {
                (Op::Insert, _, Some(a)) => RowKeys::Insert(a),
                (Op::Delete, Some(b), _) => RowKeys::Delete(b),
                (Op::Update, Some(b), Some(a)) => RowKeys::Update {
                    before: b,
                    after: a,
                },
                _ => unreachable!("model changes are well formed"),
            };
            let verdict = self.node.session.gate().decide(&self.table, keys);
            let (b, a) = (before.unwrap_or_default(), after.unwrap_or_default());
            match (verdict, op) {
                (Verdict::Suppress, _) => self.suppressed += 1,
                (Verdict::Forward, Op::Insert) => self.published.push(Published::Upsert(a.0, a.1)),
                (Verdict::Forward, Op::Delete) => self.published.push(Published::Delete(b.0)),
                (Verdict::Forward, Op::Update) => {
                    if b.0 != a.0 {
                        self.published.push(Published::Delete(b.0));
                    }
                    self.published.push(Published::Upsert(a.0, a.1));
                }
                (Verdict::DeleteOnly, _) => {
                    self.suppressed += 1;
                    self.published.push(Published::Delete(b.0));
                }
                (Verdict::InsertOnly, _) => {
                    self.suppressed += 1;
                    self.published.push(Published::Upsert(a.0, a.1));
                }
            }
        }
        self.node.handed.insert(i);
        if let Kind::Resolve { prepare } = txn.kind {
            self.node.held.remove(&prepare);
            self.node.handed.insert(prepare);
        }
        // the batch may carry one chunk: the first whose position this transaction completed
        if !before {
            if let Some(chunk) = self.node.session.take_ready(&pos_of(&self.node.handed)) {
                self.publish(chunk, crash);
            }
        }
        true
    }

    /// Publishes every waiting chunk whose position is processed, one after the other (the
    /// runner's loop while the stream is idle). True if any was.
    fn publish_ready(&mut self, crash: Option<u8>) -> bool {
        let mut any = false;
        while let Some(chunk) = self.node.session.take_ready(&pos_of(&self.node.handed)) {
            any = true;
            if self.publish(chunk, crash) {
                break;
            }
        }
        any
    }

    /// Publishes a chunk: `delivered_pk` made durable first, the rows published, then
    /// `pk_cursor` made durable. True if it crashed on the way.
    fn publish(&mut self, chunk: ReadyChunk<Rows>, crash: Option<u8>) -> bool {
        let end = chunk.payload.1;
        self.durable.started = true;
        if end.is_some() {
            self.durable.delivered = end.max(self.durable.delivered);
        }
        if crash == Some(0) {
            self.crash();
            return true;
        }
        for &(k, v) in &chunk.payload.0 {
            self.published.push(Published::Upsert(k, v));
            self.snapshot_rows.push(k);
        }
        if crash == Some(1) {
            self.crash();
            return true;
        }
        if end.is_some() {
            self.durable.cursor = end.max(self.durable.cursor);
            self.node.cursor = self.durable.cursor;
        }
        self.durable.complete |= chunk.last;
        false
    }

    /// Commits the checkpoint, held before the earliest pooled prepare, with the processed
    /// set beside it.
    fn flush(&mut self) {
        let held = self.node.held.first().copied().unwrap_or(usize::MAX);
        self.durable.checkpoint = self.node.processed.min(held);
        self.durable.handed = self.node.handed.clone();
    }

    /// Reads a round of `k` chunks: consecutive key ranges from the cursor, `width` keys each
    /// but the last (open), each at G = everything committed when it is read, through a view
    /// that may also see the next `extras` transactions. The reads happen in an order picked by
    /// `order`, with `between` written after the first and the second; they are offered in key
    /// order, up to the first bounded range that held more than a chunk.
    fn read_round(
        &mut self,
        k: usize,
        width: u64,
        extras: usize,
        order: u8,
        between: &[Option<(Write, u8, u32)>],
    ) {
        if self.node.session.next_table().is_none() {
            return;
        }
        let after = self.node.cursor;
        let start = after.map_or(0, |c| c.saturating_add(1));
        // ranges stay below the key space's end
        let k = if start.checked_add(k as u64 * width).is_some() {
            k
        } else {
            1
        };
        // range i: (lo_i, hi_i], the last one open
        let bounds: Vec<(Option<u64>, Option<u64>)> = (0..k)
            .map(|i| {
                let i = i as u64;
                let lo = if i == 0 {
                    after
                } else {
                    Some(start.saturating_add(i * width) - 1)
                };
                let hi = (i + 1 < k as u64).then(|| start.saturating_add((i + 1) * width) - 1);
                (lo, hi)
            })
            .collect();
        let mut time: Vec<usize> = (0..k).collect();
        time.rotate_left(usize::from(order) % k);
        if order & 0x80 != 0 {
            time.reverse();
        }
        let mut read: Vec<Option<(Position, Rows, bool, bool)>> = (0..k).map(|_| None).collect();
        for (n, &i) in time.iter().enumerate() {
            if n > 0 {
                if let Some(Some((w, p, v))) = between.get(n - 1) {
                    self.write(*w, *p, *v);
                }
            }
            let g = self.binlog.len();
            let view = &self.states[(g + extras).min(self.binlog.len())];
            let (lo, hi) = bounds[i];
            let mut rows: Vec<(u64, u64)> = view
                .iter()
                .filter(|(key, _)| lo.is_none_or(|c| **key > c) && hi.is_none_or(|h| **key <= h))
                .take(CHUNK + 1)
                .map(|(key, v)| (*key, *v))
                .collect();
            let more = rows.len() > CHUNK;
            rows.truncate(CHUNK);
            let (end, last, cut) = match hi {
                Some(h) if !more => (Some(h), false, false),
                Some(_) => (rows.last().map(|r| r.0), false, true),
                None => (rows.last().map(|r| r.0), !more, false),
            };
            read[i] = Some((pos(g), (rows, end), last, cut));
        }
        for (i, chunk) in read.into_iter().enumerate() {
            let Some((g, rows, last, cut)) = chunk else {
                break;
            };
            let end = rows.1.map(key);
            self.node
                .session
                .chunk_read(
                    self.table.clone(),
                    bounds[i].0.map(key).as_ref(),
                    g,
                    end,
                    last,
                    rows,
                )
                .expect("the model offers chunks correctly");
            if cut || last {
                break;
            }
        }
        // an idle stream may already cover G
        self.publish_ready(None);
    }

    fn crash(&mut self) {
        self.crashed = true;
        self.node = Self::boot(&self.table, &self.durable);
    }

    fn drain(&mut self) {
        // every prepare commits (a chunk may wait for a resolution while the stream is idle)
        while !self.pending.is_empty() {
            self.write(Write::Resolve, 0, 0);
        }
        for _ in 0..10_000 {
            if self.node.session.next_table().is_some() {
                self.read_round(2, 3, 0, 0, &[]);
            } else if self.publish_ready(None) {
                continue;
            } else if !self.stream_one(None) {
                if self.node.session.is_complete() {
                    return;
                }
                panic!("stuck: a chunk waits for a position the stream never reaches");
            }
        }
        panic!("did not drain");
    }

    fn consumer(&self) -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for p in &self.published {
            match *p {
                Published::Upsert(k, v) => {
                    m.insert(k, v);
                }
                Published::Delete(k) => {
                    m.remove(&k);
                }
            }
        }
        m
    }
}

fn run(initial: &[u64], steps: &[Step]) -> World {
    let mut w = World::new(initial);
    for s in steps {
        match *s {
            Step::Write(kind, pick, v) => w.write(kind, pick, v),
            Step::Stream(n, crash) => {
                for _ in 0..n {
                    w.stream_one(crash);
                }
            }
            Step::ReadRound(k, width, extras, order, between) => w.read_round(
                usize::from(k),
                u64::from(width),
                usize::from(extras),
                order,
                &between,
            ),
            Step::Flush => w.flush(),
            Step::Crash => w.crash(),
        }
    }
    w.drain();
    w
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn topic_replayed_by_key_equals_the_table(
        initial in proptest::collection::btree_set(0u64..40, 0..12),
        steps in proptest::collection::vec(step(), 0..60),
    ) {
        let initial: Vec<u64> = initial.into_iter().collect();
        let w = run(&initial, &steps);
        prop_assert_eq!(&w.consumer(), w.states.last().expect("a state"));
        if !w.crashed {
            let mut seen = w.snapshot_rows.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), w.snapshot_rows.len(), "a snapshot row published twice");
        }
    }
}

/// The gate really suppresses: a write to a not-yet-read key during the snapshot is carried by
/// the chunk, not by the stream, and a write behind the cursor is streamed.
#[test]
fn suppression_happens_and_is_needed() {
    let steps = [
        Step::ReadRound(1, 1, 0, 0, [None, None]), // chunk 1: keys 1, 2, 3 at G = 0
        Step::Write(Write::Update, 3, 7),          // key 5 (not yet read): suppressed
        Step::Write(Write::Update, 0, 8),          // key 1 (read): forwarded
        Step::Stream(2, None),
    ];
    let w = run(&[1, 2, 3, 5], &steps);
    assert_eq!(&w.consumer(), w.states.last().unwrap());
    assert_eq!(w.suppressed, 1);
    assert_eq!(w.snapshot_rows, vec![1, 2, 3, 5]);
}

/// Gating deletes on `delivered_pk` is what sweeps a row deleted in the crash window; a gate
/// on `pk_cursor` would leave a phantom.
#[test]
fn crash_window_delete_is_swept() {
    let steps = [
        Step::Write(Write::OtherTable, 0, 0),
        Step::ReadRound(1, 1, 0, 0, [None, None]), // chunk at G = 1: keys 1, 2, 3
        Step::Stream(1, Some(1)),                  // published, crash before pk_cursor is durable
        Step::Write(Write::Delete, 1, 0),          // delete key 2, already on the topic
    ];
    let w = run(&[1, 2, 3, 4], &steps);
    assert!(w.crashed);
    assert_eq!(&w.consumer(), w.states.last().unwrap());
    assert!(!w.consumer().contains_key(&2));
}

/// A chunk read while an XA prepare is pending (its GTID in G, its row in no view) is
/// published before the next transaction outside G is gated: here the prepare's own commit,
/// whose row the chunk (the table's last) does not hold. Waiting for the processed set to
/// cover G instead would gate the commit first, suppress its row and lose it.
#[test]
fn a_chunk_behind_a_pending_prepare_goes_before_the_next_transaction() {
    let steps = [
        Step::Write(Write::Prepare, 0, 7), // reserves a key beyond 1, 2
        Step::ReadRound(1, 1, 0, 0, [None, None]), // keys 1, 2, the last chunk: G has the prepare
        Step::Write(Write::Resolve, 0, 0), // XA COMMIT: the row appears, outside G
        Step::Stream(2, None),
    ];
    let w = run(&[1, 2], &steps);
    assert_eq!(&w.consumer(), w.states.last().unwrap());
    assert_eq!(w.consumer().len(), 3, "the prepared row arrived");
    assert_eq!(w.snapshot_rows, vec![1, 2]);
}
