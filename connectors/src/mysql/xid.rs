//! XA transaction identifiers, reduced at once to a sha256 key.
//!
//! An XID (`formatID`, `gtrid`, `bqual`) is application data: it is hashed where it is read
//! and never kept, logged or shown. The key is the sha256 of a canonical encoding (the format
//! id as i64 little-endian, the gtrid length as u32 little-endian, the gtrid bytes, the bqual
//! bytes), so the same XID read from a binlog statement (`XA COMMIT X'…',X'…',1`) and from
//! `XA RECOVER` (format id, lengths, data) gives the same key.

use std::fmt;

use sha2::{Digest, Sha256};

/// The sha256 key of an XID. Debug shows nothing of it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct XidKey([u8; 32]);

impl fmt::Debug for XidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("XidKey(..)")
    }
}

impl XidKey {
    /// The key of an XID given as its parts.
    pub fn new(format_id: i64, gtrid: &[u8], bqual: &[u8]) -> XidKey {
        let mut h = Sha256::new();
        h.update(format_id.to_le_bytes());
        h.update((gtrid.len() as u64).to_le_bytes());
        h.update(gtrid);
        h.update(bqual);
        XidKey(h.finalize().into())
    }

    /// The key of an `XA RECOVER` row: `data` holds gtrid then bqual. `None` if the lengths do
    /// not fit the data.
    pub fn from_recover_row(
        format_id: i64,
        gtrid_length: usize,
        bqual_length: usize,
        data: &[u8],
    ) -> Option<XidKey> {
        let gtrid = data.get(..gtrid_length)?;
        let end = gtrid_length.checked_add(bqual_length)?;
        let bqual = data.get(gtrid_length..end)?;
        Some(XidKey::new(format_id, gtrid, bqual))
    }

    /// The key of the XID that follows the two XA keywords of a binlog statement (`XA START`,
    /// `XA END`, `XA COMMIT`, `XA ROLLBACK`). MySQL writes it as `X'hex',X'hex',formatID`;
    /// quoted strings (`'gtrid'`) and an omitted bqual / format id (default 1) are accepted
    /// too. Trailing words (`ONE PHASE`, `SUSPEND`) are ignored. `None` if unparsable.
    pub fn from_statement(statement: &str) -> Option<XidKey> {
        let mut p = Parser {
            s: statement.as_bytes(),
            i: 0,
        };
        p.keyword()?; // XA
        p.keyword()?; // START / COMMIT / ...
        let gtrid = p.string()?;
        let mut bqual = Vec::new();
        let mut format_id = 1i64;
        if p.comma() {
            bqual = p.string()?;
            if p.comma() {
                format_id = p.number()?;
            }
        }
        Some(XidKey::new(format_id, &gtrid, &bqual))
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn keyword(&mut self) -> Option<()> {
        self.skip_ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_alphabetic()) {
            self.i += 1;
        }
        (self.i > start).then_some(())
    }

    fn comma(&mut self) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&b',') {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        self.skip_ws();
        let hex = matches!(self.s.get(self.i), Some(b'X' | b'x'));
        if hex {
            self.i += 1;
        }
        let quote = *self.s.get(self.i)?;
        if quote != b'\'' && quote != b'"' {
            return None;
        }
        self.i += 1;
        let mut raw = Vec::new();
        loop {
            let b = *self.s.get(self.i)?;
            self.i += 1;
            if b == quote {
                if self.s.get(self.i) == Some(&quote) {
                    self.i += 1;
                    raw.push(quote);
                    continue;
                }
                break;
            }
            if b == b'\\' && !hex {
                raw.push(*self.s.get(self.i)?);
                self.i += 1;
                continue;
            }
            raw.push(b);
        }
        if hex {
            unhex(&raw)
        } else {
            Some(raw)
        }
    }

    fn number(&mut self) -> Option<i64> {
        self.skip_ws();
        let start = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        std::str::from_utf8(self.s.get(start..self.i)?)
            .ok()?
            .parse()
            .ok()
    }
}

fn unhex(digits: &[u8]) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let hi = (pair.first()?).to_ascii_lowercase();
            let lo = (pair.get(1)?).to_ascii_lowercase();
            Some(nibble(hi)? << 4 | nibble(lo)?)
        })
        .collect()
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::XidKey;

    #[test]
    fn statement_and_recover_row_agree() {
        let from_recover = XidKey::from_recover_row(1, 2, 1, b"abc").unwrap();
        assert_eq!(
            XidKey::from_statement("XA COMMIT X'6162',X'63',1"),
            Some(from_recover)
        );
        assert_eq!(
            XidKey::from_statement("XA START 'ab','c'"),
            Some(from_recover)
        );
        assert_eq!(
            XidKey::from_statement("xa rollback x'6162' , x'63' , 1"),
            Some(from_recover)
        );
        assert_ne!(
            XidKey::from_statement("XA COMMIT X'6162',X'63',2"),
            Some(from_recover)
        );
        // the gtrid/bqual split matters
        assert_ne!(
            XidKey::from_statement("XA COMMIT X'61',X'6263',1"),
            Some(from_recover)
        );
        assert_eq!(
            XidKey::from_statement("XA COMMIT X'6162',X'',1"),
            XidKey::from_statement("XA COMMIT 'ab'")
        );
    }

    #[test]
    fn garbage_is_refused_and_debug_is_opaque() {
        assert_eq!(XidKey::from_statement("XA COMMIT"), None);
        assert_eq!(XidKey::from_statement("XA COMMIT X'6'"), None);
        assert_eq!(XidKey::from_statement("XA COMMIT X'zz'"), None);
        assert_eq!(XidKey::from_statement("XA COMMIT 'open"), None);
        assert_eq!(XidKey::from_recover_row(1, 5, 0, b"abc"), None);
        let k = XidKey::new(1, b"secret-xid", b"");
        assert_eq!(format!("{k:?}"), "XidKey(..)");
    }
}
