//! Calendar and clock values exactly as MySQL stores them: zero dates, negative and >24h
//! TIME values and fractional-second precision are all representable, so nothing is rejected
//! or rounded on the way through.

use std::fmt;

/// A `DATE` (also the date part of `DATETIME`). Zero parts (`0000-00-00`) are legal in MySQL
/// and are kept.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// Year, 0..=9999.
    pub year: u16,
    /// Month, 0..=12 (0 in zero dates).
    pub month: u8,
    /// Day, 0..=31 (0 in zero dates).
    pub day: u8,
}

/// A `TIME` value: a signed duration up to ±838:59:59.999999.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Time {
    /// True for negative values.
    pub negative: bool,
    /// Hours, 0..=838 (and beyond for malformed input, which the decoder refuses).
    pub hours: u32,
    /// Minutes, 0..=59.
    pub minutes: u8,
    /// Seconds, 0..=59.
    pub seconds: u8,
    /// Microseconds, 0..=999_999.
    pub micros: u32,
    /// Fractional-second precision of the column, 0..=6.
    pub fsp: u8,
}

/// A `DATETIME` value (no time zone) with its column's fractional-second precision.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DateTime {
    /// The date part.
    pub date: Date,
    /// Hour, 0..=23.
    pub hour: u8,
    /// Minute, 0..=59.
    pub minute: u8,
    /// Second, 0..=59.
    pub second: u8,
    /// Microseconds, 0..=999_999.
    pub micros: u32,
    /// Fractional-second precision of the column, 0..=6.
    pub fsp: u8,
}

/// Writes `.` and the first `fsp` digits of `micros` when `fsp > 0`.
pub(crate) fn write_fraction(f: &mut fmt::Formatter<'_>, micros: u32, fsp: u8) -> fmt::Result {
    if fsp == 0 {
        return Ok(());
    }
    let digits = format!("{micros:06}");
    let n = usize::from(fsp.min(6));
    f.write_str(".")?;
    f.write_str(digits.get(..n).unwrap_or(&digits))
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl fmt::Display for Time {
    /// MySQL's text form: `[-]H:MM:SS[.frac]` with at least two hour digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        write!(
            f,
            "{:02}:{:02}:{:02}",
            self.hours, self.minutes, self.seconds
        )?;
        write_fraction(f, self.micros, self.fsp)
    }
}

impl fmt::Display for DateTime {
    /// MySQL's text form: `YYYY-MM-DD HH:MM:SS[.frac]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:02}:{:02}:{:02}",
            self.date, self.hour, self.minute, self.second
        )?;
        write_fraction(f, self.micros, self.fsp)
    }
}

// Temporal values are row values: Debug must not show them.
impl fmt::Debug for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Date(<redacted>)")
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Time(<redacted>, fsp={})", self.fsp)
    }
}

impl fmt::Debug for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DateTime(<redacted>, fsp={})", self.fsp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_text_keeps_sign_hours_and_fraction() {
        let t = Time {
            negative: true,
            hours: 12,
            minutes: 34,
            seconds: 56,
            micros: 780_000,
            fsp: 2,
        };
        assert_eq!(t.to_string(), "-12:34:56.78");
        let t = Time {
            negative: true,
            hours: 507,
            minutes: 48,
            seconds: 27,
            micros: 0,
            fsp: 0,
        };
        assert_eq!(t.to_string(), "-507:48:27");
    }

    #[test]
    fn datetime_text_and_zero_date() {
        let dt = DateTime {
            date: Date {
                year: 0,
                month: 0,
                day: 0,
            },
            hour: 0,
            minute: 0,
            second: 0,
            micros: 0,
            fsp: 0,
        };
        assert_eq!(dt.to_string(), "0000-00-00 00:00:00");
        let dt = DateTime {
            date: Date {
                year: 2012,
                month: 3,
                day: 18,
            },
            hour: 11,
            minute: 30,
            second: 45,
            micros: 123_000,
            fsp: 3,
        };
        assert_eq!(dt.to_string(), "2012-03-18 11:30:45.123");
    }

    #[test]
    fn debug_is_redacted() {
        let d = Date {
            year: 2024,
            month: 1,
            day: 2,
        };
        assert!(!format!("{d:?}").contains("2024"));
    }
}
