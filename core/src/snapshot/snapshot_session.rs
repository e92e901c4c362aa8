//! The snapshot session: which table to read next, and when a chunk that was read at position
//! G may be published.
//!
//! The caller reads a chunk only while it has not processed any stream transaction beyond the
//! moment it asks (it pauses the stream during the read, so its processed position P ⊆ G).
//! It then keeps processing the stream and, after every transaction (and before the first),
//! asks [`SnapshotSession::take_ready`] with its processed position: the chunk comes out at
//! the first position that covers G — before any later transaction is gated — and the gate
//! advances. Before gating each transaction it also asks [`SnapshotSession::take_before`]:
//! a transaction outside G releases the chunk first (G may stay uncovered behind a pending XA
//! prepare). Every streamed change of the table up to G was suppressed (its key was beyond the
//! cursor) and is in the chunk; every later one is gated with the advanced cursor.

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
    /// The key of its last row (`None`: no rows).
    pub end: Option<SnapshotKey>,
    /// True when it is the table's last chunk.
    pub last: bool,
    /// What the caller attached (the rows).
    pub payload: C,
}

/// A misuse of the session (a caller bug, reported rather than guessed around).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SessionError {
    /// A chunk was offered while another one waits to be published.
    #[error("a chunk is already waiting to be published")]
    ChunkPending,
    /// A chunk was offered for a table that is not next.
    #[error("the chunk is not of the table being snapshotted")]
    NotNextTable,
    /// A chunk's last key is not beyond the table's cursor.
    #[error("the chunk does not advance the table's cursor")]
    CursorNotAdvanced,
}

/// The snapshot of a fixed, ordered set of tables, one chunk in flight at a time.
#[derive(Debug)]
pub struct SnapshotSession<C> {
    order: Vec<TableId>,
    gate: CursorGate,
    pending: Option<Pending<C>>,
}

impl<C> SnapshotSession<C> {
    /// A session over `order` (every table tracked by `gate`), tables read in that order.
    pub fn new(order: Vec<TableId>, gate: CursorGate) -> Self {
        SnapshotSession {
            order,
            gate,
            pending: None,
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

    /// The table to read a chunk of now: the first incomplete one, unless a chunk is waiting.
    pub fn next_table(&self) -> Option<&TableId> {
        if self.pending.is_some() {
            return None;
        }
        self.order.iter().find(|t| {
            self.gate
                .cursor(t)
                .is_some_and(|c| c.status != TableStatus::Complete)
        })
    }

    /// True while a chunk waits for its position to be processed.
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// True when every table is complete and nothing waits.
    pub fn is_complete(&self) -> bool {
        self.pending.is_none() && self.gate.is_complete()
    }

    /// Offers a chunk of the next table, read at `position`, whose last row has key `end`.
    pub fn chunk_read(
        &mut self,
        table: TableId,
        position: Position,
        end: Option<SnapshotKey>,
        last: bool,
        payload: C,
    ) -> Result<(), SessionError> {
        if self.pending.is_some() {
            return Err(SessionError::ChunkPending);
        }
        if self.next_table() != Some(&table) {
            return Err(SessionError::NotNextTable);
        }
        let cursor = self.gate.cursor(&table).and_then(|c| c.pk_cursor.as_ref());
        if let (Some(end), Some(cursor)) = (&end, cursor) {
            if end <= cursor {
                return Err(SessionError::CursorNotAdvanced);
            }
        }
        self.pending = Some(Pending {
            table,
            position,
            end,
            last,
            payload,
        });
        Ok(())
    }

    /// The waiting chunk, if `processed` covers its position; the gate advances past it.
    pub fn take_ready(&mut self, processed: &Position) -> Option<ReadyChunk<C>> {
        if !self
            .pending
            .as_ref()
            .is_some_and(|p| p.position.is_subset(processed))
        {
            return None;
        }
        self.take()
    }

    /// The waiting chunk, if `next`, the streamed transaction about to be gated, is not
    /// covered by its position; the gate advances past it, so `next` is gated with the
    /// chunk's cursor.
    ///
    /// The binlog holds G's transactions before any transaction outside G, so when one
    /// outside G comes, every transaction of G the stream will hand out has been gated. One
    /// it did not hand out is a pending XA prepare (pooled until it resolves, so `processed`
    /// never covers G while it waits): its rows are not in the chunk's view either, and its
    /// resolution, after G, is gated with the advanced cursor. Without this a chunk would
    /// wait for the prepare while later changes of its rows were suppressed — lost. Every
    /// transaction gated before the chunk is thus in G.
    pub fn take_before(&mut self, next: &TransactionGtid) -> Option<ReadyChunk<C>> {
        if self
            .pending
            .as_ref()
            .is_none_or(|p| next.is_covered_by(&p.position))
        {
            return None;
        }
        self.take()
    }

    fn take(&mut self) -> Option<ReadyChunk<C>> {
        let p = self.pending.take()?;
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
