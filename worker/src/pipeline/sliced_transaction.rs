//! [`SlicedTransaction`]: the runner's account of a transaction the source hands out in
//! slices (one larger than the assembler's slice budget). Pure.
//!
//! A slice's changes are published as they come; the checkpoint moves only past the
//! transaction's last part. When the source's stream drops mid-transaction it replays the
//! transaction from its first change: the changes already handed on are cut from the replayed
//! parts, so nothing is published twice by the same runner. The record numbering
//! (`capstan.record`, the `transaction` block) goes on across parts.
//!
//! Exactly-once commits each slice with a checkpoint naming the point inside the transaction
//! ([`WithinTransaction`]); a new owner starts from an account [`SlicedTransaction::resumed`]
//! at that point, so the replay is cut there too, across owners. Along one history the
//! transaction is the first the source hands out after the checkpoint; another one first
//! means the checkpoint is not this history's, and the runner halts rather than guess.

use capstan_connectors::mysql::AssemblerOutput;
use capstan_core::change::TransactionGtid;
use capstan_core::position::Flavor;
use capstan_kafka::exactly_once::WithinTransaction;
use capstan_kafka::record::TransactionProgress;

/// The transaction being handed out in slices, as far as it was handed on.
#[derive(Debug)]
pub struct SlicedTransaction {
    gtid: TransactionGtid,
    /// Index (in the whole transaction, before gating) of the first change not handed on yet.
    next_change: u64,
    /// Where its records stand.
    pub records: TransactionProgress,
    /// Taken from a checkpoint inside the transaction, and no part of it admitted yet: the
    /// source's next transaction must be this one.
    resumed: bool,
}

/// A checkpoint inside a transaction, and the source handed out another one first (or the
/// checkpoint names no transaction of the source's flavour).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the checkpoint is inside transaction {expected}, but the source handed out {found} first")]
pub struct NotResumable {
    /// The transaction the checkpoint is inside.
    pub expected: String,
    /// What came first instead.
    pub found: String,
}

impl NotResumable {
    /// A stable code (a definite halt: the checkpoint is not this history's).
    pub fn code(&self) -> &'static str {
        "checkpoint_inside_unknown_transaction"
    }
}

impl SlicedTransaction {
    /// The account of a transaction a checkpoint is inside: its first `next_change` changes
    /// and their records are committed.
    pub fn resumed(within: &WithinTransaction, flavor: Flavor) -> Result<Self, NotResumable> {
        let gtid = within.transaction(flavor).ok_or_else(|| NotResumable {
            expected: within.gtid.clone(),
            found: "no transaction of this flavour".into(),
        })?;
        Ok(SlicedTransaction {
            gtid,
            next_change: within.next_change,
            records: within.records.clone(),
            resumed: true,
        })
    }

    /// The point inside the transaction after what was handed on, for a checkpoint; `capture`
    /// digests the capture list the changes were counted under.
    pub fn within(&self, capture: &str) -> WithinTransaction {
        WithinTransaction {
            gtid: self.gtid.to_string(),
            next_change: self.next_change,
            records: self.records.clone(),
            capture: capture.to_string(),
        }
    }

    /// Takes the next output of the source and gives it back trimmed to what was not handed
    /// on yet. `open` is the sliced transaction in flight, if any: opened by a first slice
    /// (or resumed from a checkpoint), kept while its last part (a `Transaction` of the same
    /// GTID) is handled; the caller closes it (sets it to `None`) once the last part's records
    /// are built. A resumed account refuses any other output before its transaction.
    pub fn admit(
        open: &mut Option<SlicedTransaction>,
        output: AssemblerOutput,
    ) -> Result<AssemblerOutput, NotResumable> {
        let (mut tx, last) = match output {
            AssemblerOutput::Slice(tx) => (tx, false),
            AssemblerOutput::Transaction(tx)
                if open.as_ref().is_some_and(|s| s.gtid == tx.gtid) =>
            {
                (tx, true)
            }
            other => {
                if let Some(s) = open.as_ref().filter(|s| s.resumed) {
                    return Err(NotResumable {
                        expected: s.gtid.to_string(),
                        found: describe(&other),
                    });
                }
                // a whole output ends any account of another transaction (a source that
                // moved on can only have completed or abandoned it)
                *open = None;
                return Ok(other);
            }
        };
        let end = tx.first_change + tx.changes.len() as u64;
        match open {
            Some(s) if s.gtid == tx.gtid => {
                let handed_on = s.next_change.saturating_sub(tx.first_change);
                let cut = usize::try_from(handed_on)
                    .unwrap_or(usize::MAX)
                    .min(tx.changes.len());
                tx.changes.drain(..cut);
                tx.first_change += cut as u64;
                s.next_change = s.next_change.max(end);
                s.resumed = false;
            }
            Some(s) if s.resumed => {
                return Err(NotResumable {
                    expected: s.gtid.to_string(),
                    found: tx.gtid.to_string(),
                })
            }
            _ => {
                *open = Some(SlicedTransaction {
                    gtid: tx.gtid.clone(),
                    next_change: end,
                    records: TransactionProgress::default(),
                    resumed: false,
                });
            }
        }
        Ok(if last {
            AssemblerOutput::Transaction(tx)
        } else {
            AssemblerOutput::Slice(tx)
        })
    }
}

/// What an output is, value-free (GTIDs only).
fn describe(output: &AssemblerOutput) -> String {
    match output {
        AssemblerOutput::Transaction(tx) | AssemblerOutput::Slice(tx) => tx.gtid.to_string(),
        AssemblerOutput::PositionAdvanced { gtid, .. } => format!("{gtid} (filtered)"),
        AssemblerOutput::SchemaChange { gtid, .. } => format!("{gtid} (ddl)"),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use capstan_core::change::{Change, Op, Row, TableId, Transaction, Value};

    use super::*;

    fn gtid(gno: u64) -> TransactionGtid {
        TransactionGtid::Mysql(
            format!("3e11fa47-71ca-11e1-9e33-c80aa9429562:{gno}")
                .parse()
                .unwrap(),
        )
    }

    /// Part of transaction `gno` (committed at 5 s): inserts of `ids` into `db.t`, the first
    /// of them change `first` of the transaction.
    pub(in crate::pipeline) fn part(
        gno: u64,
        first: u64,
        ids: std::ops::Range<i64>,
    ) -> Transaction {
        let table = Arc::new(TableId::new("db", "t"));
        let columns: Arc<[String]> = Arc::from(vec!["id".to_string()]);
        Transaction {
            gtid: gtid(gno),
            committed_at_micros: 5_000_000,
            changes: ids
                .map(|id| Change {
                    table: table.clone(),
                    op: Op::Insert,
                    before: None,
                    after: Some(Row::new(columns.clone(), vec![Value::Int(id)]).unwrap()),
                    key: Arc::from(vec![0usize]),
                    types: None,
                })
                .collect(),
            partially_filtered: false,
            first_change: first,
            also_covers: Vec::new(),
            origin: Default::default(),
        }
    }

    fn ids(p: &AssemblerOutput) -> (Vec<i64>, u64, bool) {
        let (part, last) = match p {
            AssemblerOutput::Slice(t) => (t, false),
            AssemblerOutput::Transaction(t) => (t, true),
            other => panic!("not a part: {other:?}"),
        };
        let ids = part
            .changes
            .iter()
            .map(|c| match c.after.as_ref().unwrap().values()[0] {
                Value::Int(i) => i,
                _ => unreachable!(),
            })
            .collect();
        (ids, part.first_change, last)
    }

    #[test]
    fn slices_then_the_last_part_pass_as_they_are() {
        let mut open = None;
        let a =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 0, 0..3))).unwrap();
        assert_eq!(ids(&a), (vec![0, 1, 2], 0, false));
        let b =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 3, 3..5))).unwrap();
        assert_eq!(ids(&b), (vec![3, 4], 3, false));
        let c = SlicedTransaction::admit(&mut open, AssemblerOutput::Transaction(part(5, 5, 5..6)))
            .unwrap();
        assert_eq!(ids(&c), (vec![5], 5, true));
        assert!(
            open.is_some(),
            "closed by the caller once its records are built"
        );
    }

    #[test]
    fn a_replay_after_a_dropped_stream_is_cut_to_what_was_not_handed_on() {
        let mut open = None;
        SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 0, 0..3))).unwrap();
        SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 3, 3..6))).unwrap();
        // the stream dropped; the source replays the transaction from its start, cut at
        // other places
        let a =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 0, 0..4))).unwrap();
        assert_eq!(ids(&a), (vec![], 4, false));
        let b =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 4, 4..8))).unwrap();
        assert_eq!(ids(&b), (vec![6, 7], 6, false));
        let c =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Transaction(part(5, 8, 8..10)))
                .unwrap();
        assert_eq!(ids(&c), (vec![8, 9], 8, true));
    }

    #[test]
    fn an_unsliced_transaction_is_whole() {
        let mut open = None;
        let whole = AssemblerOutput::Transaction(part(7, 0, 0..2));
        assert_eq!(
            SlicedTransaction::admit(&mut open, whole.clone()).unwrap(),
            whole
        );
        assert!(open.is_none());
        // another transaction's whole output ends a stale account
        SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(8, 0, 0..2))).unwrap();
        let other = AssemblerOutput::Transaction(part(9, 0, 0..1));
        assert_eq!(
            SlicedTransaction::admit(&mut open, other.clone()).unwrap(),
            other
        );
        assert!(open.is_none());
    }

    fn within(gno: u64, next_change: u64) -> WithinTransaction {
        WithinTransaction {
            gtid: gtid(gno).to_string(),
            next_change,
            records: TransactionProgress::default(),
            capture: "c".into(),
        }
    }

    #[test]
    fn a_resumed_account_cuts_the_replay_at_the_checkpoint() {
        let mut open = Some(SlicedTransaction::resumed(&within(5, 4), Flavor::Mysql).unwrap());
        // the new owner's source replays the transaction from its start, sliced elsewhere
        let a =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 0, 0..3))).unwrap();
        assert_eq!(ids(&a), (vec![], 3, false));
        let b =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 3, 3..6))).unwrap();
        assert_eq!(ids(&b), (vec![4, 5], 4, false));
        assert_eq!(open.as_ref().unwrap().within("c"), within(5, 6));
        let c = SlicedTransaction::admit(&mut open, AssemblerOutput::Transaction(part(5, 6, 6..7)))
            .unwrap();
        assert_eq!(ids(&c), (vec![6], 6, true));
        // whole (the new owner's slice budget is larger): cut all the same
        let mut open = Some(SlicedTransaction::resumed(&within(5, 4), Flavor::Mysql).unwrap());
        let whole =
            SlicedTransaction::admit(&mut open, AssemblerOutput::Transaction(part(5, 0, 0..6)))
                .unwrap();
        assert_eq!(ids(&whole), (vec![4, 5], 4, true));
    }

    #[test]
    fn a_resumed_account_refuses_another_transaction_first() {
        for first in [
            AssemblerOutput::Slice(part(6, 0, 0..3)),
            AssemblerOutput::Transaction(part(6, 0, 0..3)),
            AssemblerOutput::PositionAdvanced {
                gtid: gtid(6),
                also_covers: Vec::new(),
            },
        ] {
            let mut open = Some(SlicedTransaction::resumed(&within(5, 4), Flavor::Mysql).unwrap());
            let e = SlicedTransaction::admit(&mut open, first).unwrap_err();
            assert_eq!(e.code(), "checkpoint_inside_unknown_transaction");
            assert_eq!(e.expected, gtid(5).to_string());
            assert!(e.found.starts_with(&gtid(6).to_string()), "{e}");
        }
        // once a part of it came, the account is an ordinary one again
        let mut open = Some(SlicedTransaction::resumed(&within(5, 4), Flavor::Mysql).unwrap());
        SlicedTransaction::admit(&mut open, AssemblerOutput::Slice(part(5, 0, 0..5))).unwrap();
        let other = AssemblerOutput::Transaction(part(6, 0, 0..1));
        assert_eq!(
            SlicedTransaction::admit(&mut open, other.clone()).unwrap(),
            other
        );
        // a checkpoint of the other flavour names no transaction here
        assert!(SlicedTransaction::resumed(&within(5, 4), Flavor::Mariadb).is_err());
    }
}
