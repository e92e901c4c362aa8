//! A bounds-checked reader over a row image; every short read is a value-free halt naming
//! the column being decoded.

use crate::mysql::halt::Halt;

/// Reads a row image front to back.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    /// The column being decoded (for error messages).
    pub(crate) column: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, column: 0 }
    }

    #[cfg(test)]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn fail(&self, reason: &'static str) -> Halt {
        Halt::RowDecodeFailed {
            column: self.column,
            reason,
        }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Halt> {
        if n > self.buf.len() {
            return Err(self.fail("row image truncated"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Halt> {
        Ok(self.take(1)?[0])
    }

    /// Little-endian unsigned integer of `n` (1..=8) bytes.
    pub(crate) fn le(&mut self, n: usize) -> Result<u64, Halt> {
        Ok(self
            .take(n)?
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// Big-endian unsigned integer of `n` (1..=8) bytes.
    pub(crate) fn be(&mut self, n: usize) -> Result<u64, Halt> {
        Ok(be(self.take(n)?))
    }
}

/// Big-endian unsigned integer of up to 8 bytes.
pub(crate) fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}
