//! XA transaction identifiers, reduced at once to a sha256 key.
//!
//! An XID (`formatID`, `gtrid`, `bqual`) is application data: it is hashed where it is read
//! and never kept, logged or shown. The key is the sha256 of a canonical encoding (the format
//! id as i64 little-endian, the gtrid length as u32 little-endian, the gtrid bytes, the bqual
//! bytes), so the same XID read from a binlog statement (`XA COMMIT X'…',X'…',1`) and from
//! `XA RECOVER` (format id, lengths, data) gives the same key.

use std::fmt;

use sha2::{Digest, Sha256};

/// Largest gtrid, and largest bqual, in bytes (the XA specification's MAXGTRIDSIZE and
/// MAXBQUALSIZE; both servers refuse longer ones).
const MAX_PART: usize = 64;

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

    /// The key of an XID in a binlog event's binary form: `format_id` as the four bytes the
    /// server wrote (a signed 32-bit value, as statements and `XA RECOVER` show it) and `data`
    /// holding exactly gtrid then bqual. `None` if a part is longer than 64 bytes or `data`
    /// is not exactly both.
    pub(crate) fn from_event_parts(
        format_id: [u8; 4],
        gtrid_length: usize,
        bqual_length: usize,
        data: &[u8],
    ) -> Option<XidKey> {
        if gtrid_length > MAX_PART
            || bqual_length > MAX_PART
            || data.len() != gtrid_length + bqual_length
        {
            return None;
        }
        let format_id = i64::from(i32::from_le_bytes(format_id));
        XidKey::from_recover_row(format_id, gtrid_length, bqual_length, data)
    }

    /// The body of an XA_PREPARE event (type 38, the same on both servers): `one_phase u8,
    /// format_id i32, gtrid_length u32, bqual_length u32`, then gtrid and bqual and nothing
    /// else. Returns the one-phase flag and the XID's key; `None` if malformed.
    pub(crate) fn from_xa_prepare_event(body: &[u8]) -> Option<(bool, XidKey)> {
        let (&one_phase, rest) = body.split_first()?;
        let format_id: [u8; 4] = rest.get(..4)?.try_into().ok()?;
        let len = |at: usize| -> Option<usize> {
            let b: [u8; 4] = rest.get(at..at + 4)?.try_into().ok()?;
            usize::try_from(u32::from_le_bytes(b)).ok()
        };
        let (gtrid_length, bqual_length) = (len(4)?, len(8)?);
        let key = XidKey::from_event_parts(format_id, gtrid_length, bqual_length, rest.get(12..)?)?;
        Some((one_phase != 0, key))
    }

    /// The key of an `XA RECOVER FORMAT='SQL'` row (MariaDB): `data` is the XID as a statement
    /// names it (`'gtrid'` for a printable gtrid with the default bqual and format id, else
    /// `X'…',X'…',formatID`); its parts must agree with the row's other columns. `None`
    /// otherwise.
    pub fn from_recover_sql(
        format_id: i64,
        gtrid_length: usize,
        bqual_length: usize,
        data: &str,
    ) -> Option<XidKey> {
        let mut p = Parser {
            s: data.as_bytes(),
            i: 0,
        };
        let (parsed_format_id, gtrid, bqual) = p.xid()?;
        p.skip_ws();
        let agrees = p.i == p.s.len()
            && parsed_format_id == format_id
            && gtrid.len() == gtrid_length
            && bqual.len() == bqual_length
            && gtrid_length <= MAX_PART
            && bqual_length <= MAX_PART;
        agrees.then(|| XidKey::new(format_id, &gtrid, &bqual))
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
        let (format_id, gtrid, bqual) = p.xid()?;
        Some(XidKey::new(format_id, &gtrid, &bqual))
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    /// `gtrid [, bqual [, formatID]]`: (format id, gtrid, bqual), the omitted parts defaulted.
    fn xid(&mut self) -> Option<(i64, Vec<u8>, Vec<u8>)> {
        let gtrid = self.string()?;
        let mut bqual = Vec::new();
        let mut format_id = 1i64;
        if self.comma() {
            bqual = self.string()?;
            if self.comma() {
                format_id = self.number()?;
            }
        }
        Some((format_id, gtrid, bqual))
    }

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
    fn event_parts_agree_with_statements_and_refuse_malformed_bytes() {
        // MariaDB 10.11, XA PREPARE 'ab','c',7: the type-38 event body as the server wrote it
        let body = super::super::test_support::hex("00070000000200000001000000616263");
        let (one_phase, key) = XidKey::from_xa_prepare_event(&body).unwrap();
        assert!(!one_phase);
        assert_eq!(
            XidKey::from_statement("XA COMMIT X'6162',X'63',7"),
            Some(key)
        );
        assert_eq!(
            XidKey::from_event_parts(7i32.to_le_bytes(), 2, 1, b"abc"),
            Some(key)
        );
        // a negative format id reads as the statement prints it
        assert_eq!(
            XidKey::from_event_parts((-5i32).to_le_bytes(), 1, 0, b"a"),
            XidKey::from_statement("XA COMMIT X'61',X'',-5")
        );
        // every truncation, a trailing byte, lengths past 64 or past the data: refused
        for n in 0..body.len() {
            assert_eq!(XidKey::from_xa_prepare_event(&body[..n]), None, "{n}");
        }
        let mut long = body.clone();
        long.push(0);
        assert_eq!(XidKey::from_xa_prepare_event(&long), None);
        let mut huge = body.clone();
        huge[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(XidKey::from_xa_prepare_event(&huge), None);
        assert_eq!(
            XidKey::from_event_parts([1, 0, 0, 0], 65, 0, &[0; 65]),
            None
        );
        assert_eq!(
            XidKey::from_event_parts([1, 0, 0, 0], 1, 65, &[0; 66]),
            None
        );
    }

    #[test]
    fn recover_sql_rows_key_like_statements() {
        assert_eq!(
            XidKey::from_recover_sql(1, 3, 0, "'rec'"),
            XidKey::from_statement("XA COMMIT X'726563',X'',1")
        );
        assert_eq!(
            XidKey::from_recover_sql(9, 3, 1, "X'00ff27',X'0a',9"),
            XidKey::from_statement("XA ROLLBACK X'00ff27',X'0a',9")
        );
        // the columns must agree with the data
        assert_eq!(XidKey::from_recover_sql(2, 3, 1, "X'00ff27',X'0a',9"), None);
        assert_eq!(XidKey::from_recover_sql(9, 2, 1, "X'00ff27',X'0a',9"), None);
        assert_eq!(
            XidKey::from_recover_sql(9, 3, 1, "X'00ff27',X'0a',9 x"),
            None
        );
        assert_eq!(XidKey::from_recover_sql(1, 3, 0, "rec"), None);
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
