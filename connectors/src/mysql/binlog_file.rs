//! Walks the events of a binlog *file* image (magic header, then events back to back): a
//! test and tooling aid, also the shape the fixture suite uses.

use super::event::Event;
use super::event_reader::{frame_len, EventReader, HEADER_LEN};
use super::halt::Halt;

/// The 4-byte magic at the start of every binlog file.
pub const BINLOG_MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];

/// An iterator over the events of a binlog file held in memory.
///
/// Yields one `Result` per event. A per-event decode failure (bad body, checksum mismatch)
/// is yielded and the walk continues, since the framing is intact; a framing failure
/// (truncated header or body, bad magic) is yielded once and ends the walk.
#[derive(Debug)]
pub struct BinlogFileEvents<'a> {
    reader: EventReader,
    rest: &'a [u8],
    offset: usize,
    bad_magic: bool,
    done: bool,
}

impl<'a> BinlogFileEvents<'a> {
    /// Starts a walk over `bytes` (which must begin with the binlog magic).
    pub fn new(bytes: &'a [u8]) -> Self {
        let rest = bytes.strip_prefix(&BINLOG_MAGIC[..]);
        BinlogFileEvents {
            reader: EventReader::new(),
            rest: rest.unwrap_or(&[]),
            offset: BINLOG_MAGIC.len(),
            bad_magic: rest.is_none(),
            done: false,
        }
    }

    /// Byte offset in the file of the next event.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The reader (flavour, checksum state).
    pub fn reader(&self) -> &EventReader {
        &self.reader
    }
}

impl Iterator for BinlogFileEvents<'_> {
    type Item = Result<Event, Halt>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.bad_magic {
            self.done = true;
            return Some(Err(Halt::parse(0, "not a binlog file")));
        }
        if self.rest.is_empty() {
            self.done = true;
            return None;
        }
        let Some(len) = frame_len(self.rest) else {
            self.done = true;
            let reason = if self.rest.len() < HEADER_LEN {
                "truncated event header"
            } else {
                "truncated event"
            };
            return Some(Err(Halt::parse(0, reason)));
        };
        let (one, rest) = self.rest.split_at(len);
        self.rest = rest;
        self.offset = self.offset.saturating_add(len);
        Some(self.reader.decode(one))
    }
}
