//! The position authority: the processed watermark of one pipeline, in its source's flavour.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::gtid_set::GtidSet;
use super::mariadb_gtid::MariadbGtidPosition;
use super::parse_error::ParseError;

/// Which kind of server a source is; it decides the position model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// MySQL 8.4 / 9.x: GTID sets.
    Mysql,
    /// MariaDB 10.11+: per-domain GTID positions.
    Mariadb,
}

impl Flavor {
    /// The flavour's name as users write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Mysql => "mysql",
            Flavor::Mariadb => "mariadb",
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A processed position: every committed transaction it covers was delivered or filtered.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "flavor", content = "gtids", rename_all = "snake_case")]
pub enum Position {
    /// A MySQL GTID set.
    Mysql(GtidSet),
    /// A MariaDB GTID position.
    Mariadb(MariadbGtidPosition),
}

/// Two positions of different flavours were combined.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("position flavours differ: {left} and {right}")]
pub struct FlavorMismatch {
    /// Flavour of the receiver.
    pub left: Flavor,
    /// Flavour of the argument.
    pub right: Flavor,
}

impl Position {
    /// The empty position of `flavor` (nothing processed).
    pub fn empty(flavor: Flavor) -> Self {
        match flavor {
            Flavor::Mysql => Position::Mysql(GtidSet::new()),
            Flavor::Mariadb => Position::Mariadb(MariadbGtidPosition::new()),
        }
    }

    /// Parses the server's text form for `flavor`.
    pub fn parse(flavor: Flavor, text: &str) -> Result<Self, ParseError> {
        Ok(match flavor {
            Flavor::Mysql => Position::Mysql(text.parse()?),
            Flavor::Mariadb => Position::Mariadb(text.parse()?),
        })
    }

    /// The flavour of this position.
    pub fn flavor(&self) -> Flavor {
        match self {
            Position::Mysql(_) => Flavor::Mysql,
            Position::Mariadb(_) => Flavor::Mariadb,
        }
    }

    /// True when nothing has been processed.
    pub fn is_empty(&self) -> bool {
        match self {
            Position::Mysql(s) => s.is_empty(),
            Position::Mariadb(p) => p.is_empty(),
        }
    }

    /// True when everything `self` covers is covered by `other` (for example "the chunk's
    /// position G is already processed"). Positions of different flavours are never subsets.
    pub fn is_subset(&self, other: &Position) -> bool {
        match (self, other) {
            (Position::Mysql(a), Position::Mysql(b)) => a.is_subset(b),
            (Position::Mariadb(a), Position::Mariadb(b)) => a.is_subset(b),
            _ => false,
        }
    }

    /// Everything covered by either position.
    pub fn union(&self, other: &Position) -> Result<Position, FlavorMismatch> {
        match (self, other) {
            (Position::Mysql(a), Position::Mysql(b)) => Ok(Position::Mysql(a.union(b))),
            (Position::Mariadb(a), Position::Mariadb(b)) => Ok(Position::Mariadb(a.merge(b))),
            _ => Err(FlavorMismatch {
                left: self.flavor(),
                right: other.flavor(),
            }),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Mysql(s) => s.fmt(f),
            Position::Mariadb(p) => p.fmt(f),
        }
    }
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({}: {self})", self.flavor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn serde_names_the_flavor() {
        let p = Position::parse(Flavor::Mysql, &format!("{A}:1-3")).unwrap();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, format!(r#"{{"flavor":"mysql","gtids":"{A}:1-3"}}"#));
        assert_eq!(serde_json::from_str::<Position>(&json).unwrap(), p);
        let m = Position::parse(Flavor::Mariadb, "0-1-5").unwrap();
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"flavor":"mariadb","gtids":"0-1-5"}"#);
        assert_eq!(serde_json::from_str::<Position>(&json).unwrap(), m);
    }

    #[test]
    fn flavours_never_mix() {
        let p = Position::empty(Flavor::Mysql);
        let m = Position::empty(Flavor::Mariadb);
        assert!(!p.is_subset(&m));
        assert!(p.union(&m).is_err());
        assert!(p.is_subset(&p));
    }
}
