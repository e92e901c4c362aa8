//! MySQL GTID sets: the processed watermark of a MySQL pipeline.
//!
//! A GTID set maps each source identity ([`Sid`]: server UUID plus optional tag) to a set of
//! sequence numbers (GNOs), stored as normalised inclusive intervals. A set is legitimately
//! non-contiguous (failover, purge, multi-source, skipped transactions), so "have we processed
//! this transaction" is always answered by membership ([`GtidSet::contains`]), never by comparing
//! a sequence number with a high-water mark.
//!
//! Text form, as MySQL prints it: `uuid:interval[:interval…][:tag:interval…]`, UUID sets
//! separated by commas, an interval `n` or `a-b`. The parser accepts what servers print
//! (whitespace and newlines around separators, upper-case UUIDs, tags in any case, unsorted and
//! overlapping intervals) and [`fmt::Display`] prints the canonical form: UUIDs in byte order and
//! lowercase, the untagged intervals of a UUID first and then its tags in order, intervals
//! merged and sorted, no whitespace.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::interval_list::{self, Interval};
use super::parse_error::{ParseError, ParseErrorKind};
use super::sid::{Sid, Tag, Uuid};

/// The largest GNO MySQL assigns (`GNO_END - 1`, where `GNO_END = INT64_MAX`).
pub const MAX_GNO: u64 = i64::MAX as u64 - 1;

/// One MySQL GTID: a source identity and a sequence number.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Gtid {
    /// Source identity.
    pub sid: Sid,
    /// Sequence number, 1..=[`MAX_GNO`].
    pub gno: u64,
}

impl Gtid {
    /// A GTID from its parts.
    pub fn new(sid: Sid, gno: u64) -> Self {
        Gtid { sid, gno }
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.sid, self.gno)
    }
}

impl FromStr for Gtid {
    type Err = ParseError;

    /// Parses `uuid:n` or `uuid:tag:n` (whitespace around the separators allowed).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fields: Vec<(usize, &str)> = split_at(s, ':', 0).map(|(o, f)| trim_at(o, f)).collect();
        let (uuid, tag, gno) = match fields.as_slice() {
            [(uo, u), (no, n)] => (Uuid::parse_at(u, *uo)?, None, parse_gno(*no, n)?),
            [(uo, u), (to, t), (no, n)] => (
                Uuid::parse_at(u, *uo)?,
                Some(Tag::parse_at(t, *to)?),
                parse_gno(*no, n)?,
            ),
            _ => return Err(ParseError::new(0, ParseErrorKind::NotSingleGtid)),
        };
        Ok(Gtid::new(Sid { uuid, tag }, gno))
    }
}

/// A MySQL GTID set. See the module documentation.
#[derive(Clone, PartialEq, Eq, Default, Hash)]
pub struct GtidSet {
    // invariant: no empty interval list is stored
    sets: BTreeMap<Sid, Vec<Interval>>,
}

impl GtidSet {
    /// The empty set.
    pub fn new() -> Self {
        GtidSet::default()
    }

    /// True when the set has no member.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Number of member GTIDs.
    pub fn len(&self) -> u128 {
        self.sets
            .values()
            .flat_map(|v| v.iter())
            .map(|iv| u128::from(iv.len()))
            .sum()
    }

    /// Adds one GTID. Returns true when it was not already a member.
    pub fn insert(&mut self, gtid: &Gtid) -> bool {
        if self.contains(gtid) {
            return false;
        }
        self.insert_interval(gtid.sid.clone(), gtid.gno, gtid.gno);
        true
    }

    /// Adds the interval `start..=end` of `sid`. Callers guarantee `1 <= start <= end`.
    pub fn insert_interval(&mut self, sid: Sid, start: u64, end: u64) {
        interval_list::insert(self.sets.entry(sid).or_default(), Interval::new(start, end));
    }

    /// True when `gtid` is a member.
    pub fn contains(&self, gtid: &Gtid) -> bool {
        self.sets
            .get(&gtid.sid)
            .is_some_and(|v| interval_list::contains(v, gtid.gno))
    }

    /// The union of `self` and `other`.
    pub fn union(&self, other: &GtidSet) -> GtidSet {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds every member of `other` to `self`.
    pub fn union_with(&mut self, other: &GtidSet) {
        for (sid, theirs) in &other.sets {
            let entry = self.sets.entry(sid.clone()).or_default();
            *entry = interval_list::union(entry, theirs);
        }
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &GtidSet) -> GtidSet {
        let mut sets = BTreeMap::new();
        for (sid, mine) in &self.sets {
            let rest = match other.sets.get(sid) {
                Some(theirs) => interval_list::difference(mine, theirs),
                None => mine.clone(),
            };
            if !rest.is_empty() {
                sets.insert(sid.clone(), rest);
            }
        }
        GtidSet { sets }
    }

    /// Members of both `self` and `other`.
    pub fn intersection(&self, other: &GtidSet) -> GtidSet {
        let mut sets = BTreeMap::new();
        for (sid, mine) in &self.sets {
            if let Some(theirs) = other.sets.get(sid) {
                let both = interval_list::intersection(mine, theirs);
                if !both.is_empty() {
                    sets.insert(sid.clone(), both);
                }
            }
        }
        GtidSet { sets }
    }

    /// True when every member of `self` is a member of `other`.
    pub fn is_subset(&self, other: &GtidSet) -> bool {
        self.sets.iter().all(|(sid, mine)| {
            other
                .sets
                .get(sid)
                .is_some_and(|theirs| interval_list::is_subset(mine, theirs))
        })
    }

    /// The source identities and their normalised intervals, in canonical order.
    pub fn iter(&self) -> impl Iterator<Item = (&Sid, &[Interval])> {
        self.sets.iter().map(|(s, v)| (s, v.as_slice()))
    }

    /// Every member GTID in canonical order. Sets can be astronomically large: take with care.
    pub fn iter_gtids(&self) -> impl Iterator<Item = Gtid> + '_ {
        self.sets.iter().flat_map(|(sid, v)| {
            v.iter()
                .flat_map(move |iv| (iv.start..=iv.end).map(move |n| Gtid::new(sid.clone(), n)))
        })
    }
}

impl fmt::Display for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut current: Option<Uuid> = None;
        for (sid, intervals) in &self.sets {
            if current != Some(sid.uuid) {
                if current.is_some() {
                    f.write_str(",")?;
                }
                write!(f, "{}", sid.uuid)?;
                current = Some(sid.uuid);
            }
            if let Some(tag) = &sid.tag {
                write!(f, ":{tag}")?;
            }
            for iv in intervals {
                if iv.start == iv.end {
                    write!(f, ":{}", iv.start)?;
                } else {
                    write!(f, ":{}-{}", iv.start, iv.end)?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Debug for GtidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GtidSet({self})")
    }
}

/// Splits `text` at `sep`, yielding each piece with its byte offset relative to `base`.
fn split_at(text: &str, sep: char, base: usize) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = base;
    text.split(sep).map(move |piece| {
        let at = offset;
        offset += piece.len() + sep.len_utf8();
        (at, piece)
    })
}

/// Trims ASCII whitespace, adjusting the offset for what was cut at the front.
fn trim_at(offset: usize, text: &str) -> (usize, &str) {
    let trimmed_front = text.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let offset = offset + (text.len() - trimmed_front.len());
    (
        offset,
        trimmed_front.trim_end_matches(|c: char| c.is_ascii_whitespace()),
    )
}

/// Parses a GNO: decimal digits, 1..=[`MAX_GNO`].
fn parse_gno(offset: usize, text: &str) -> Result<u64, ParseError> {
    if text.is_empty() {
        return Err(ParseError::new(offset, ParseErrorKind::InvalidNumber));
    }
    let mut n: u64 = 0;
    for (i, b) in text.bytes().enumerate() {
        if !b.is_ascii_digit() {
            return Err(ParseError::new(offset + i, ParseErrorKind::InvalidNumber));
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(ParseError::new(offset, ParseErrorKind::NumberTooLarge))?;
    }
    if n == 0 {
        return Err(ParseError::new(offset, ParseErrorKind::ZeroSequence));
    }
    if n > MAX_GNO {
        return Err(ParseError::new(offset, ParseErrorKind::NumberTooLarge));
    }
    Ok(n)
}

/// Parses `n` or `a-b` (whitespace allowed around the dash).
fn parse_interval(offset: usize, text: &str) -> Result<Interval, ParseError> {
    let mut parts = split_at(text, '-', offset);
    let (so, s) = parts
        .next()
        .map(|(o, p)| trim_at(o, p))
        .unwrap_or((offset, ""));
    let start = parse_gno(so, s)?;
    let end = match parts.next() {
        None => start,
        Some((eo, e)) => {
            let (eo, e) = trim_at(eo, e);
            let end = parse_gno(eo, e)?;
            if end < start {
                return Err(ParseError::new(offset, ParseErrorKind::ReversedInterval));
            }
            end
        }
    };
    if let Some((o, _)) = parts.next() {
        return Err(ParseError::new(
            o.saturating_sub(1),
            ParseErrorKind::UnexpectedCharacter,
        ));
    }
    Ok(Interval::new(start, end))
}

impl FromStr for GtidSet {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut set = GtidSet::new();
        if text
            .trim_matches(|c: char| c.is_ascii_whitespace())
            .is_empty()
        {
            return Ok(set);
        }
        for (offset, piece) in split_at(text, ',', 0) {
            let (offset, piece) = trim_at(offset, piece);
            if piece.is_empty() {
                return Err(ParseError::new(offset, ParseErrorKind::InvalidUuid));
            }
            let mut fields = split_at(piece, ':', offset);
            let (uo, u) = fields
                .next()
                .map(|(o, f)| trim_at(o, f))
                .unwrap_or((offset, ""));
            let uuid = Uuid::parse_at(u, uo)?;
            let mut tag: Option<Tag> = None;
            // true once the current tag (or the bare uuid) has at least one interval
            let mut has_interval = false;
            let mut end_of_last = uo + u.len();
            for (fo, field) in fields {
                let (fo, field) = trim_at(fo, field);
                end_of_last = fo + field.len();
                match field.bytes().next() {
                    None => {
                        return Err(ParseError::new(fo, ParseErrorKind::MissingInterval));
                    }
                    Some(b) if b.is_ascii_digit() => {
                        let iv = parse_interval(fo, field)?;
                        let sid = Sid {
                            uuid,
                            tag: tag.clone(),
                        };
                        interval_list::insert(set.sets.entry(sid).or_default(), iv);
                        has_interval = true;
                    }
                    Some(_) => {
                        if tag.is_some() && !has_interval {
                            return Err(ParseError::new(fo, ParseErrorKind::MissingInterval));
                        }
                        tag = Some(Tag::parse_at(field, fo)?);
                        has_interval = false;
                    }
                }
            }
            if !has_interval {
                return Err(ParseError::new(
                    end_of_last,
                    ParseErrorKind::MissingInterval,
                ));
            }
        }
        Ok(set)
    }
}

impl serde::Serialize for GtidSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for GtidSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const B: &str = "4f22fa47-71ca-11e1-9e33-c80aa9429562";

    fn set(s: &str) -> GtidSet {
        s.parse().unwrap()
    }

    fn gtid(s: &str) -> Gtid {
        s.parse().unwrap()
    }

    #[test]
    fn parses_server_text_and_prints_canonically() {
        let text = format!(
            "{},\n{}:1-5:7:10-12",
            B.to_uppercase() + ":3",
            A.to_uppercase()
        );
        assert_eq!(set(&text).to_string(), format!("{A}:1-5:7:10-12,{B}:3"));
    }

    #[test]
    fn empty_text_is_the_empty_set() {
        assert!(set("").is_empty());
        assert!(set(" \n ").is_empty());
        assert_eq!(GtidSet::new().to_string(), "");
    }

    #[test]
    fn merges_unsorted_overlapping_intervals() {
        assert_eq!(
            set(&format!("{A}:7-9:1-3:4:8-12:5-6")).to_string(),
            format!("{A}:1-12")
        );
        assert_eq!(
            set(&format!("{A}:1-3,{A}:5")).to_string(),
            format!("{A}:1-3:5")
        );
    }

    #[test]
    fn tagged_gtids_print_after_the_untagged_ones() {
        let s = set(&format!("{A}:Beta:1-2:alpha:5,{A}:1-3"));
        assert_eq!(s.to_string(), format!("{A}:1-3:alpha:5:beta:1-2"));
        assert!(s.contains(&gtid(&format!("{A}:ALPHA:5"))));
        assert!(!s.contains(&gtid(&format!("{A}:5"))));
        assert!(!s.contains(&gtid(&format!("{A}:alpha:1"))));
    }

    #[test]
    fn whitespace_around_separators_is_accepted() {
        assert_eq!(
            set(&format!(" {A} : 1 - 3 : tag : 4 ,\n\t{B}:2 ")).to_string(),
            format!("{A}:1-3:tag:4,{B}:2")
        );
    }

    #[test]
    fn errors_name_the_kind_and_offset() {
        let e = &format!("{A}:0").parse::<GtidSet>().unwrap_err();
        assert_eq!((e.kind, e.offset), (ParseErrorKind::ZeroSequence, 37));
        let e = &format!("{A}:5-3").parse::<GtidSet>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::ReversedInterval);
        let e = A.parse::<GtidSet>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::MissingInterval);
        let e = &format!("{A}:tag").parse::<GtidSet>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::MissingInterval);
        let e = &format!("{A}:t1:t2:4").parse::<GtidSet>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::MissingInterval);
        let e = &format!("{A}:1,,{B}:2").parse::<GtidSet>().unwrap_err();
        assert_eq!((e.kind, e.offset), (ParseErrorKind::InvalidUuid, 39));
        let e = &format!("{A}:1x").parse::<GtidSet>().unwrap_err();
        assert_eq!((e.kind, e.offset), (ParseErrorKind::InvalidNumber, 38));
        let e = &format!("{A}:99999999999999999999")
            .parse::<GtidSet>()
            .unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::NumberTooLarge);
        let e = &format!("{A}:9223372036854775807")
            .parse::<GtidSet>()
            .unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::NumberTooLarge);
        assert!(set(&format!("{A}:9223372036854775806")).len() == 1);
        let e = &format!("{A}:1-2-3").parse::<GtidSet>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::UnexpectedCharacter);
        let e = &format!("{A}:1:").parse::<GtidSet>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::MissingInterval);
        assert!(!e.to_string().contains(A), "errors never echo the input");
    }

    #[test]
    fn membership_not_ordinal() {
        // a hole at 4: a high-water comparison would claim 4 was processed
        let s = set(&format!("{A}:1-3:5-9"));
        assert!(!s.contains(&gtid(&format!("{A}:4"))));
        assert!(s.contains(&gtid(&format!("{A}:5"))));
    }

    #[test]
    fn algebra_examples() {
        let a = set(&format!("{A}:1-10,{B}:1-5"));
        let b = set(&format!("{A}:3-4:8,{B}:1-5"));
        assert_eq!(a.difference(&b).to_string(), format!("{A}:1-2:5-7:9-10"));
        assert!(b.is_subset(&a));
        assert!(!a.is_subset(&b));
        assert_eq!(a.union(&b), a);
        assert_eq!(a.intersection(&b), b);
        let mut c = GtidSet::new();
        assert!(c.insert(&gtid(&format!("{A}:4"))));
        assert!(!c.insert(&gtid(&format!("{A}:4"))));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn single_gtid_parse() {
        assert_eq!(gtid(&format!("{A}:7")).to_string(), format!("{A}:7"));
        assert_eq!(gtid(&format!("{A}:T:7")).to_string(), format!("{A}:t:7"));
        assert!(format!("{A}:1-2").parse::<Gtid>().is_err());
        assert!(format!("{A}:1,{B}:2").parse::<Gtid>().is_err());
    }

    #[test]
    fn serde_as_text() {
        let s = set(&format!("{A}:1-3"));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, format!("\"{A}:1-3\""));
        assert_eq!(serde_json::from_str::<GtidSet>(&json).unwrap(), s);
        assert!(serde_json::from_str::<GtidSet>("\"nope\"").is_err());
    }
}
