//! The snapshot session: which tables to read next, and when a chunk that was read at position
//! G may be published.
//!
//! The caller reads chunks only while it has not processed any stream transaction beyond the
//! moment it asks (it pauses the stream during the reads, so its processed position P ⊆ G of
//! each). It may read several chunks at once — of several tables, and of consecutive key
//! ranges of one table, each with its own G — and offers them in key order per table
//! ([`SnapshotSession::chunk_read`]). It then keeps processing the stream and, after every
//! transaction (and before the first), asks [`SnapshotSession::take_ready`] with its
//! processed position: a chunk comes out at the first position that covers its G — before
//! any later transaction is gated — and the gate advances. Before gating each transaction it
//! also asks [`SnapshotSession::take_before`]: a transaction outside a chunk's G releases the
//! chunk first (G may stay uncovered behind a pending XA prepare). Every streamed change of
//! the chunk's range up to G was suppressed (its key was beyond the cursor) and is in the
//! chunk; every later one is gated with the advanced cursor.
//!
//! Chunks of one table are published in key order, so only the first waiting chunk of each
//! table (its *head*) may come out. A later chunk whose G does not cover the next transaction
//! cannot wait for its head (the transaction would be gated with its range suppressed and
//! not in its view): it is dropped, with the chunks of its table after it, and read again
//! later ([`SnapshotSession::dropped`]). So is any chunk a caller cannot publish before the
//! next transaction (`release: false`). Dropping is always safe: the gate never moved for it.

use std::collections::VecDeque;

use super::cursor_gate::{CursorGate, TableStatus};
use super::snapshot_key::SnapshotKey;
use crate::change::{TableId, TransactionGtid};
use crate::position::Position;

/// A chunk read and not yet published.
#[derive(Debug)]
struct Pending<C> {
    table: TableId,
    position: Position,
    end: Option<SnapshotKey>,
    last: bool,
    payload: C,
}

/// A chunk whose position is processed: publish it now.
#[derive(Debug)]
pub struct ReadyChunk<C> {
    /// The table.
    pub table: TableId,
    /// The position G it was read at.
    pub position: Position,
    /// Where its key range ends: the key of its last row, or the upper bound of a range read
    /// whole (`None`: no rows and no bound).
    pub end: Option<SnapshotKey>,
    /// True when it is the table's last chunk.
    pub last: bool,
    /// What the caller attached (the rows).
    pub payload: C,
}

/// A misuse of the session (a caller bug, reported rather than guessed around).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SessionError {
    /// A chunk was offered for a table that is complete, not tracked, or whose last chunk
    /// already waits.
    #[error("the chunk is not of a table still to read")]
    NotNextTable,
    /// A chunk's range does not start where the table's published and waiting chunks end.
    #[error("the chunk does not continue the table's key range")]
    NotContiguous,
    /// A chunk's end is not beyond where its range starts.
    #[error("the chunk does not advance the table's cursor")]
    CursorNotAdvanced,
}

/// The snapshot of a fixed, ordered set of tables; chunks wait in the order they were offered.
#[derive(Debug)]
pub struct SnapshotSession<C> {
    order: Vec<TableId>,
    gate: CursorGate,
    pending: VecDeque<Pending<C>>,
    dropped: u64,
}

impl<C> SnapshotSession<C> {
    /// A session over `order` (every table tracked by `gate`), tables read in that order.
    pub fn new(order: Vec<TableId>, gate: CursorGate) -> Self {
        SnapshotSession {
            order,
            gate,
            pending: VecDeque::new(),
            dropped: 0,
        }
    }

    /// The gate.
    pub fn gate(&self) -> &CursorGate {
        &self.gate
    }

    /// The tables, in reading order.
    pub fn tables(&self) -> &[TableId] {
        &self.order
    }

    /// The tables still to read, in reading order.
    pub fn incomplete(&self) -> impl Iterator<Item = &TableId> {
        self.order.iter().filter(|t| {
            self.gate
                .cursor(t)
                .is_some_and(|c| c.status != TableStatus::Complete)
        })
    }

    /// The table to read from now: the first incomplete one, unless chunks are waiting (the
    /// next reads start when every chunk read is published or dropped).
    pub fn next_table(&self) -> Option<&TableId> {
        if !self.pending.is_empty() {
            return None;
        }
        self.incomplete().next()
    }

    /// True while chunks wait for their positions to be processed.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// True when every table is complete and nothing waits.
    pub fn is_complete(&self) -> bool {
        self.pending.is_empty() && self.gate.is_complete()
    }

    /// Chunks dropped so far because they could not be published in time.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Where `table`'s next chunk starts: the end of its last waiting chunk, else its cursor.
    fn range_end(&self, table: &TableId) -> Option<&SnapshotKey> {
        match self.pending.iter().rev().find(|p| p.table == *table) {
            Some(p) => p.end.as_ref(),
            None => self.gate.cursor(table).and_then(|c| c.pk_cursor.as_ref()),
        }
    }

    /// Offers a chunk of `table` whose range starts after `after` (the end of the table's
    /// last waiting chunk, else its cursor), read at `position`, ending at `end` (its last
    /// row's key, or the bound of a range read whole).
    pub fn chunk_read(
        &mut self,
        table: TableId,
        after: Option<&SnapshotKey>,
        position: Position,
        end: Option<SnapshotKey>,
        last: bool,
        payload: C,
    ) -> Result<(), SessionError> {
        let open = self
            .gate
            .cursor(&table)
            .is_some_and(|c| c.status != TableStatus::Complete)
            && !self.pending.iter().any(|p| p.table == table && p.last);
        if !open {
            return Err(SessionError::NotNextTable);
        }
        if self.range_end(&table) != after {
            return Err(SessionError::NotContiguous);
        }
        if let (Some(end), Some(after)) = (&end, after) {
            if end <= after {
                return Err(SessionError::CursorNotAdvanced);
            }
        }
        if end.is_none() && !last {
            // an empty chunk without a bound keeps the range where it is: only a last one
            return Err(SessionError::CursorNotAdvanced);
        }
        self.pending.push_back(Pending {
            table,
            position,
            end,
            last,
            payload,
        });
        Ok(())
    }

    /// True when a waiting chunk may be published at `processed` ([`Self::take_ready`]).
    pub fn has_ready(&self, processed: &Position) -> bool {
        self.ready_index(processed).is_some()
    }

    fn ready_index(&self, processed: &Position) -> Option<usize> {
        (0..self.pending.len())
            .find(|&i| self.is_head(i) && self.pending[i].position.is_subset(processed))
    }

    /// True when no earlier waiting chunk is of the same table.
    fn is_head(&self, i: usize) -> bool {
        let table = &self.pending[i].table;
        !self.pending.iter().take(i).any(|p| p.table == *table)
    }

    /// A waiting chunk, first in order, whose position `processed` covers; the gate advances
    /// past it. Call again for the next one.
    pub fn take_ready(&mut self, processed: &Position) -> Option<ReadyChunk<C>> {
        let i = self.ready_index(processed)?;
        self.take(i)
    }

    /// The waiting chunk that must be published before `next`, the streamed transaction about
    /// to be gated, if `release` (the caller can publish one now); the gate advances past it,
    /// so `next` is gated with the chunk's cursor. Every other waiting chunk whose position
    /// does not cover `next` is dropped, with the chunks of its table after it: it cannot be
    /// published before `next` is gated.
    ///
    /// The binlog holds G's transactions before any transaction outside G, so when one
    /// outside G comes, every transaction of G the stream will hand out has been gated. One
    /// it did not hand out is a pending XA prepare (pooled until it resolves, so `processed`
    /// never covers G while it waits): its rows are not in the chunk's view either, and its
    /// resolution, after G, is gated with the advanced cursor. Without this a chunk would
    /// wait for the prepare while later changes of its rows were suppressed — lost. Every
    /// transaction gated before the chunk is thus in G.
    pub fn take_before(&mut self, next: &TransactionGtid, release: bool) -> Option<ReadyChunk<C>> {
        let mut released = None;
        let mut i = 0;
        while i < self.pending.len() {
            if next.is_covered_by(&self.pending[i].position) {
                i += 1;
                continue;
            }
            if release && released.is_none() && self.is_head(i) {
                released = self.take(i);
                continue;
            }
            self.drop_from(i);
        }
        released
    }

    /// Drops the chunk at `i` and every chunk of its table after it.
    fn drop_from(&mut self, i: usize) {
        let table = self.pending[i].table.clone();
        let before = self.pending.len();
        let mut at = 0;
        self.pending.retain(|p| {
            let keep = at < i || p.table != table;
            at += 1;
            keep
        });
        self.dropped += (before - self.pending.len()) as u64;
    }

    fn take(&mut self, i: usize) -> Option<ReadyChunk<C>> {
        let p = self.pending.remove(i)?;
        self.gate.advance(&p.table, p.end.clone(), p.last);
        Some(ReadyChunk {
            table: p.table,
            position: p.position,
            end: p.end,
            last: p.last,
            payload: p.payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::{Flavor, Gtid};
    use crate::snapshot::{KeyComponent, TableCursor};

    const SID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn pos(n: u64) -> Position {
        Position::parse(Flavor::Mysql, &format!("{SID}:1-{n}")).unwrap()
    }

    fn gtid(n: u64) -> TransactionGtid {
        TransactionGtid::Mysql(format!("{SID}:{n}").parse::<Gtid>().unwrap())
    }

    fn k(v: u64) -> SnapshotKey {
        SnapshotKey::encode(&[KeyComponent::UInt(v)])
    }

    fn session(tables: &[&str]) -> SnapshotSession<u32> {
        let mut gate = CursorGate::new();
        let order: Vec<TableId> = tables.iter().map(|t| TableId::new("s", *t)).collect();
        for t in &order {
            gate.track(t.clone(), TableCursor::pending());
        }
        SnapshotSession::new(order, gate)
    }

    #[test]
    fn chunks_of_one_table_come_out_in_key_order_each_at_its_position() {
        let t = TableId::new("s", "a");
        let mut s = session(&["a"]);
        s.chunk_read(t.clone(), None, pos(5), Some(k(10)), false, 1)
            .unwrap();
        s.chunk_read(t.clone(), Some(&k(10)), pos(3), Some(k(20)), false, 2)
            .unwrap();
        s.chunk_read(t.clone(), Some(&k(20)), pos(3), None, true, 3)
            .unwrap();
        assert!(s.next_table().is_none(), "no reads while chunks wait");
        // the second is covered at 3, but its head is not: nothing comes out
        assert!(s.take_ready(&pos(3)).is_none());
        let first = s.take_ready(&pos(5)).unwrap();
        assert_eq!((first.payload, first.end), (1, Some(k(10))));
        assert_eq!(s.take_ready(&pos(5)).unwrap().payload, 2);
        let third = s.take_ready(&pos(5)).unwrap();
        assert!(third.last && s.is_complete());
    }

    #[test]
    fn a_later_chunk_that_cannot_wait_for_its_head_is_dropped_with_those_after_it() {
        let (a, b) = (TableId::new("s", "a"), TableId::new("s", "b"));
        let mut s = session(&["a", "b"]);
        s.chunk_read(a.clone(), None, pos(5), Some(k(10)), false, 1)
            .unwrap();
        s.chunk_read(a.clone(), Some(&k(10)), pos(3), Some(k(20)), false, 2)
            .unwrap();
        s.chunk_read(a.clone(), Some(&k(20)), pos(6), Some(k(30)), false, 3)
            .unwrap();
        s.chunk_read(b.clone(), None, pos(3), Some(k(7)), false, 4)
            .unwrap();
        // transaction 4 is outside the second chunk's G (1-3) and b's: b's chunk is its
        // table's head and goes first; a's second cannot (its head waits for 5) and is
        // dropped with the third
        let released = s.take_before(&gtid(4), true).unwrap();
        assert_eq!((released.table, released.payload), (b, 4));
        assert_eq!(s.dropped(), 2);
        assert!(s.has_pending());
        assert_eq!(s.take_ready(&pos(5)).unwrap().payload, 1);
        assert!(!s.has_pending());
        // a's range continues at the first chunk's end: the dropped ones are read again
        s.chunk_read(a, Some(&k(10)), pos(6), Some(k(20)), false, 5)
            .unwrap();
    }

    #[test]
    fn without_release_a_chunk_due_before_the_transaction_is_dropped() {
        let a = TableId::new("s", "a");
        let mut s = session(&["a"]);
        s.chunk_read(a, None, pos(3), Some(k(10)), false, 1)
            .unwrap();
        assert!(s.take_before(&gtid(4), false).is_none());
        assert_eq!(s.dropped(), 1);
        assert!(!s.has_pending());
        assert!(s
            .gate()
            .cursor(&TableId::new("s", "a"))
            .unwrap()
            .pk_cursor
            .is_none());
    }

    #[test]
    fn misuse_is_refused() {
        let a = TableId::new("s", "a");
        let mut s = session(&["a"]);
        assert_eq!(
            s.chunk_read(a.clone(), Some(&k(1)), pos(1), Some(k(10)), false, 1),
            Err(SessionError::NotContiguous)
        );
        s.chunk_read(a.clone(), None, pos(1), Some(k(10)), false, 1)
            .unwrap();
        assert_eq!(
            s.chunk_read(a.clone(), Some(&k(10)), pos(1), Some(k(10)), false, 2),
            Err(SessionError::CursorNotAdvanced)
        );
        assert_eq!(
            s.chunk_read(a.clone(), Some(&k(10)), pos(1), None, false, 2),
            Err(SessionError::CursorNotAdvanced)
        );
        s.chunk_read(a.clone(), Some(&k(10)), pos(1), None, true, 2)
            .unwrap();
        assert_eq!(
            s.chunk_read(a.clone(), Some(&k(10)), pos(1), None, true, 3),
            Err(SessionError::NotNextTable)
        );
        assert_eq!(
            s.chunk_read(TableId::new("s", "x"), None, pos(1), None, true, 3),
            Err(SessionError::NotNextTable)
        );
    }
}
