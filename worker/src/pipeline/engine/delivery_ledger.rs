//! [`DeliveryLedger`]: the runner's decisions about what Kafka holds durably and when the
//! checkpoint moves — pure (no I/O, no clock of its own), driven by events, answering with
//! [`LedgerAction`]s the runner executes.
//!
//! # The rule it keeps
//!
//! The checkpoint committed to Raft never covers a transaction whose records Kafka has not
//! acknowledged (exactly-once: committed). Three states stand between a batch and the
//! checkpoint:
//!
//! - **in flight** (at-least-once): enqueued, its acknowledgements not yet awaited. It becomes
//!   durable when the next batch has been enqueued behind it (the sink awaits it then), or when
//!   the runner settles it because nothing else is waiting;
//! - **inside a transaction** handed out in slices: its parts are published and acknowledged,
//!   but the checkpoint may not move into the transaction; only its last part moves it;
//! - **durable**: acknowledged up to the batch's resume point.
//!
//! A checkpoint is due after [`CHECKPOINT_EVERY_TX`] transactions or [`CHECKPOINT_EVERY`] since
//! the last one, whichever first, and is committed only when it says more than the last.

use std::time::{Duration, Instant};

use capstan_core::position::ResumePoint;

/// Commit the checkpoint after this many transactions…
pub const CHECKPOINT_EVERY_TX: u64 = 1_000;
/// …or after this long, whichever comes first.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// How a delivered batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// Published and acknowledged (exactly-once: committed) up to the batch's resume point;
    /// so is every batch before it.
    Durable,
    /// Inside a transaction handed out in slices: its records so far are published, and the
    /// checkpoint may not move until its last part is (every batch before it is durable).
    InsideTransaction,
    /// Enqueued, at-least-once: every batch before it is acknowledged; its own
    /// acknowledgements are awaited behind the next batch or when the runner settles it.
    InFlight {
        /// When the newest of its transactions committed on the source (for the lag).
        committed_at_micros: Option<u64>,
    },
}

/// What the runner is to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerAction {
    /// Await the acknowledgements of the batch in flight, then report
    /// [`DeliveryLedger::settled`].
    Settle,
    /// The newest transaction now acknowledged committed on the source at this time: the
    /// commit-to-acknowledgement lag.
    RecordLag {
        /// Its source commit time, µs since the epoch.
        committed_at_micros: u64,
    },
    /// Commit this checkpoint to Raft, then report [`DeliveryLedger::committed`].
    CommitCheckpoint(ResumePoint),
}

/// The batch in flight: its resume point, the transactions delivered up to its end, and its
/// newest source commit time.
#[derive(Debug, Clone)]
struct InFlight {
    point: ResumePoint,
    count: u64,
    committed_at_micros: Option<u64>,
}

/// What Kafka holds, what Raft holds, and when the next checkpoint is due.
///
/// Transactions are counted from the start of the ledger: delivered, durable (acknowledged and
/// outside a sliced transaction) and committed; a checkpoint is due by the durable ones not
/// yet committed, so a batch settled after a commit is committed in turn.
#[derive(Debug)]
pub struct DeliveryLedger {
    /// The last checkpoint Raft accepted, and the transactions it covers.
    committed: ResumePoint,
    committed_count: u64,
    /// Everything up to here is acknowledged by Kafka.
    durable: ResumePoint,
    durable_count: u64,
    in_flight: Option<InFlight>,
    delivered_count: u64,
    last_commit: Instant,
}

impl DeliveryLedger {
    /// A ledger whose checkpoint, and durable point, is `start`, as of `now`.
    pub fn new(start: ResumePoint, now: Instant) -> Self {
        DeliveryLedger {
            committed: start.clone(),
            committed_count: 0,
            durable: start,
            durable_count: 0,
            in_flight: None,
            delivered_count: 0,
            last_commit: now,
        }
    }

    /// A batch of `transactions` source outputs ending at `point` was delivered as `outcome`.
    pub fn delivered(
        &mut self,
        point: ResumePoint,
        transactions: u64,
        outcome: Delivered,
    ) -> Vec<LedgerAction> {
        self.delivered_count += transactions;
        let mut actions = Vec::new();
        match outcome {
            // every batch before it was awaited too
            Delivered::Durable => {
                self.durable = point;
                self.durable_count = self.delivered_count;
                self.in_flight = None;
            }
            // the parts before it, and the batch in flight before those, are acknowledged;
            // the checkpoint stays before the transaction
            Delivered::InsideTransaction => {
                if let Some(before) = self.in_flight.take() {
                    self.settle(before, &mut actions);
                }
            }
            // the batch in flight before it was awaited when this one was enqueued
            Delivered::InFlight {
                committed_at_micros,
            } => {
                let now_in_flight = InFlight {
                    point,
                    count: self.delivered_count,
                    committed_at_micros,
                };
                if let Some(before) = self.in_flight.replace(now_in_flight) {
                    self.settle(before, &mut actions);
                }
            }
        }
        actions
    }

    /// The runner has nothing more to deliver for now (`backlog`: outputs are already
    /// waiting): settle the batch in flight when nothing waits behind it (rather than with a
    /// batch that may be long in coming), else commit the checkpoint when one is due.
    pub fn idle(&mut self, backlog: bool, now: Instant) -> Vec<LedgerAction> {
        if self.in_flight.is_some() && !backlog {
            return vec![LedgerAction::Settle];
        }
        self.checkpoint_if_due(now).into_iter().collect()
    }

    /// The batch in flight is acknowledged.
    pub fn settled(&mut self, now: Instant) -> Vec<LedgerAction> {
        let mut actions = Vec::new();
        if let Some(before) = self.in_flight.take() {
            self.settle(before, &mut actions);
        }
        actions.extend(self.checkpoint_if_due(now));
        actions
    }

    /// The runner is asked to stop: settle the batch in flight, then commit everything
    /// acknowledged, due or not, so the next owner (a move, a restart) resumes where this one
    /// stopped instead of replaying what it published since its last checkpoint. Asked again
    /// after each action is carried out; nothing left to do once it answers none.
    pub fn closing(&mut self) -> Vec<LedgerAction> {
        if self.in_flight.is_some() {
            return vec![LedgerAction::Settle];
        }
        if self.durable != self.committed {
            return vec![LedgerAction::CommitCheckpoint(self.durable.clone())];
        }
        Vec::new()
    }

    /// Raft accepted `point` as the checkpoint at `now`.
    pub fn committed_at(&mut self, point: ResumePoint, now: Instant) {
        if point == self.durable {
            self.committed_count = self.durable_count;
        }
        self.committed = point;
        self.last_commit = now;
    }

    /// A batch that was in flight is acknowledged.
    fn settle(&mut self, batch: InFlight, actions: &mut Vec<LedgerAction>) {
        self.durable = batch.point;
        self.durable_count = batch.count;
        actions.extend(lag(batch.committed_at_micros));
    }

    fn checkpoint_if_due(&self, now: Instant) -> Option<LedgerAction> {
        let pending = self.durable_count.saturating_sub(self.committed_count);
        let due = pending >= CHECKPOINT_EVERY_TX
            || (pending > 0 && now.saturating_duration_since(self.last_commit) >= CHECKPOINT_EVERY);
        (due && self.durable != self.committed)
            .then(|| LedgerAction::CommitCheckpoint(self.durable.clone()))
    }
}

fn lag(committed_at_micros: Option<u64>) -> Option<LedgerAction> {
    committed_at_micros.map(|committed_at_micros| LedgerAction::RecordLag {
        committed_at_micros,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_core::position::{Flavor, Position};

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    /// The point after transaction `n` (MySQL, one server).
    fn at(n: u64) -> ResumePoint {
        let text = if n == 0 {
            String::new()
        } else {
            format!("{A}:1-{n}")
        };
        ResumePoint::at(Position::parse(Flavor::Mysql, &text).unwrap())
    }

    fn in_flight(micros: u64) -> Delivered {
        Delivered::InFlight {
            committed_at_micros: Some(micros),
        }
    }

    fn commit(n: u64) -> LedgerAction {
        LedgerAction::CommitCheckpoint(at(n))
    }

    /// A ledger at transaction 0 and the instant it started.
    fn start() -> (DeliveryLedger, Instant) {
        let t0 = Instant::now();
        (DeliveryLedger::new(at(0), t0), t0)
    }

    const LATER: Duration = CHECKPOINT_EVERY;

    #[test]
    fn a_batch_in_flight_is_never_checkpointed() {
        let (mut l, t0) = start();
        assert_eq!(l.delivered(at(10), 10, in_flight(1)), vec![]);
        // due by time, but the only batch is in flight and more is waiting: no commit
        assert_eq!(l.idle(true, t0 + LATER), vec![]);
        assert_eq!(&l.durable, &at(0));
        // the next batch enqueued behind it: the first is acknowledged, its lag recorded
        assert_eq!(
            l.delivered(at(20), 10, in_flight(2)),
            vec![LedgerAction::RecordLag {
                committed_at_micros: 1
            }]
        );
        assert_eq!(l.idle(true, t0 + LATER), vec![commit(10)]);
        l.committed_at(at(10), t0 + LATER);
        assert_eq!(&l.committed, &at(10));
        // nothing waits behind the second: settle it, then it is committed in turn, though
        // its transactions were delivered before the last commit (the count that makes a
        // checkpoint due is of durable transactions, not of delivered ones)
        assert_eq!(l.idle(false, t0 + LATER), vec![LedgerAction::Settle]);
        assert_eq!(
            l.settled(t0 + LATER * 2),
            vec![
                LedgerAction::RecordLag {
                    committed_at_micros: 2
                },
                commit(20)
            ]
        );
    }

    #[test]
    fn a_sliced_transaction_holds_the_checkpoint_before_it_until_its_last_part() {
        let (mut l, t0) = start();
        // batch 1 in flight, then the first part of transaction 11 (in slices)
        l.delivered(at(10), 10, in_flight(1));
        assert_eq!(
            l.delivered(at(10), 1, Delivered::InsideTransaction),
            vec![LedgerAction::RecordLag {
                committed_at_micros: 1
            }]
        );
        // the part awaited batch 1: durable at 10, and the checkpoint may go there, not further
        assert_eq!(&l.durable, &at(10));
        assert!(l.in_flight.is_none());
        assert_eq!(l.idle(false, t0 + LATER), vec![commit(10)]);
        l.committed_at(at(10), t0 + LATER);
        // more parts, past every deadline and count: nothing to commit inside it
        for _ in 0..CHECKPOINT_EVERY_TX {
            l.delivered(at(10), 1, Delivered::InsideTransaction);
        }
        assert_eq!(l.idle(false, t0 + LATER * 10), vec![]);
        // the last part: the checkpoint passes the whole transaction
        l.delivered(at(11), 1, Delivered::Durable);
        assert_eq!(l.idle(false, t0 + LATER * 10), vec![commit(11)]);
    }

    #[test]
    fn a_checkpoint_is_due_by_count_or_by_time() {
        let (mut l, t0) = start();
        // one short of the count, before the deadline: not due
        l.delivered(at(999), CHECKPOINT_EVERY_TX - 1, Delivered::Durable);
        assert_eq!(l.idle(false, t0 + LATER / 2), vec![]);
        // the count reached: due at once
        l.delivered(at(1000), 1, Delivered::Durable);
        assert_eq!(l.idle(false, t0 + LATER / 2), vec![commit(1000)]);
        l.committed_at(at(1000), t0 + LATER / 2);
        // one transaction: due when the interval has passed since the last commit
        l.delivered(at(1001), 1, Delivered::Durable);
        assert_eq!(l.idle(false, t0 + LATER), vec![]);
        assert_eq!(l.idle(false, t0 + LATER / 2 + LATER), vec![commit(1001)]);
    }

    #[test]
    fn closing_settles_then_commits_what_was_acknowledged_due_or_not() {
        let (mut l, t0) = start();
        // one transaction acknowledged and not due (last commit just now), one in flight
        assert!(l.delivered(at(1), 1, Delivered::Durable).is_empty());
        assert!(l.delivered(at(2), 1, in_flight(9)).is_empty());
        assert_eq!(l.closing(), vec![LedgerAction::Settle]);
        // settled at once: not due by time or count
        assert_eq!(
            l.settled(t0),
            vec![LedgerAction::RecordLag {
                committed_at_micros: 9
            }]
        );
        assert_eq!(l.closing(), vec![commit(2)]);
        l.committed_at(at(2), t0);
        assert_eq!(l.closing(), vec![]);
        // nothing delivered since the last checkpoint: nothing to do
        let (mut fresh, _) = start();
        assert_eq!(fresh.closing(), vec![]);
    }

    #[test]
    fn closing_inside_a_sliced_transaction_commits_only_before_it() {
        let (mut l, t0) = start();
        assert!(l.delivered(at(1), 1, Delivered::Durable).is_empty());
        assert!(l
            .delivered(at(2), 0, Delivered::InsideTransaction)
            .is_empty());
        assert_eq!(l.closing(), vec![commit(1)]);
        l.committed_at(at(1), t0);
        assert_eq!(l.closing(), vec![]);
    }

    #[test]
    fn nothing_delivered_nothing_committed() {
        let (mut l, t0) = start();
        assert_eq!(l.idle(false, t0 + LATER * 100), vec![]);
        // a batch of filtered transactions (no records) moves the checkpoint all the same
        l.delivered(at(5), 5, Delivered::Durable);
        assert_eq!(l.idle(false, t0 + LATER), vec![commit(5)]);
    }

    #[test]
    fn a_commit_not_accepted_is_asked_again_and_not_duplicated_once_it_is() {
        let (mut l, t0) = start();
        l.delivered(at(3), 3, Delivered::Durable);
        assert_eq!(l.idle(false, t0 + LATER), vec![commit(3)]);
        // the runner did not report it committed (a retried Raft write): still due
        assert_eq!(l.idle(false, t0 + LATER), vec![commit(3)]);
        l.committed_at(at(3), t0 + LATER);
        assert_eq!(l.idle(false, t0 + LATER * 3), vec![]);
    }

    #[test]
    fn a_durable_batch_supersedes_the_one_in_flight() {
        // exactly-once or a snapshot's publish awaits everything before it
        let (mut l, t0) = start();
        l.delivered(at(4), 4, in_flight(1));
        assert_eq!(l.delivered(at(6), 2, Delivered::Durable), vec![]);
        assert!(l.in_flight.is_none());
        assert_eq!(l.idle(false, t0 + LATER), vec![commit(6)]);
    }

    #[test]
    fn the_processed_position_travels_with_the_checkpoint() {
        let maria = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        let t0 = Instant::now();
        let mut l = DeliveryLedger::new(ResumePoint::at(maria("0-1-10")), t0);
        // a prepare at 11 holds the checkpoint back while 12 and 13 are handed out
        let held = ResumePoint::new(maria("0-1-10"), Some(maria("0-1-13"))).unwrap();
        l.delivered(held.clone(), 3, Delivered::Durable);
        assert_eq!(
            l.idle(false, t0 + LATER),
            vec![LedgerAction::CommitCheckpoint(held)]
        );
    }
}
