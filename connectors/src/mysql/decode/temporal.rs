//! DATE, TIME2, DATETIME2, TIMESTAMP2, YEAR, and (opt-in) the pre-5.6 TIME/DATETIME/TIMESTAMP.
//!
//! TIME2 is decoded here rather than by mysql_common: 0.37 (and 0.38) overflow on negative
//! TIME(1)/TIME(2) values (a panic in debug builds, `612:29:07.15997216` for `-12:34:56.78`
//! in release). The layout (MySQL `my_time_packed_from_binary`): a 3-byte big-endian integer
//! part offset by 0x800000, then `ceil(fsp/2)` fraction bytes. Negative values store the
//! fraction in reverse order for binary sorting, so a non-zero fraction of a negative value
//! borrows one from the integer part. fsp 5/6 store the whole packed value in 6 bytes offset
//! by 0x800000000000. The packed value is `(int_part << 24) + microseconds`, and the integer
//! part packs `hour << 12 | minute << 6 | second`.

use capstan_core::change::{Date, DateTime, Time, Value};

use super::cursor::Cursor;
use crate::mysql::halt::Halt;

fn check_fsp(cur: &Cursor<'_>, fsp: u8) -> Result<(), Halt> {
    if fsp > 6 {
        return Err(cur.fail("fractional second precision above 6"));
    }
    Ok(())
}

/// `DATE`: 3 bytes little-endian, `day | month << 5 | year << 9`.
pub(crate) fn date(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    let v = cur.le(3)?;
    Ok(Value::Date(Date {
        year: (v >> 9) as u16,
        month: ((v >> 5) & 15) as u8,
        day: (v & 31) as u8,
    }))
}

/// `YEAR`: one byte, offset from 1900; 0 is the zero year.
pub(crate) fn year(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    let v = cur.u8()?;
    Ok(Value::Year(if v == 0 { 0 } else { 1900 + u16::from(v) }))
}

/// TIME2 → packed value `(int_part << 24) + fraction_micros`.
pub(crate) fn time2_packed(cur: &mut Cursor<'_>, fsp: u8) -> Result<i64, Halt> {
    check_fsp(cur, fsp)?;
    const INT_OFS: i64 = 0x80_0000;
    const OFS: i64 = 0x8000_0000_0000;
    Ok(match fsp {
        0 => (cur.be(3)? as i64 - INT_OFS) << 24,
        1 | 2 => {
            let mut int_part = cur.be(3)? as i64 - INT_OFS;
            let mut frac = i64::from(cur.u8()?);
            if int_part < 0 && frac != 0 {
                int_part += 1;
                frac -= 0x100;
            }
            (int_part << 24) + frac * 10_000
        }
        3 | 4 => {
            let mut int_part = cur.be(3)? as i64 - INT_OFS;
            let mut frac = cur.be(2)? as i64;
            if int_part < 0 && frac != 0 {
                int_part += 1;
                frac -= 0x1_0000;
            }
            (int_part << 24) + frac * 100
        }
        _ => cur.be(6)? as i64 - OFS,
    })
}

/// TIME2 → [`Value::Time`].
pub(crate) fn time2(cur: &mut Cursor<'_>, fsp: u8) -> Result<Value, Halt> {
    let packed = time2_packed(cur, fsp)?;
    let negative = packed < 0;
    let abs = packed.unsigned_abs();
    let hms = abs >> 24;
    let micros = (abs % (1 << 24)) as u32;
    let t = Time {
        negative,
        hours: ((hms >> 12) % (1 << 10)) as u32,
        minutes: ((hms >> 6) % (1 << 6)) as u8,
        seconds: (hms % (1 << 6)) as u8,
        micros,
        fsp,
    };
    if t.minutes > 59 || t.seconds > 59 || t.micros > 999_999 {
        return Err(cur.fail("time out of range"));
    }
    Ok(Value::Time(t))
}

/// DATETIME2: 5 bytes big-endian offset by 0x8000000000 packing
/// `((year * 13 + month) << 5 | day) << 17 | hour << 12 | minute << 6 | second`, then the
/// fraction (signed, like TIME2, but a DATETIME is never negative).
pub(crate) fn datetime2(cur: &mut Cursor<'_>, fsp: u8) -> Result<Value, Halt> {
    check_fsp(cur, fsp)?;
    let int_part = cur.be(5)? as i64 - 0x80_0000_0000;
    let frac = match fsp {
        0 => 0,
        1 | 2 => i64::from(cur.u8()? as i8) * 10_000,
        3 | 4 => i64::from(cur.be(2)? as u16 as i16) * 100,
        _ => {
            let v = cur.be(3)? as i64;
            // sign-extend 24 bits
            (v << 40) >> 40
        }
    };
    let packed = (int_part << 24) + frac;
    if packed < 0 {
        return Err(cur.fail("negative datetime"));
    }
    let micros = (packed % (1 << 24)) as u32;
    let ymdhms = packed >> 24;
    let ymd = ymdhms >> 17;
    let ym = ymd >> 5;
    let hms = ymdhms % (1 << 17);
    let dt = DateTime {
        date: Date {
            year: (ym / 13) as u16,
            month: (ym % 13) as u8,
            day: (ymd % (1 << 5)) as u8,
        },
        hour: (hms >> 12) as u8,
        minute: ((hms >> 6) % (1 << 6)) as u8,
        second: (hms % (1 << 6)) as u8,
        micros,
        fsp,
    };
    if dt.date.year > 9999
        || (hms >> 12) > 23
        || dt.minute > 59
        || dt.second > 59
        || dt.micros > 999_999
    {
        return Err(cur.fail("datetime out of range"));
    }
    Ok(Value::DateTime(dt))
}

/// TIMESTAMP2: 4 bytes big-endian seconds since the epoch, then the unsigned fraction.
pub(crate) fn timestamp2(cur: &mut Cursor<'_>, fsp: u8) -> Result<Value, Halt> {
    check_fsp(cur, fsp)?;
    let seconds = cur.be(4)? as u32;
    let micros = match fsp {
        0 => 0,
        1 | 2 => cur.be(1)? as u32 * 10_000,
        3 | 4 => cur.be(2)? as u32 * 100,
        _ => cur.be(3)? as u32,
    };
    if micros > 999_999 {
        return Err(cur.fail("timestamp fraction out of range"));
    }
    Ok(Value::Timestamp {
        seconds,
        micros,
        fsp,
    })
}

/// Pre-5.6 TIMESTAMP: 4 bytes little-endian seconds.
pub(crate) fn legacy_timestamp(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    Ok(Value::Timestamp {
        seconds: cur.le(4)? as u32,
        micros: 0,
        fsp: 0,
    })
}

/// Pre-5.6 DATETIME: 8 bytes little-endian, the decimal number `YYYYMMDDhhmmss`.
pub(crate) fn legacy_datetime(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    let v = cur.le(8)?;
    let (d, t) = (v / 1_000_000, v % 1_000_000);
    if d / 10_000 > 9999 {
        return Err(cur.fail("datetime out of range"));
    }
    Ok(Value::DateTime(DateTime {
        date: Date {
            year: (d / 10_000) as u16,
            month: ((d % 10_000) / 100) as u8,
            day: (d % 100) as u8,
        },
        hour: (t / 10_000) as u8,
        minute: ((t % 10_000) / 100) as u8,
        second: (t % 100) as u8,
        micros: 0,
        fsp: 0,
    }))
}

/// Pre-5.6 TIME: 3 bytes little-endian signed, the decimal number `hhmmss`.
pub(crate) fn legacy_time(cur: &mut Cursor<'_>) -> Result<Value, Halt> {
    let raw = cur.le(3)? as i64;
    let v = (raw << 40) >> 40;
    let a = v.unsigned_abs();
    Ok(Value::Time(Time {
        negative: v < 0,
        hours: (a / 10_000) as u32,
        minutes: ((a % 10_000) / 100) as u8,
        seconds: (a % 100) as u8,
        micros: 0,
        fsp: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::test_support::{go_mysql_vectors, hex};

    fn text(v: Value) -> String {
        v.to_sql_text().unwrap()
    }

    /// Encodes a TIME2 value the way MySQL's `my_time_packed_to_binary` does (C's
    /// truncating `%` and the arithmetic `>>`), to check the decoder at every fsp
    /// independently of mysql_common.
    fn encode_time2(neg: bool, h: i64, m: i64, s: i64, micros: i64, fsp: u8) -> Vec<u8> {
        let mut packed = (((h << 12) | (m << 6) | s) << 24) + micros;
        if neg {
            packed = -packed;
        }
        let int_part = packed >> 24;
        let frac = packed % (1 << 24);
        let int3 = |v: i64| ((v + 0x80_0000) as u32).to_be_bytes()[1..].to_vec();
        match fsp {
            0 => int3(int_part),
            1 | 2 => {
                let mut out = int3(int_part);
                out.push((frac / 10_000) as i8 as u8);
                out
            }
            3 | 4 => {
                let mut out = int3(int_part);
                out.extend_from_slice(&((frac / 100) as i16).to_be_bytes());
                out
            }
            _ => ((packed + 0x8000_0000_0000) as u64).to_be_bytes()[2..].to_vec(),
        }
    }

    #[test]
    fn negative_time_every_fsp() {
        // -12:34:56.78 at fsp 2 is the value mysql_common mis-decodes
        for fsp in 0..=6u8 {
            let scale = 10i64.pow(6 - u32::from(fsp));
            let micros = (780_000 / scale) * scale;
            let b = encode_time2(true, 12, 34, 56, micros, fsp);
            let got = time2(&mut Cursor::new(&b), fsp).unwrap();
            let mut want = String::from("-12:34:56");
            if fsp > 0 {
                want.push('.');
                want.push_str(&format!("{micros:06}")[..usize::from(fsp)]);
            }
            assert_eq!(text(got), want, "fsp {fsp}");
        }
    }

    #[test]
    fn go_mysql_time2_and_datetime2_vectors() {
        let Some(v) = go_mysql_vectors() else {
            return;
        };
        for c in v["time2_vectors"]["cases"].as_array().unwrap() {
            let b = hex(c["hex"].as_str().unwrap());
            let fsp = c["fsp"].as_u64().unwrap() as u8;
            assert_eq!(
                text(time2(&mut Cursor::new(&b), fsp).unwrap()),
                c["expect"],
                "{c}"
            );
        }
        for c in v["datetime2_vectors"]["cases"].as_array().unwrap() {
            let b = hex(c["hex"].as_str().unwrap());
            let fsp = c["fsp"].as_u64().unwrap() as u8;
            let got = text(datetime2(&mut Cursor::new(&b), fsp).unwrap());
            assert_eq!(got, c["expect"], "{c}");
        }
    }

    #[test]
    fn date_year_timestamp() {
        // 2012-03-18: 18 | 3 << 5 | 2012 << 9
        let v: u32 = 18 | (3 << 5) | (2012 << 9);
        let b = v.to_le_bytes();
        assert_eq!(text(date(&mut Cursor::new(&b[..3])).unwrap()), "2012-03-18");
        assert_eq!(text(year(&mut Cursor::new(&[0])).unwrap()), "0000");
        assert_eq!(text(year(&mut Cursor::new(&[124])).unwrap()), "2024");
        let mut b = 1650493084u32.to_be_bytes().to_vec();
        b.extend_from_slice(&[0x01, 0xe2, 0x40]);
        assert_eq!(
            text(timestamp2(&mut Cursor::new(&b), 6).unwrap()),
            "1650493084.123456"
        );
        assert!(timestamp2(&mut Cursor::new(&b), 7).is_err());
    }
}
