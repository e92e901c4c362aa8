//! The source identity of a MySQL GTID: the originating server's UUID plus an optional tag
//! (MySQL 8.3+ tagged GTIDs, `uuid:tag:n`).

use std::fmt;

use super::parse_error::{ParseError, ParseErrorKind};

/// A server UUID, 16 raw bytes, printed in MySQL's lowercase hyphenated form.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// Parses the 36-character hyphenated form (`8-4-4-4-12` hex digits, any case).
    /// `offset` is the position of `text` in the larger input, for error messages.
    pub fn parse_at(text: &str, offset: usize) -> Result<Self, ParseError> {
        let bytes = text.as_bytes();
        if bytes.len() != 36 {
            return Err(ParseError::new(offset, ParseErrorKind::InvalidUuid));
        }
        let mut out = [0u8; 16];
        let mut nibbles = 0usize;
        for (i, &b) in bytes.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if b != b'-' {
                    return Err(ParseError::new(offset + i, ParseErrorKind::InvalidUuid));
                }
                continue;
            }
            let v = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(ParseError::new(offset + i, ParseErrorKind::InvalidUuid)),
            };
            let slot = &mut out[nibbles / 2];
            *slot = (*slot << 4) | v;
            nibbles += 1;
        }
        Ok(Uuid(out))
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid({self})")
    }
}

/// A GTID tag: 1 to 32 characters, `[a-z_][a-z0-9_]*`. MySQL compares tags case-insensitively
/// and prints them in lowercase, so the parsed form is lowercased.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(String);

impl Tag {
    /// The longest tag MySQL accepts.
    pub const MAX_LEN: usize = 32;

    /// Parses a tag, lowercasing it. `offset` locates `text` in the larger input.
    pub fn parse_at(text: &str, offset: usize) -> Result<Self, ParseError> {
        let bytes = text.as_bytes();
        if bytes.is_empty() || bytes.len() > Self::MAX_LEN {
            return Err(ParseError::new(offset, ParseErrorKind::InvalidTag));
        }
        for (i, &b) in bytes.iter().enumerate() {
            let ok = b == b'_' || b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit());
            if !ok {
                return Err(ParseError::new(offset + i, ParseErrorKind::InvalidTag));
            }
        }
        Ok(Tag(text.to_ascii_lowercase()))
    }

    /// The canonical (lowercase) text of the tag.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tag({})", self.0)
    }
}

/// Source identity of a GTID: UUID and optional tag. Ordered by UUID, then untagged before
/// tagged, then by tag, which is the order MySQL prints them in.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Sid {
    /// The originating server's UUID.
    pub uuid: Uuid,
    /// The tag, if the GTID is tagged.
    pub tag: Option<Tag>,
}

impl Sid {
    /// An untagged source identity.
    pub fn untagged(uuid: Uuid) -> Self {
        Sid { uuid, tag: None }
    }

    /// A tagged source identity.
    pub fn tagged(uuid: Uuid, tag: Tag) -> Self {
        Sid {
            uuid,
            tag: Some(tag),
        }
    }
}

impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tag {
            None => write!(f, "{}", self.uuid),
            Some(tag) => write!(f, "{}:{}", self.uuid, tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_and_lowercases() {
        let u = Uuid::parse_at("3E11FA47-71CA-11E1-9E33-C80AA9429562", 0).unwrap();
        assert_eq!(u.to_string(), "3e11fa47-71ca-11e1-9e33-c80aa9429562");
    }

    #[test]
    fn uuid_errors_point_at_the_bad_byte() {
        let e = Uuid::parse_at("3e11fa47-71ca-11e1-9e33-c80aa942956g", 10).unwrap_err();
        assert_eq!(e.offset, 10 + 35);
        let e = Uuid::parse_at("3e11fa47x71ca-11e1-9e33-c80aa9429562", 0).unwrap_err();
        assert_eq!(e.offset, 8);
        assert!(Uuid::parse_at("3e11fa47", 0).is_err());
    }

    #[test]
    fn tags_follow_mysql_rules() {
        assert_eq!(Tag::parse_at("Tag_1", 0).unwrap().as_str(), "tag_1");
        assert!(Tag::parse_at("_x", 0).is_ok());
        assert!(Tag::parse_at("1abc", 0).is_err());
        assert!(Tag::parse_at("", 0).is_err());
        assert!(Tag::parse_at("a-b", 0).is_err());
        assert!(Tag::parse_at(&"a".repeat(32), 0).is_ok());
        assert!(Tag::parse_at(&"a".repeat(33), 0).is_err());
    }
}
