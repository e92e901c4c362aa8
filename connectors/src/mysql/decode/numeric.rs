//! Integers, floating point and exact DECIMAL.
//!
//! DECIMAL's binary form (MySQL `decimal2bin`): the digits are split into groups of nine,
//! each stored big-endian in four bytes, with the leading and trailing partial groups in
//! the fewest bytes that hold them; the sign is the inverted top bit of the first byte, and a
//! negative value has every byte inverted. We render it straight to text so no precision is
//! lost on the way (DECIMAL(65,30) does not fit any machine number).

use capstan_core::change::Value;

use super::cursor::Cursor;
use crate::mysql::halt::Halt;

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const POW10: [u64; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// An integer of `width` bytes (1, 2, 3, 4 or 8), little-endian.
pub(crate) fn integer(cur: &mut Cursor<'_>, width: usize, unsigned: bool) -> Result<Value, Halt> {
    let raw = cur.le(width)?;
    if unsigned {
        return Ok(Value::UInt(raw));
    }
    let shift = 64 - 8 * width as u32;
    // sign-extend from `width` bytes
    Ok(Value::Int(((raw << shift) as i64) >> shift))
}

pub(crate) fn float(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    let raw = cur.le(4)? as u32;
    Ok(Value::Float(f32::from_bits(raw)))
}

pub(crate) fn double(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    Ok(Value::Double(f64::from_bits(cur.le(8)?)))
}

/// Size in bytes of a DECIMAL(precision, scale) value.
pub(crate) fn decimal_size(precision: usize, scale: usize) -> usize {
    let intg = precision - scale;
    (intg / 9) * 4 + DIG2BYTES[intg % 9] + (scale / 9) * 4 + DIG2BYTES[scale % 9]
}

/// The text of one DECIMAL, built on the stack: at most 65 digits, a sign, a point and a
/// leading zero fit.
struct DecimalText {
    buf: [u8; 72],
    len: usize,
}

impl DecimalText {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// Pushes `v` (below 10^9) as decimal digits, zero-padded to `width` digits.
    fn push_digits(&mut self, mut v: u64, width: usize) {
        let mut digits = [b'0'; 9];
        let mut i = digits.len();
        while v > 0 && i > 0 {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        let from = (digits.len() - width.min(digits.len())).min(i);
        let end = (self.len + digits.len() - from).min(self.buf.len());
        let n = end - self.len;
        self.buf[self.len..end].copy_from_slice(&digits[from..from + n]);
        self.len = end;
    }
}

/// Decodes DECIMAL(precision, scale) to its exact text, in one allocation.
pub(crate) fn decimal(cur: &mut Cursor<'_>, precision: u8, scale: u8) -> Result<Value, Halt> {
    let (p, s) = (usize::from(precision), usize::from(scale));
    if p == 0 || p > 65 || s > 30 || s > p {
        return Err(cur.fail("decimal precision or scale out of range"));
    }
    let size = decimal_size(p, s);
    let raw = cur.take(size)?;
    let Some(&first) = raw.first() else {
        return Err(cur.fail("empty decimal"));
    };
    let negative = first & 0x80 == 0;
    // a negative value has every byte inverted; the sign bit is inverted either way
    let mask = if negative { 0xff } else { 0 };
    let intg = p - s;
    if p <= 18 {
        return small_decimal(cur, raw, negative, intg, s);
    }
    let mut text = DecimalText {
        buf: [0; 72],
        len: 0,
    };
    if negative {
        text.push(b'-');
    }
    let sign_len = text.len;
    let mut nonzero = false;
    let mut pos = 0usize;
    let mut group = |digits_in_group: usize| -> Result<u64, Halt> {
        let n = if digits_in_group == 9 {
            4
        } else {
            DIG2BYTES[digits_in_group]
        };
        let bytes = raw
            .get(pos..pos + n)
            .ok_or_else(|| cur.fail("decimal truncated"))?;
        let mut v = bytes
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b ^ mask));
        if pos == 0 && n > 0 {
            // the sign bit is the top bit of the first byte
            v ^= 0x80 << (8 * (n - 1));
        }
        if v >= POW10[digits_in_group] {
            return Err(cur.fail("decimal digit group out of range"));
        }
        pos += n;
        nonzero |= v != 0;
        Ok(v)
    };
    let int_digits = |text: &mut DecimalText, v: u64, width: usize| {
        if text.len > sign_len {
            text.push_digits(v, width);
        } else if v != 0 {
            // the first significant group: no leading zeros
            text.push_digits(v, 0);
        }
    };
    if intg % 9 > 0 {
        let v = group(intg % 9)?;
        int_digits(&mut text, v, intg % 9);
    }
    for _ in 0..intg / 9 {
        let v = group(9)?;
        int_digits(&mut text, v, 9);
    }
    if text.len == sign_len {
        text.push(b'0');
    }
    if s > 0 {
        text.push(b'.');
        for _ in 0..s / 9 {
            let v = group(9)?;
            text.push_digits(v, 9);
        }
        if s % 9 > 0 {
            let v = group(s % 9)?;
            text.push_digits(v, s % 9);
        }
    }
    // a negative zero prints without its sign
    let from = usize::from(negative && !nonzero);
    let digits = text.buf.get(from..text.len).unwrap_or_default();
    let text = std::str::from_utf8(digits).map_err(|_| cur.fail("decimal text"))?;
    Ok(Value::Decimal(text.to_string()))
}

/// DECIMAL(p, s) with p <= 18: the integer and fraction digits each fit a `u64`.
fn small_decimal(
    cur: &Cursor<'_>,
    raw: &[u8],
    negative: bool,
    intg: usize,
    scale: usize,
) -> Result<Value, Halt> {
    let mask = if negative { 0xff } else { 0 };
    let mut pos = 0usize;
    // the digit groups of `digits` digits (partial group first for the integer part, last
    // for the fraction), accumulated into one number
    let mut part = |digits: usize, leading_partial: bool| -> Result<u64, Halt> {
        let (full, partial) = (digits / 9, digits % 9);
        let mut acc = 0u64;
        let mut group = |width: usize| -> Result<(), Halt> {
            let n = if width == 9 { 4 } else { DIG2BYTES[width] };
            let bytes = raw
                .get(pos..pos + n)
                .ok_or_else(|| cur.fail("decimal truncated"))?;
            let mut v = bytes
                .iter()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b ^ mask));
            if pos == 0 && n > 0 {
                // the sign bit is the top bit of the first byte
                v ^= 0x80 << (8 * (n - 1));
            }
            if v >= POW10[width] {
                return Err(cur.fail("decimal digit group out of range"));
            }
            pos += n;
            acc = acc * POW10[width] + v;
            Ok(())
        };
        if leading_partial && partial > 0 {
            group(partial)?;
        }
        for _ in 0..full {
            group(9)?;
        }
        if !leading_partial && partial > 0 {
            group(partial)?;
        }
        Ok(acc)
    };
    let int = part(intg, true)?;
    let frac = part(scale, false)?;
    // sign, up to 18 integer digits, point, up to 18 fraction digits
    let mut buf = [0u8; 40];
    let mut len = 0usize;
    let mut push = |b: u8| {
        if let Some(slot) = buf.get_mut(len) {
            *slot = b;
            len += 1;
        }
    };
    if negative && (int != 0 || frac != 0) {
        push(b'-');
    }
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    let mut v = int;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    digits[i..].iter().for_each(|&d| push(d));
    if scale > 0 {
        push(b'.');
        let mut v = frac;
        let mut f = [b'0'; 20];
        for slot in f[..scale].iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
        f[..scale].iter().for_each(|&d| push(d));
    }
    let text = std::str::from_utf8(buf.get(..len).unwrap_or_default())
        .map_err(|_| cur.fail("decimal text"))?;
    Ok(Value::Decimal(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::decode::cursor::be;
    use crate::mysql::test_support::{go_mysql_vectors, hex};
    use proptest::prelude::*;
    use std::fmt::Write;

    /// The previous implementation (per-group `write!` into intermediate strings), kept as
    /// the reference the one-allocation version must match on any input.
    fn decimal_reference(cur: &mut Cursor<'_>, precision: u8, scale: u8) -> Result<Value, Halt> {
        let (p, s) = (usize::from(precision), usize::from(scale));
        if p == 0 || p > 65 || s > 30 || s > p {
            return Err(cur.fail("decimal precision or scale out of range"));
        }
        let size = decimal_size(p, s);
        let mut b = cur.take(size)?.to_vec();
        let first = b.first_mut().unwrap();
        let negative = *first & 0x80 == 0;
        *first ^= 0x80;
        if negative {
            b.iter_mut().for_each(|x| *x = !*x);
        }
        let intg = p - s;
        let mut digits = String::new();
        let mut pos = 0usize;
        let mut group = |n_digits: usize, digits: &mut String| -> Result<(), Halt> {
            let n = if n_digits == 9 {
                4
            } else {
                DIG2BYTES[n_digits]
            };
            let v = be(&b[pos..pos + n]);
            if v >= POW10[n_digits] {
                return Err(cur.fail("decimal digit group out of range"));
            }
            pos += n;
            let _ = write!(digits, "{v:0width$}", width = n_digits);
            Ok(())
        };
        if intg % 9 > 0 {
            group(intg % 9, &mut digits)?;
        }
        for _ in 0..intg / 9 {
            group(9, &mut digits)?;
        }
        let int_part = digits.trim_start_matches('0').to_string();
        let mut frac = String::new();
        for _ in 0..s / 9 {
            group(9, &mut frac)?;
        }
        if s % 9 > 0 {
            group(s % 9, &mut frac)?;
        }
        let zero = int_part.is_empty() && frac.bytes().all(|c| c == b'0');
        let mut text = String::new();
        if negative && !zero {
            text.push('-');
        }
        text.push_str(if int_part.is_empty() { "0" } else { &int_part });
        if s > 0 {
            text.push('.');
            text.push_str(&frac);
        }
        Ok(Value::Decimal(text))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        #[test]
        fn decimal_matches_reference(
            p in 1u8..=65,
            s_frac in 0u8..=30,
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
            small in any::<bool>(),
        ) {
            let s = s_frac.min(p);
            // mostly in-range digit groups: squash bytes so groups stay below 10^n often
            let bytes: Vec<u8> = if small {
                bytes.iter().enumerate().map(|(i, &b)| if i == 0 { b } else { b & 0x0f }).collect()
            } else {
                bytes
            };
            let mut c1 = Cursor::new(&bytes);
            let mut c2 = Cursor::new(&bytes);
            let got = decimal(&mut c1, p, s);
            let want = decimal_reference(&mut c2, p, s);
            prop_assert_eq!(got, want);
            prop_assert_eq!(c1.remaining(), c2.remaining());
        }
    }

    #[test]
    fn integers_sign_extend_and_unsigned_is_exact() {
        let b = [0xff, 0xff, 0xff];
        assert_eq!(
            integer(&mut Cursor::new(&b), 3, false).unwrap(),
            Value::Int(-1)
        );
        assert_eq!(
            integer(&mut Cursor::new(&b), 3, true).unwrap(),
            Value::UInt(0xff_ffff)
        );
        let b = u64::MAX.to_le_bytes();
        assert_eq!(
            integer(&mut Cursor::new(&b), 8, true).unwrap(),
            Value::UInt(18446744073709551615)
        );
        assert_eq!(
            integer(&mut Cursor::new(&b), 8, false).unwrap(),
            Value::Int(-1)
        );
        let b = [0x80];
        assert_eq!(
            integer(&mut Cursor::new(&b), 1, false).unwrap(),
            Value::Int(-128)
        );
        assert!(integer(&mut Cursor::new(&b[..0]), 1, false).is_err());
    }

    #[test]
    fn decimal_known_values() {
        // DECIMAL(10,4) 3.0000 and -10.55 as DECIMAL(4,2)
        let cases = [("75c8", 4u8, 2u8, "-10.55"), ("7ffff4", 5, 0, "-11")];
        for (h, p, s, want) in cases {
            let b = hex(h);
            assert_eq!(
                decimal(&mut Cursor::new(&b), p, s).unwrap(),
                Value::Decimal(want.into())
            );
        }
    }

    #[test]
    fn go_mysql_decimal_vectors() {
        let Some(v) = go_mysql_vectors() else {
            return;
        };
        let cases = v["decimal_vectors"]["cases"].as_array().unwrap();
        assert!(!cases.is_empty());
        for c in cases {
            let b = hex(c["hex"].as_str().unwrap());
            let p = c["precision"].as_u64().unwrap() as u8;
            let s = c["scale"].as_u64().unwrap() as u8;
            let mut cur = Cursor::new(&b);
            let got = decimal(&mut cur, p, s).unwrap();
            assert_eq!(
                got,
                Value::Decimal(c["expect"].as_str().unwrap().into()),
                "{c}"
            );
            let consumed = b.len() - cur.remaining();
            assert_eq!(
                consumed as u64,
                c["bytes_consumed"].as_u64().unwrap(),
                "{c}"
            );
        }
    }
}
