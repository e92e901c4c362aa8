//! One committed transaction.

use std::fmt;

use super::change::Change;
use crate::position::{Gtid, MariadbGtid};

/// The GTID that identifies a committed transaction, in its server flavour.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TransactionGtid {
    /// A MySQL GTID (`uuid[:tag]:gno`).
    Mysql(Gtid),
    /// A MariaDB GTID (`domain-server-seq`).
    Mariadb(MariadbGtid),
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
    /// True when some row events of this transaction were dropped by the table filter.
    pub partially_filtered: bool,
    /// Further GTIDs that processing this transaction covers besides `gtid`: the XA PREPARE
    /// of a two-phase XA transaction delivered at its XA COMMIT (`gtid`). Empty otherwise.
    pub also_covers: Vec<TransactionGtid>,
}

impl fmt::Debug for Transaction {
    /// Structure only: GTID, commit time, change count (the changes themselves are omitted;
    /// their Debug is redacted anyway, but a large transaction would flood a log line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("gtid", &self.gtid.to_string())
            .field("committed_at_micros", &self.committed_at_micros)
            .field("changes", &self.changes.len())
            .field("partially_filtered", &self.partially_filtered)
            .field("also_covers", &self.also_covers.len())
            .finish()
    }
}
