//! [`AheadSlot`]: a rows event decoded ahead, on the stream's reader task.
//!
//! The live source reads the socket on one task and assembles and decodes on the caller's,
//! and the decoding side is the slower one (about 2.5× the reader's CPU on the benchmark's
//! ten-column rows). When the caller falls behind — the reader's channel is full — the reader
//! task, which would otherwise only wait, decodes the rows events of the batch it holds, so
//! row decoding spreads over both cores by itself (`stream_reader`).
//!
//! The result rides in the event with the table map it was decoded against and the decode
//! options. The assembler takes it only for that very table map (`Arc` identity: the one it
//! holds for the event's table id) and the same options, and otherwise decodes the event
//! itself. Both sides walk the event with the same function, [`decode_full_rows`], and
//! [`RowsAhead::replay`] hands the rows to the assembler exactly as that walk would — the
//! same rows, in order, and the same halt in the same precedence (a decode failure anywhere
//! in the event, else the first failure in row order) — so a decoded-ahead event yields
//! exactly what the assembler's own decode would.

use std::fmt;
use std::sync::Arc;

use capstan_core::change::Value;

use super::{decode_full_rows, DecodeOptions};
use crate::mysql::event::RowsEvent;
use crate::mysql::halt::Halt;
use crate::mysql::table_schema::TableSchema;

/// One decoded row: the before and after images (full).
type FullRow = (Option<Vec<Value>>, Option<Vec<Value>>);

/// How the walk of an event ended.
#[derive(Debug)]
enum End {
    /// Every row decoded and full.
    Complete,
    /// The row after the collected ones has a partial image (`partial_row_image`).
    Partial,
    /// The event failed to decode (this halt wins over any per-row failure).
    Failed(Halt),
}

/// The rows of an event decoded ahead: every row up to the first partial one, and how the
/// walk ended.
#[derive(Debug)]
pub struct RowsAhead {
    rows: Vec<FullRow>,
    end: End,
}

impl RowsAhead {
    /// Walks `event` against `schema` as the assembler would.
    fn decode(schema: &TableSchema, event: &RowsEvent, opts: &DecodeOptions) -> Self {
        let mut rows = Vec::new();
        let walk = decode_full_rows(schema, event, opts, |before, after| {
            rows.push((before, after));
            Ok(())
        });
        let end = match walk {
            Ok(()) => End::Complete,
            Err(Halt::PartialRowImage) => End::Partial,
            Err(halt) => End::Failed(halt),
        };
        RowsAhead { rows, end }
    }

    /// Hands the rows to `row` as [`decode_full_rows`] would: in order until `row` fails;
    /// then a decode failure, else the first of `row`'s failure and a partial image.
    pub fn replay(
        self,
        mut row: impl FnMut(Option<Vec<Value>>, Option<Vec<Value>>) -> Result<(), Halt>,
    ) -> Result<(), Halt> {
        let mut pending = Ok(());
        for (before, after) in self.rows {
            pending = row(before, after);
            if pending.is_err() {
                break;
            }
        }
        match self.end {
            End::Failed(halt) => Err(halt),
            End::Partial => pending.and(Err(Halt::PartialRowImage)),
            End::Complete => pending,
        }
    }
}

struct Ahead {
    schema: Arc<TableSchema>,
    opts: DecodeOptions,
    rows: RowsAhead,
}

/// A rows event's decoded-ahead rows, if any. A cache, not part of the event: it compares
/// equal to any other slot, a clone is empty, and `Debug` says only whether it is filled.
#[derive(Default)]
pub struct AheadSlot(Option<Box<Ahead>>);

impl AheadSlot {
    /// Decodes `event` against `schema` with `opts` into a filled slot.
    pub fn fill(event: &RowsEvent, schema: Arc<TableSchema>, opts: DecodeOptions) -> Self {
        let rows = RowsAhead::decode(&schema, event, &opts);
        AheadSlot(Some(Box::new(Ahead { schema, opts, rows })))
    }

    /// True when decoded rows are held.
    pub fn is_filled(&self) -> bool {
        self.0.is_some()
    }

    /// The decoded rows, if they were decoded against exactly `schema` with `opts` (the slot
    /// is emptied either way).
    pub fn take_for(
        &mut self,
        schema: &Arc<TableSchema>,
        opts: &DecodeOptions,
    ) -> Option<RowsAhead> {
        let ahead = self.0.take()?;
        (Arc::ptr_eq(&ahead.schema, schema) && ahead.opts == *opts).then_some(ahead.rows)
    }
}

impl Clone for AheadSlot {
    fn clone(&self) -> Self {
        AheadSlot(None)
    }
}

impl PartialEq for AheadSlot {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for AheadSlot {}

impl fmt::Debug for AheadSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AheadSlot(filled: {})", self.is_filled())
    }
}
