//! When this node received the log entry of each worker's latest applied lease renewal
//! (ADR-0004, decision 2).
//!
//! The lease tracker dates a renewal by when this node *received* its log entry, not by when it
//! applied it. Both come after the renewal was sent, so either keeps the safety argument (the
//! owner's own lease, counted from the send, ends first); but an entry can be received long
//! before it is applied: the last renewal of a leader that dies is applied by its followers
//! only once a new leader has been elected and has committed an entry of its own. Dated by its
//! application, the dead leader looked younger by a whole election, and its pipelines moved
//! that much later (one failover of ten leader kills took election + lease).
//!
//! Pure: the caller passes `now`. The log store reports appends and truncations, the state
//! machine applications; only `RenewLease` entries are kept, and only until they are applied
//! or truncated away, so the map holds no more than the renewals in the unapplied log.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::type_config::{LogId, NodeId};

/// Bound on renewals received and not yet applied: a safety net, as applying removes them.
const MAX_PENDING: usize = 100_000;

/// Receipt times of renewal entries, and of each worker's latest applied renewal.
#[derive(Debug, Default)]
pub struct RenewalReceipts {
    /// Renewal entries received and not yet applied, by log index.
    pending: BTreeMap<u64, (LogId, Instant)>,
    /// When this node received the entry of each worker's latest applied renewal.
    received: BTreeMap<NodeId, Instant>,
}

impl RenewalReceipts {
    /// The log store appended a `RenewLease` entry at `now`. An entry appended again at the
    /// same index (after a truncation) replaces the former one.
    pub fn appended(&mut self, log_id: LogId, now: Instant) {
        self.pending.insert(log_id.index, (log_id, now));
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_first();
        }
    }

    /// The log store removed every entry from `index` on (a conflicting suffix).
    pub fn truncated(&mut self, index: u64) {
        self.pending.split_off(&index);
    }

    /// The state machine applied `node`'s renewal of entry `log_id` at `now`. Its receipt
    /// time is the append's when this node appended exactly that entry, else `now` (an entry
    /// this node did not see arrive: one from before a restart).
    pub fn applied(&mut self, log_id: LogId, node: NodeId, now: Instant) {
        let received = match self.pending.get(&log_id.index) {
            Some(&(appended, at)) if appended == log_id => at.min(now),
            _ => now,
        };
        self.received.insert(node, received);
        // entries up to this one are applied (or were replaced): forget them
        self.pending = self.pending.split_off(&(log_id.index + 1));
    }

    /// When each worker's latest applied renewal was received.
    pub fn received(&self) -> &BTreeMap<NodeId, Instant> {
        &self.received
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openraft::CommittedLeaderId;

    use super::*;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn a_renewal_is_dated_by_its_receipt_not_its_application() {
        let t0 = Instant::now();
        let mut r = RenewalReceipts::default();
        r.appended(log_id(1, 7), t0);
        // applied only after an election, 400 ms later
        r.applied(log_id(1, 7), 3, t0 + Duration::from_millis(400));
        assert_eq!(r.received().get(&3), Some(&t0));
        assert!(r.pending.is_empty());
    }

    #[test]
    fn an_entry_replaced_after_a_truncation_takes_the_new_receipt() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(300);
        let mut r = RenewalReceipts::default();
        r.appended(log_id(1, 7), t0);
        r.truncated(7);
        r.appended(log_id(2, 7), t1);
        r.applied(log_id(2, 7), 2, t1 + Duration::from_millis(5));
        assert_eq!(r.received().get(&2), Some(&t1));
    }

    #[test]
    fn an_entry_not_seen_arriving_is_dated_by_its_application() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(50);
        let mut r = RenewalReceipts::default();
        // appended under another leader's term than the one applied (replaced without a
        // truncation being reported), and one never appended here (before a restart)
        r.appended(log_id(1, 7), t0);
        r.applied(log_id(2, 7), 1, later);
        r.applied(log_id(2, 9), 2, later);
        assert_eq!(r.received().get(&1), Some(&later));
        assert_eq!(r.received().get(&2), Some(&later));
    }

    #[test]
    fn applying_forgets_earlier_entries_and_keeps_later_ones() {
        let t0 = Instant::now();
        let mut r = RenewalReceipts::default();
        for i in 1..=5 {
            r.appended(log_id(1, i), t0 + Duration::from_millis(i));
        }
        r.applied(log_id(1, 3), 1, t0 + Duration::from_millis(10));
        assert_eq!(r.pending.keys().copied().collect::<Vec<_>>(), vec![4, 5]);
        r.truncated(5);
        assert_eq!(r.pending.keys().copied().collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn pending_receipts_are_bounded() {
        let t0 = Instant::now();
        let mut r = RenewalReceipts::default();
        for i in 0..(MAX_PENDING as u64 + 10) {
            r.appended(log_id(1, i), t0);
        }
        assert_eq!(r.pending.len(), MAX_PENDING);
        assert_eq!(r.pending.keys().next(), Some(&10));
    }
}
