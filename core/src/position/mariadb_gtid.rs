//! MariaDB GTID positions: the processed watermark of a MariaDB pipeline.
//!
//! A MariaDB GTID is `domain-server-seq`. A position (`@@gtid_binlog_pos`,
//! `@@slave_connect_state`) holds at most one GTID per replication domain: the last one
//! processed in that domain. With `gtid_strict_mode=ON`, which capstan requires, sequence
//! numbers within a domain strictly increase in binlog order whatever server wrote them, so a
//! GTID `d-s-n` has been processed exactly when the position's entry for domain `d` has a
//! sequence number `>= n`. The server id is identity, not order: it is carried and printed but
//! takes no part in membership. Domains are independent streams, so nothing compares across
//! them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::parse_error::{ParseError, ParseErrorKind};

/// One MariaDB GTID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct MariadbGtid {
    /// Replication domain.
    pub domain: u32,
    /// Server id of the server that wrote the transaction.
    pub server_id: u32,
    /// Sequence number within the domain.
    pub seq: u64,
}

impl MariadbGtid {
    /// A GTID from its parts.
    pub fn new(domain: u32, server_id: u32, seq: u64) -> Self {
        MariadbGtid {
            domain,
            server_id,
            seq,
        }
    }

    fn parse_at(offset: usize, text: &str) -> Result<Self, ParseError> {
        let mut nums = [0u64; 3];
        let mut count = 0;
        let mut at = offset;
        for piece in text.split('-') {
            if count == 3 {
                return Err(ParseError::new(at, ParseErrorKind::InvalidMariadbGtid));
            }
            let lead = piece.len() - piece.trim_start().len();
            let digits = piece.trim();
            if digits.is_empty() {
                return Err(ParseError::new(at, ParseErrorKind::InvalidMariadbGtid));
            }
            let mut n: u64 = 0;
            for (i, b) in digits.bytes().enumerate() {
                if !b.is_ascii_digit() {
                    return Err(ParseError::new(
                        at + lead + i,
                        ParseErrorKind::InvalidNumber,
                    ));
                }
                n = n
                    .checked_mul(10)
                    .and_then(|n| n.checked_add(u64::from(b - b'0')))
                    .ok_or(ParseError::new(at + lead, ParseErrorKind::NumberTooLarge))?;
            }
            if count < 2 && n > u64::from(u32::MAX) {
                return Err(ParseError::new(at + lead, ParseErrorKind::NumberTooLarge));
            }
            nums[count] = n;
            count += 1;
            at += piece.len() + 1;
        }
        if count != 3 {
            return Err(ParseError::new(offset, ParseErrorKind::InvalidMariadbGtid));
        }
        // both checked against u32::MAX above
        let domain = u32::try_from(nums[0]).unwrap_or(u32::MAX);
        let server_id = u32::try_from(nums[1]).unwrap_or(u32::MAX);
        Ok(MariadbGtid::new(domain, server_id, nums[2]))
    }
}

impl fmt::Display for MariadbGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server_id, self.seq)
    }
}

impl FromStr for MariadbGtid {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MariadbGtid::parse_at(0, s)
    }
}

/// What [`MariadbGtidPosition::advance`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Advance {
    /// The GTID was new; the domain's entry now names it.
    Advanced,
    /// The GTID was already contained; nothing changed.
    AlreadyContained,
}

/// A MariaDB GTID position: one GTID per replication domain. See the module documentation.
#[derive(Clone, PartialEq, Eq, Default, Hash)]
pub struct MariadbGtidPosition {
    domains: BTreeMap<u32, MariadbGtid>,
}

impl MariadbGtidPosition {
    /// The empty position (nothing processed in any domain).
    pub fn new() -> Self {
        MariadbGtidPosition::default()
    }

    /// True when no domain has an entry.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// True when `gtid` has been processed (strict mode: its domain's entry is at or past it).
    pub fn contains(&self, gtid: &MariadbGtid) -> bool {
        self.domains
            .get(&gtid.domain)
            .is_some_and(|e| e.seq >= gtid.seq)
    }

    /// Records `gtid` as processed.
    pub fn advance(&mut self, gtid: MariadbGtid) -> Advance {
        if self.contains(&gtid) {
            return Advance::AlreadyContained;
        }
        self.domains.insert(gtid.domain, gtid);
        Advance::Advanced
    }

    /// The entry of `domain`, if any.
    pub fn get(&self, domain: u32) -> Option<&MariadbGtid> {
        self.domains.get(&domain)
    }

    /// The later entry per domain of `self` and `other`.
    pub fn merge(&self, other: &MariadbGtidPosition) -> MariadbGtidPosition {
        let mut out = self.clone();
        for g in other.domains.values() {
            out.advance(*g);
        }
        out
    }

    /// True when everything `self` covers is covered by `other`.
    pub fn is_subset(&self, other: &MariadbGtidPosition) -> bool {
        self.domains.values().all(|g| other.contains(g))
    }

    /// The entries, one per domain, in domain order.
    pub fn iter(&self) -> impl Iterator<Item = &MariadbGtid> {
        self.domains.values()
    }
}

impl fmt::Display for MariadbGtidPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.domains.values().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{g}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for MariadbGtidPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MariadbGtidPosition({self})")
    }
}

impl FromStr for MariadbGtidPosition {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut pos = MariadbGtidPosition::new();
        if text.trim().is_empty() {
            return Ok(pos);
        }
        let mut offset = 0;
        for piece in text.split(',') {
            let lead = piece.len() - piece.trim_start().len();
            let g = MariadbGtid::parse_at(offset + lead, piece.trim())?;
            if pos.domains.insert(g.domain, g).is_some() {
                return Err(ParseError::new(
                    offset + lead,
                    ParseErrorKind::DuplicateDomain,
                ));
            }
            offset += piece.len() + 1;
        }
        Ok(pos)
    }
}

impl serde::Serialize for MariadbGtidPosition {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for MariadbGtidPosition {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(s: &str) -> MariadbGtidPosition {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_prints_in_domain_order() {
        assert_eq!(pos(" 1-2-30 ,\n0-1-18").to_string(), "0-1-18,1-2-30");
        assert!(pos("").is_empty());
    }

    #[test]
    fn membership_per_domain_ignores_server_id() {
        let p = pos("0-1-18,5-3-2");
        assert!(p.contains(&"0-1-18".parse().unwrap()));
        assert!(p.contains(&"0-7-3".parse().unwrap()));
        assert!(!p.contains(&"0-1-19".parse().unwrap()));
        assert!(!p.contains(&"1-1-1".parse().unwrap()));
    }

    #[test]
    fn advance_and_merge() {
        let mut p = pos("0-1-18");
        assert_eq!(p.advance("0-2-19".parse().unwrap()), Advance::Advanced);
        assert_eq!(
            p.advance("0-1-10".parse().unwrap()),
            Advance::AlreadyContained
        );
        assert_eq!(p.to_string(), "0-2-19");
        let q = pos("0-1-17,3-1-4");
        assert_eq!(p.merge(&q).to_string(), "0-2-19,3-1-4");
        assert!(pos("0-1-17").is_subset(&p));
        assert!(!q.is_subset(&p));
    }

    #[test]
    fn refuses_bad_text_with_offsets() {
        let e = "0-1-18,0-2-19".parse::<MariadbGtidPosition>().unwrap_err();
        assert_eq!((e.kind, e.offset), (ParseErrorKind::DuplicateDomain, 7));
        let e = "0-1".parse::<MariadbGtidPosition>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::InvalidMariadbGtid);
        let e = "0-1-2-3".parse::<MariadbGtidPosition>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::InvalidMariadbGtid);
        let e = "0-1-x".parse::<MariadbGtidPosition>().unwrap_err();
        assert_eq!((e.kind, e.offset), (ParseErrorKind::InvalidNumber, 4));
        let e = "4294967296-1-1".parse::<MariadbGtidPosition>().unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::NumberTooLarge);
        let e = "0-1-18,".parse::<MariadbGtidPosition>().unwrap_err();
        assert_eq!((e.kind, e.offset), (ParseErrorKind::InvalidMariadbGtid, 7));
    }
}
