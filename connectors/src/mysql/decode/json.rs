//! MySQL binary JSON → JSON text in one pass, without an intermediate tree.
//!
//! The format (MySQL `json_binary`): a type byte, then the value. Objects and arrays come in
//! a small (16-bit offsets) and a large (32-bit offsets) form: element count, byte size, then
//! for objects one key entry per member (key offset, 16-bit key length), then one value entry
//! per element (type byte and either an offset relative to the container start or, for
//! literals and 16-bit integers — and 32-bit integers in the large form — the value inlined).
//! Strings are a variable-length size (7 bits a byte, low group first) and UTF-8 bytes;
//! doubles and integers are little-endian. Offsets point into the container itself.
//!
//! The text is exactly what the previous path (mysql_common's `JsonDom` →
//! `serde_json::Value` → `to_string`) produced: members sorted by key bytes, serde_json's
//! string escaping and float formatting, non-finite doubles as `0`. Anything this writer does
//! not render itself — opaque values (DECIMAL, temporal, other MySQL types), keys that are not
//! UTF-8, duplicate keys, malformed input, nesting deeper than [`MAX_DEPTH`] — returns `None`,
//! and the caller falls back to that previous path, which decides. So the fast path only ever
//! produces text for documents the previous path would have rendered identically.

use mysql_common::binlog::jsonb;
use mysql_common::io::ParseBuf;

/// Nesting deeper than this goes to the fallback path (MySQL itself caps depth at 100).
pub(crate) const MAX_DEPTH: usize = 150;

const SMALL_OBJECT: u8 = 0x0;
const LARGE_OBJECT: u8 = 0x1;
const SMALL_ARRAY: u8 = 0x2;
const LARGE_ARRAY: u8 = 0x3;
const LITERAL: u8 = 0x4;
const INT16: u8 = 0x5;
const UINT16: u8 = 0x6;
const INT32: u8 = 0x7;
const UINT32: u8 = 0x8;
const INT64: u8 = 0x9;
const UINT64: u8 = 0xA;
const DOUBLE: u8 = 0xB;
const STRING: u8 = 0xC;

/// The JSON text of a non-empty binary JSON document, or `None` when the fallback path must
/// decide.
///
/// The text is built as bytes and checked to be UTF-8 once, at the end: strings and keys are
/// copied as they are stored, and everything the writer adds itself is ASCII (escaping only
/// replaces ASCII bytes by ASCII bytes, and every string is quoted), so the whole text is
/// UTF-8 exactly when every string and key of the document is, which is when the previous
/// path accepted it.
pub(crate) fn json_text(doc: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(doc.len() + doc.len() / 2 + 8);
    write_json_bytes(doc, &mut out)?;
    String::from_utf8(out).ok()
}

/// Writes the JSON text of a non-empty binary JSON document to `out` as bytes (UTF-8 only
/// if the document's strings are: see [`json_text`]), or returns `None` (with `out` in an
/// unspecified state) when the fallback path must decide.
fn write_json_bytes(doc: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let (&ty, rest) = doc.split_first()?;
    Writer { out }.value(ty, rest, 0)
}

/// Objects with at most this many members sort them on the stack; larger ones in a
/// vector of their own.
const STACK_MEMBERS: usize = 16;

/// An object member for sorting: (key offset, key length, member index).
type Member = (u32, u32, u32);

struct Writer<'o> {
    out: &'o mut Vec<u8>,
}

fn le(bytes: &[u8], at: usize, n: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(n)?)?;
    Some(
        b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
    )
}

impl Writer<'_> {
    /// A value of type `ty` whose bytes start at `buf[0]` (and may run to its end).
    fn value(&mut self, ty: u8, buf: &[u8], depth: usize) -> Option<()> {
        match ty {
            SMALL_OBJECT => self.container(buf, false, true, depth),
            LARGE_OBJECT => self.container(buf, true, true, depth),
            SMALL_ARRAY => self.container(buf, false, false, depth),
            LARGE_ARRAY => self.container(buf, true, false, depth),
            _ => self.scalar(ty, buf),
        }
    }

    fn scalar(&mut self, ty: u8, buf: &[u8]) -> Option<()> {
        match ty {
            LITERAL => match buf.first()? {
                0 => self.out.extend_from_slice(b"null"),
                1 => self.out.extend_from_slice(b"true"),
                2 => self.out.extend_from_slice(b"false"),
                _ => return None,
            },
            INT16 => write_int(self.out, i64::from(le(buf, 0, 2)? as u16 as i16)),
            UINT16 => write_uint(self.out, le(buf, 0, 2)?),
            INT32 => write_int(self.out, i64::from(le(buf, 0, 4)? as u32 as i32)),
            UINT32 => write_uint(self.out, le(buf, 0, 4)?),
            INT64 => write_int(self.out, le(buf, 0, 8)? as i64),
            UINT64 => write_uint(self.out, le(buf, 0, 8)?),
            DOUBLE => write_double(self.out, f64::from_bits(le(buf, 0, 8)?))?,
            STRING => {
                let (len, used) = varlen(buf)?;
                let bytes = buf.get(used..used.checked_add(len)?)?;
                write_escaped(self.out, bytes);
            }
            // opaque and unknown types: the fallback decides
            _ => return None,
        }
        Some(())
    }

    fn container(&mut self, buf: &[u8], large: bool, object: bool, depth: usize) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        let os = if large { 4 } else { 2 };
        let count = usize::try_from(le(buf, 0, os)?).ok()?;
        let size = usize::try_from(le(buf, os, os)?).ok()?;
        let data = buf.get(..size)?;
        let key_entry = os + 2;
        let value_entry = os + 1;
        let keys_len = if object {
            count.checked_mul(key_entry)?
        } else {
            0
        };
        let values_at = (2 * os).checked_add(keys_len)?;
        let header = values_at.checked_add(count.checked_mul(value_entry)?)?;
        if header > size {
            return None;
        }
        if !object {
            self.out.push(b'[');
            for i in 0..count {
                if i > 0 {
                    self.out.push(b',');
                }
                self.element(data, values_at + i * value_entry, large, header, depth)?;
            }
            self.out.push(b']');
            return Some(());
        }
        // (the header fits `size`, so `count` is bounded by the document's length)
        let mut stack = [(0u32, 0u32, 0u32); STACK_MEMBERS];
        let mut heap = Vec::new();
        let members: &mut [Member] = if count <= STACK_MEMBERS {
            stack.get_mut(..count)?
        } else {
            heap.resize(count, (0, 0, 0));
            &mut heap
        };
        for (i, m) in members.iter_mut().enumerate() {
            let at = 2 * os + i * key_entry;
            let offset = usize::try_from(le(data, at, os)?).ok()?;
            let len = usize::try_from(le(data, at + os, 2)?).ok()?;
            if offset < header || offset.checked_add(len)? > size {
                return None;
            }
            *m = (offset as u32, len as u32, i as u32);
        }
        let key = |k: &Member| {
            let (o, l) = (k.0 as usize, k.1 as usize);
            data.get(o..o + l).unwrap_or_default()
        };
        // MySQL stores members sorted by key length first, which is often byte order too:
        // strictly increasing keys need no sort and hold no duplicate.
        if !members.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
            members.sort_unstable_by(|a, b| key(a).cmp(key(b)));
            if members.windows(2).any(|w| key(&w[0]) == key(&w[1])) {
                return None;
            }
        }
        self.out.push(b'{');
        for (j, k) in members.iter().enumerate() {
            if j > 0 {
                self.out.push(b',');
            }
            write_escaped(self.out, key(k));
            self.out.push(b':');
            let entry = values_at + k.2 as usize * value_entry;
            self.element(data, entry, large, header, depth)?;
        }
        self.out.push(b'}');
        Some(())
    }

    /// The element whose value entry is at `data[entry]`.
    fn element(
        &mut self,
        data: &[u8],
        entry: usize,
        large: bool,
        header: usize,
        depth: usize,
    ) -> Option<()> {
        let os = if large { 4 } else { 2 };
        let ty = *data.get(entry)?;
        let inlined =
            matches!(ty, LITERAL | INT16 | UINT16) || (large && matches!(ty, INT32 | UINT32));
        if inlined {
            return self.scalar(ty, data.get(entry + 1..entry + 1 + os)?);
        }
        let offset = usize::try_from(le(data, entry + 1, os)?).ok()?;
        if offset < header || offset > data.len() {
            return None;
        }
        self.value(ty, data.get(offset..)?, depth + 1)
    }
}

/// The variable-length string size: up to 5 bytes, 7 bits each, low group first.
fn varlen(buf: &[u8]) -> Option<(usize, usize)> {
    let mut len = 0u64;
    for i in 0..5 {
        let b = u64::from(*buf.get(i)?);
        len |= (b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if len > u64::from(u32::MAX) {
                return None;
            }
            return Some((usize::try_from(len).ok()?, i + 1));
        }
    }
    None
}

fn write_uint(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

fn write_int(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// serde_json's float text (so the output matches the previous path byte for byte); a
/// non-finite double is `0`, as the previous path rendered it.
fn write_double(out: &mut Vec<u8>, v: f64) -> Option<()> {
    if !v.is_finite() {
        out.push(b'0');
        return Some(());
    }
    serde_json::to_writer(&mut *out, &v).ok()
}

/// A JSON string literal with serde_json's escaping: `"` and `\`, the short forms of
/// backspace, form feed, newline, carriage return and tab, `\u00xx` (lower-case) for the
/// other control characters; every other byte as is (all of these are ASCII, so escaping a
/// UTF-8 string byte by byte is escaping it character by character).
fn write_escaped(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    if !s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        // the common case: nothing to escape
        out.extend_from_slice(s);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(s.get(start..i).unwrap_or_default());
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(s.get(start..).unwrap_or_default());
    out.push(b'"');
}

/// The previous path, kept as the fallback: mysql_common's binary JSON parser and DOM, then
/// serde_json's text. `None` if mysql_common rejects the document.
pub(crate) fn via_dom(doc: &[u8]) -> Option<String> {
    let parsed: jsonb::Value<'_> = ParseBuf(doc).parse(()).ok()?;
    let dom = parsed.parse().ok()?;
    Some(serde_json::Value::from(dom).to_string())
}

#[cfg(test)]
mod tests;
