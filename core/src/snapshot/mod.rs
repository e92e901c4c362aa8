//! The pure half of the initial snapshot (ADR-0005): order-preserving key encoding, the cursor
//! gate that decides which streamed rows of a snapshot-active table are forwarded, and the
//! session that decides when a chunk read at position G may be published.
//!
//! Two authorities, never conflated: the stream alone advances the processed position; the
//! snapshot advances a per-table key cursor. A chunk contributes no GTIDs.
//!
//! The rules, per table being snapshotted:
//! - a streamed insert or update is forwarded iff its key ≤ `pk_cursor` (already backfilled)
//!   or the table is complete; otherwise it is suppressed — a later chunk delivers the row;
//! - a streamed delete is forwarded iff its key ≤ `delivered_pk` (the crash-window backstop:
//!   `delivered_pk` is made durable before a chunk is published, `pk_cursor` after);
//! - an update that changes the key is a delete of the old key and an upsert of the new one,
//!   each gated on its own key;
//! - a chunk read at G is published once G ⊆ the processed position, before the next streamed
//!   transaction is gated, or before the first streamed transaction outside G (a pending XA
//!   prepare keeps the processed position from covering G); then both cursors advance to the
//!   chunk's last key.

mod chunk_sizer;
mod cursor_gate;
#[cfg(test)]
mod proptests;
mod snapshot_key;
mod snapshot_session;

pub use chunk_sizer::{
    ChunkSizer, CHUNK_BYTE_BUDGET, FIRST_CHUNK_ROWS, MAX_ADAPTIVE_ROWS, MAX_GROWTH, MIN_CHUNK_ROWS,
    TARGET_CHUNK_TIME,
};
pub use cursor_gate::{CursorGate, RowKeys, TableCursor, TableStatus, Verdict};
pub use snapshot_key::{KeyComponent, SnapshotKey};
pub use snapshot_session::{ReadyChunk, SessionError, SnapshotSession};
