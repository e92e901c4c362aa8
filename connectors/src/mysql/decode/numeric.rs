//! Integers, floating point and exact DECIMAL.
//!
//! DECIMAL's binary form (MySQL `decimal2bin`): the digits are split into groups of nine,
//! each stored big-endian in four bytes, with the leading and trailing partial groups in
//! the fewest bytes that hold them; the sign is the inverted top bit of the first byte, and a
//! negative value has every byte inverted. We render it straight to text so no precision is
//! lost on the way (DECIMAL(65,30) does not fit any machine number).

use std::fmt::Write;

use capstan_core::change::Value;

use super::cursor::{be, Cursor};
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

/// Decodes DECIMAL(precision, scale) to its exact text.
pub(crate) fn decimal(cur: &mut Cursor<'_>, precision: u8, scale: u8) -> Result<Value, Halt> {
    let (p, s) = (usize::from(precision), usize::from(scale));
    if p == 0 || p > 65 || s > 30 || s > p {
        return Err(cur.fail("decimal precision or scale out of range"));
    }
    let size = decimal_size(p, s);
    let mut b = cur.take(size)?.to_vec();
    let Some(first) = b.first_mut() else {
        return Err(cur.fail("empty decimal"));
    };
    let negative = *first & 0x80 == 0;
    *first ^= 0x80;
    if negative {
        b.iter_mut().for_each(|x| *x = !*x);
    }
    let intg = p - s;
    let mut digits = String::with_capacity(p + 2);
    let mut pos = 0usize;
    let mut group = |digits_in_group: usize, digits: &mut String| -> Result<(), Halt> {
        let n = if digits_in_group == 9 {
            4
        } else {
            DIG2BYTES[digits_in_group]
        };
        let v = be(b
            .get(pos..pos + n)
            .ok_or_else(|| cur.fail("decimal truncated"))?);
        if v >= POW10[digits_in_group] {
            return Err(cur.fail("decimal digit group out of range"));
        }
        pos += n;
        let _ = write!(digits, "{v:0width$}", width = digits_in_group);
        Ok(())
    };
    if intg % 9 > 0 {
        group(intg % 9, &mut digits)?;
    }
    for _ in 0..intg / 9 {
        group(9, &mut digits)?;
    }
    let int_part = digits.trim_start_matches('0');
    let mut text = String::with_capacity(p + 2);
    let mut frac = String::with_capacity(s);
    for _ in 0..s / 9 {
        group(9, &mut frac)?;
    }
    if s % 9 > 0 {
        group(s % 9, &mut frac)?;
    }
    let zero = int_part.is_empty() && frac.bytes().all(|c| c == b'0');
    if negative && !zero {
        text.push('-');
    }
    text.push_str(if int_part.is_empty() { "0" } else { int_part });
    if s > 0 {
        text.push('.');
        text.push_str(&frac);
    }
    Ok(Value::Decimal(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
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
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/testdata/external/go-mysql/vectors.json"
        );
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
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
