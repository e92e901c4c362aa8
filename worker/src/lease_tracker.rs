//! Worker liveness as each node sees it (see docs/adr/0004-worker-liveness.md).
//!
//! Every worker renews its lease every `lease / 10` through the leader, which notes the renewal
//! and relays it to every voter (or, while no leader can be reached, directly to the voters
//! that hear no leader either); each node notes, on its own monotonic clock, when it received
//! each worker's latest renewal ([`LeaseTracker::record`]). Renewals are held in memory, not
//! written to the Raft log. A worker is live while that moment is no older than
//! `lease + margin`. A node also follows the `RenewLease` commands it applies (a worker writes
//! one when it joins or returns after releasing its lease, and workers of an older version
//! renew that way), dated by when it received their log entries. It sees a renewal only after
//! it was sent, so its view is never ahead of the renewing worker's own lease clock. A node
//! that has just started has seen nothing and treats every member as live for one
//! `lease + margin`: it never moves a pipeline on evidence it has not had time to gather. The
//! leader moves a worker's pipelines only once a quorum of the voters agrees it expired
//! ([`crate::lease_quorum`]).
//!
//! Pure: the caller passes `now`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use capstan_raft_store::NodeId;

/// Last observed renewal of each worker.
#[derive(Debug)]
pub struct LeaseTracker {
    expiry: Duration,
    started: Instant,
    /// When each worker's latest renewal was received.
    seen: BTreeMap<NodeId, Instant>,
    /// The replicated `RenewLease` counter of each worker, as last observed.
    counts: BTreeMap<NodeId, u64>,
}

impl LeaseTracker {
    /// A tracker started at `now` whose leases expire after `expiry` (lease + margin).
    pub fn new(expiry: Duration, now: Instant) -> Self {
        LeaseTracker {
            expiry,
            started: now,
            seen: BTreeMap::new(),
            counts: BTreeMap::new(),
        }
    }

    /// A renewal of `node` was received at `at` (a relay from the leader, a direct renewal,
    /// or this node's own). An older receipt than one already noted changes nothing.
    pub fn record(&mut self, node: NodeId, at: Instant) {
        let seen = self.seen.entry(node).or_insert(at);
        *seen = (*seen).max(at);
    }

    /// Records the replicated renewal counters as of `now`. A counter that moved is dated by
    /// when this node received the entry of that worker's latest renewal (`received`, never
    /// later than `now`; `now` when unknown): after the renewal's send, so still behind the
    /// worker's own lease clock, but not delayed by an election that held back its
    /// application. `released` workers (shut down cleanly) are forgotten so they are not live.
    pub fn observe(
        &mut self,
        renewals: &BTreeMap<NodeId, u64>,
        received: &BTreeMap<NodeId, Instant>,
        released: &BTreeSet<NodeId>,
        now: Instant,
    ) {
        for (&node, &count) in renewals {
            if self.counts.insert(node, count) != Some(count) {
                let at = received.get(&node).map_or(now, |&r| r.min(now));
                self.record(node, at);
            }
        }
        for node in released {
            self.seen.remove(node);
        }
    }

    /// The earliest instant after `now` at which [`LeaseTracker::live`] may change without a
    /// new observation: when the oldest still-live lease, or the start-up grace, runs out. The
    /// scheduler sleeps until then instead of polling.
    pub fn next_change(&self, now: Instant) -> Option<Instant> {
        let grace_end = self.started + self.expiry;
        self.seen
            .values()
            .map(|&at| at + self.expiry)
            .chain(std::iter::once(grace_end))
            .filter(|&t| t >= now)
            .min()
            // `live` keeps a lease through `at + expiry` inclusive
            .map(|t| t + Duration::from_millis(1))
    }

    /// The members whose lease is live at `now`. `released` workers are never live.
    pub fn live(
        &self,
        members: impl IntoIterator<Item = NodeId>,
        released: &BTreeSet<NodeId>,
        now: Instant,
    ) -> BTreeSet<NodeId> {
        let in_grace = now.saturating_duration_since(self.started) <= self.expiry;
        members
            .into_iter()
            .filter(|n| !released.contains(n))
            .filter(|n| match self.seen.get(n) {
                Some(&at) => now.saturating_duration_since(at) <= self.expiry,
                None => in_grace,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPIRY: Duration = Duration::from_millis(2000);

    fn counts(v: &[(NodeId, u64)]) -> BTreeMap<NodeId, u64> {
        v.iter().copied().collect()
    }

    fn no_receipts() -> BTreeMap<NodeId, Instant> {
        BTreeMap::new()
    }

    #[test]
    fn a_renewal_applied_late_is_dated_by_its_receipt() {
        // the last renewal of a leader that died reached this follower at t0, but was applied
        // only after the election, 400 ms later: the worker expires EXPIRY after t0
        let t0 = Instant::now();
        let none = BTreeSet::new();
        let ms = Duration::from_millis;
        let mut t = LeaseTracker::new(EXPIRY, t0 - EXPIRY - ms(1));
        let received: BTreeMap<NodeId, Instant> = [(1, t0)].into();
        t.observe(&counts(&[(1, 9)]), &received, &none, t0 + ms(400));
        assert_eq!(t.next_change(t0 + ms(400)), Some(t0 + EXPIRY + ms(1)));
        assert_eq!(t.live([1], &none, t0 + EXPIRY), [1].into());
        assert!(t.live([1], &none, t0 + EXPIRY + ms(1)).is_empty());
        // a receipt time after the observation (clocks read in another order) is capped
        let mut t = LeaseTracker::new(EXPIRY, t0 - EXPIRY - ms(1));
        let received: BTreeMap<NodeId, Instant> = [(1, t0 + ms(50))].into();
        t.observe(&counts(&[(1, 9)]), &received, &none, t0);
        assert!(t.live([1], &none, t0 + EXPIRY + ms(1)).is_empty());
    }

    #[test]
    fn a_renewal_received_in_memory_counts_and_an_older_one_changes_nothing() {
        let t0 = Instant::now();
        let none = BTreeSet::new();
        let ms = Duration::from_millis;
        let mut t = LeaseTracker::new(EXPIRY, t0 - EXPIRY - ms(1));
        t.record(1, t0);
        t.record(1, t0 - ms(500));
        assert_eq!(t.live([1, 2], &none, t0 + EXPIRY), [1].into());
        assert!(t.live([1], &none, t0 + EXPIRY + ms(1)).is_empty());
        // a counter observed later, dated by an older receipt, does not make it look older
        t.observe(&counts(&[(1, 1)]), &[(1, t0 - ms(100))].into(), &none, t0);
        assert_eq!(t.live([1], &none, t0 + EXPIRY), [1].into());
        // nor does a counter seen again unchanged make it younger
        t.observe(&counts(&[(1, 1)]), &no_receipts(), &none, t0 + ms(900));
        assert!(t.live([1], &none, t0 + EXPIRY + ms(1)).is_empty());
        // released: not live, whatever it renewed
        let released: BTreeSet<NodeId> = [1].into();
        t.record(1, t0 + ms(950));
        assert!(t.live([1], &released, t0 + ms(960)).is_empty());
    }

    #[test]
    fn a_worker_that_stops_renewing_expires() {
        let t0 = Instant::now();
        let none = BTreeSet::new();
        let mut t = LeaseTracker::new(EXPIRY, t0);
        t.observe(&counts(&[(1, 5), (2, 7)]), &no_receipts(), &none, t0);
        let t1 = t0 + Duration::from_millis(1500);
        t.observe(&counts(&[(1, 6), (2, 7)]), &no_receipts(), &none, t1);
        let t2 = t0 + Duration::from_millis(2100);
        assert_eq!(t.live([1, 2], &none, t2), [1].into());
        assert_eq!(
            t.live([1, 2], &none, t0 + Duration::from_millis(1900)),
            [1, 2].into()
        );
    }

    #[test]
    fn a_new_leader_grants_a_grace_period_to_unseen_members() {
        let t0 = Instant::now();
        let none = BTreeSet::new();
        let t = LeaseTracker::new(EXPIRY, t0);
        assert_eq!(t.live([1, 2, 3], &none, t0 + EXPIRY), [1, 2, 3].into());
        assert!(t
            .live([1, 2, 3], &none, t0 + EXPIRY + Duration::from_millis(1))
            .is_empty());
    }

    #[test]
    fn next_change_is_when_the_oldest_live_lease_or_the_grace_runs_out() {
        let t0 = Instant::now();
        let none = BTreeSet::new();
        let ms = Duration::from_millis;
        let mut t = LeaseTracker::new(EXPIRY, t0);
        assert_eq!(t.next_change(t0), Some(t0 + EXPIRY + ms(1)));
        t.observe(
            &counts(&[(1, 1), (2, 1)]),
            &no_receipts(),
            &none,
            t0 + ms(100),
        );
        t.observe(
            &counts(&[(1, 2), (2, 1)]),
            &no_receipts(),
            &none,
            t0 + ms(300),
        );
        // grace ends at 2000, node 2 at 2100, node 1 at 2300
        assert_eq!(t.next_change(t0 + ms(500)), Some(t0 + EXPIRY + ms(1)));
        let after_grace = t0 + EXPIRY + ms(1);
        assert_eq!(t.next_change(after_grace), Some(t0 + ms(2101)));
        assert_eq!(t.live([1, 2], &none, t0 + ms(2100)), [1, 2].into());
        assert_eq!(t.live([1, 2], &none, t0 + ms(2101)), [1].into());
        assert_eq!(t.next_change(t0 + ms(2101)), Some(t0 + ms(2301)));
        assert_eq!(t.next_change(t0 + ms(2301)), None);
    }

    #[test]
    fn released_workers_are_never_live() {
        let t0 = Instant::now();
        let mut t = LeaseTracker::new(EXPIRY, t0);
        let released: BTreeSet<NodeId> = [2].into();
        t.observe(&counts(&[(1, 1), (2, 1)]), &no_receipts(), &released, t0);
        assert_eq!(t.live([1, 2], &released, t0), [1].into());
    }
}
