//! [`WithinTransaction`]: how much of a source transaction handed out in slices is committed,
//! when an exactly-once checkpoint falls inside it.
//!
//! A transaction larger than the slice budget is published slice by slice, each slice in a
//! Kafka transaction of its own with the offsets record: one Kafka transaction per source
//! transaction would stay open for as long as the source transaction takes to publish, and
//! the broker aborts a transaction older than `transaction_timeout_ms`. The checkpoint's
//! position stays before the source transaction (a GTID position cannot name a point inside
//! one); this names the point inside it: the changes before `next_change` (counted as the
//! source hands them out, over the whole transaction) are committed, with their records
//! numbered up to `records`. A new owner replays the transaction from its start and publishes
//! only the changes from `next_change` on, numbered from `records` on.

use capstan_core::change::TransactionGtid;
use capstan_core::position::{Flavor, Position};
use serde::{Deserialize, Serialize};

use crate::record::TransactionProgress;

/// A point inside a source transaction published in slices (see the module documentation).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WithinTransaction {
    /// The transaction's GTID, as the flavour writes it.
    pub gtid: String,
    /// The index of its first change not committed yet (in the whole transaction, as the
    /// source hands its changes out: after the capture list is applied).
    pub next_change: u64,
    /// Where its records stand after the committed changes.
    pub records: TransactionProgress,
    /// A digest of the capture list the changes were counted under: the count depends on
    /// which tables are captured, so a new owner whose list differs cannot trust it.
    pub capture: String,
}

impl WithinTransaction {
    /// The transaction's GTID in `flavor`; `None` when the text is not one (a record written
    /// by no capstan).
    pub fn transaction(&self, flavor: Flavor) -> Option<TransactionGtid> {
        TransactionGtid::parse(flavor, &self.gtid).ok()
    }

    /// True when `position` holds the whole transaction.
    pub fn is_completed_in(&self, position: &Position) -> bool {
        self.transaction(position.flavor())
            .is_some_and(|gtid| gtid.is_covered_by(position))
    }

    /// True when `self` is at or past `other`: the same transaction, at least as far in.
    pub fn is_at_or_past(&self, other: &WithinTransaction) -> bool {
        self.gtid == other.gtid && self.next_change >= other.next_change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(gtid: &str, next: u64) -> WithinTransaction {
        WithinTransaction {
            gtid: gtid.into(),
            next_change: next,
            records: TransactionProgress::default(),
            capture: "c".into(),
        }
    }

    #[test]
    fn completion_and_order() {
        let pos = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        assert!(within("0-1-5", 10).is_completed_in(&pos("0-1-5")));
        assert!(!within("0-1-6", 10).is_completed_in(&pos("0-1-5")));
        // garbage is never completed
        assert!(!within("x", 10).is_completed_in(&pos("0-1-5")));
        assert!(within("0-1-6", 10).is_at_or_past(&within("0-1-6", 10)));
        assert!(within("0-1-6", 11).is_at_or_past(&within("0-1-6", 10)));
        assert!(!within("0-1-6", 9).is_at_or_past(&within("0-1-6", 10)));
        assert!(!within("0-1-7", 99).is_at_or_past(&within("0-1-6", 10)));
    }

    #[test]
    fn round_trips_as_json() {
        let w = within("0-1-6", 10);
        let text = serde_json::to_string(&w).unwrap();
        assert_eq!(serde_json::from_str::<WithinTransaction>(&text).unwrap(), w);
    }
}
