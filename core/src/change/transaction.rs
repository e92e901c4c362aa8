//! One committed transaction.

use std::fmt;

use super::binlog_origin::BinlogOrigin;
use super::change::Change;
use crate::position::{Flavor, Gtid, MariadbGtid, ParseError, Position};

/// The GTID that identifies a committed transaction, in its server flavour.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TransactionGtid {
    /// A MySQL GTID (`uuid[:tag]:gno`).
    Mysql(Gtid),
    /// A MariaDB GTID (`domain-server-seq`).
    Mariadb(MariadbGtid),
}

impl TransactionGtid {
    /// Parses a GTID as [`fmt::Display`] writes it, in `flavor`'s syntax.
    pub fn parse(flavor: Flavor, text: &str) -> Result<Self, ParseError> {
        Ok(match flavor {
            Flavor::Mysql => TransactionGtid::Mysql(text.parse()?),
            Flavor::Mariadb => TransactionGtid::Mariadb(text.parse()?),
        })
    }

    /// True when `position` covers this transaction (same flavour, and the GTID is in it).
    pub fn is_covered_by(&self, position: &Position) -> bool {
        match (position, self) {
            (Position::Mysql(set), TransactionGtid::Mysql(g)) => set.contains(g),
            (Position::Mariadb(pos), TransactionGtid::Mariadb(g)) => pos.contains(g),
            _ => false,
        }
    }
}

impl fmt::Display for TransactionGtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransactionGtid::Mysql(g) => g.fmt(f),
            TransactionGtid::Mariadb(g) => g.fmt(f),
        }
    }
}

/// A committed transaction with the row changes that passed the table filter.
///
/// The position bookkeeping (adding `gtid` to the processed set) is the caller's; a
/// transaction whose changes were all filtered is reported separately by the assembler so the
/// position still advances.
#[derive(Clone, PartialEq)]
pub struct Transaction {
    /// The transaction's GTID.
    pub gtid: TransactionGtid,
    /// Commit time, microseconds since the Unix epoch: MySQL's immediate commit timestamp
    /// when the GTID event carries one, else the event header's whole seconds.
    pub committed_at_micros: u64,
    /// Row changes in binlog order.
    pub changes: Vec<Change>,
    /// The index, within the whole source transaction, of `changes[0]`: 0 unless earlier
    /// changes of the transaction were handed out before it as slices (a transaction larger
    /// than the assembler's slice budget; see `AssemblerOutput::Slice`).
    pub first_change: u64,
    /// True when some row events of this transaction were dropped by the table filter.
    pub partially_filtered: bool,
    /// Further GTIDs that processing this transaction covers besides `gtid`: the XA PREPARE
    /// of a two-phase XA transaction delivered at its XA COMMIT (`gtid`). Empty otherwise.
    pub also_covers: Vec<TransactionGtid>,
    /// Where in the binlog the transaction's GTID event was read.
    pub origin: BinlogOrigin,
}

impl fmt::Debug for Transaction {
    /// Structure only: GTID, commit time, change count (the changes themselves are omitted;
    /// their Debug is redacted anyway, but a large transaction would flood a log line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("gtid", &self.gtid.to_string())
            .field("committed_at_micros", &self.committed_at_micros)
            .field("changes", &self.changes.len())
            .field("first_change", &self.first_change)
            .field("partially_filtered", &self.partially_filtered)
            .field("also_covers", &self.also_covers.len())
            .finish()
    }
}

#[cfg(test)]
mod coverage_tests {
    use super::*;
    use crate::position::Flavor;

    #[test]
    fn covered_only_by_a_position_of_its_flavour_that_holds_it() {
        let uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
        let g = TransactionGtid::Mysql(format!("{uuid}:5").parse().unwrap());
        let set = |t: &str| Position::parse(Flavor::Mysql, t).unwrap();
        assert!(g.is_covered_by(&set(&format!("{uuid}:1-5"))));
        assert!(!g.is_covered_by(&set(&format!("{uuid}:1-4"))));
        let m = TransactionGtid::Mariadb(MariadbGtid::new(0, 2, 6));
        let pos = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        assert!(m.is_covered_by(&pos("0-2-6")));
        assert!(!m.is_covered_by(&pos("0-2-5")));
        assert!(!g.is_covered_by(&pos("0-2-6")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gtid_parses_back_from_its_text_in_its_flavour() {
        for (flavor, text) in [
            (Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"),
            (Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:tag1:7"),
            (Flavor::Mariadb, "0-1-42"),
        ] {
            let gtid = TransactionGtid::parse(flavor, text).unwrap();
            assert_eq!(gtid.to_string(), text);
        }
        assert!(TransactionGtid::parse(Flavor::Mariadb, "3e11fa47:1").is_err());
        assert!(TransactionGtid::parse(Flavor::Mysql, "0-1-42").is_err());
    }
}
