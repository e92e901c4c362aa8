//! The owner's side of fencing: a worker may act as a pipeline owner (publish, commit) only
//! while it has reached a Raft quorum within its lease.
//!
//! The lease starts when a renewal is *sent*, and is confirmed when that renewal commits. The
//! leader starts its own expiry clock only when it sees the renewal applied, which is later, and
//! adds a margin; so an owner cut off from the quorum always stops before the leader may move
//! its pipelines (given clocks that run at similar rates, the standard lease assumption).
//!
//! A lease is held in *terms*: a term is one unbroken run of validity. A confirmation that
//! arrives when the lease has already run out starts a new term, even when the renewal was
//! sent in time: the leader may have expired this worker in the gap and moved its pipelines.
//! A runner is bound to the term it started in ([`OwnerLease::holds_term`]), so a worker that
//! was frozen or cut off and renews again afterwards does not revive what it ran before.
//!
//! Pure: the caller passes the instants.

use std::time::{Duration, Instant};

/// Whether this worker currently holds a valid lease.
#[derive(Debug, Clone)]
pub struct OwnerLease {
    lease: Duration,
    valid_from_send: Option<Instant>,
    term: u64,
}

impl OwnerLease {
    /// No lease yet.
    pub fn new(lease: Duration) -> Self {
        OwnerLease {
            lease,
            valid_from_send: None,
            term: 0,
        }
    }

    /// A renewal sent at `sent_at` was committed by a quorum, as learnt at `now`.
    pub fn confirmed(&mut self, sent_at: Instant, now: Instant) {
        if !self.is_valid(now) {
            self.term += 1;
        }
        if self.valid_from_send.is_none_or(|t| sent_at > t) {
            self.valid_from_send = Some(sent_at);
        }
    }

    /// The term of the lease held at `now`, if one is.
    pub fn term(&self, now: Instant) -> Option<u64> {
        self.is_valid(now).then_some(self.term)
    }

    /// True while the lease is valid at `now` and has been without a break since `term`.
    pub fn holds_term(&self, term: u64, now: Instant) -> bool {
        self.term(now) == Some(term)
    }

    /// True while `now` is within the lease of the latest confirmed renewal.
    pub fn is_valid(&self, now: Instant) -> bool {
        self.valid_from_send
            .is_some_and(|t| now.saturating_duration_since(t) < self.lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_runs_from_the_send_time() {
        let t0 = Instant::now();
        let mut l = OwnerLease::new(Duration::from_millis(1000));
        assert!(!l.is_valid(t0));
        l.confirmed(t0, t0);
        assert!(l.is_valid(t0 + Duration::from_millis(999)));
        assert!(!l.is_valid(t0 + Duration::from_millis(1000)));
        // a late confirmation of an older renewal does not extend the lease
        l.confirmed(t0 - Duration::from_millis(500), t0);
        assert!(!l.is_valid(t0 + Duration::from_millis(1000)));
        l.confirmed(
            t0 + Duration::from_millis(800),
            t0 + Duration::from_millis(900),
        );
        assert!(l.is_valid(t0 + Duration::from_millis(1799)));
        assert!(!l.is_valid(t0 + Duration::from_millis(1800)));
    }

    #[test]
    fn renewals_in_time_keep_the_term() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut l = OwnerLease::new(ms(1000));
        assert_eq!(l.term(t0), None);
        l.confirmed(t0, t0 + ms(10));
        let term = l.term(t0 + ms(10)).unwrap();
        for i in 1..20u64 {
            l.confirmed(t0 + ms(100 * i), t0 + ms(100 * i + 50));
            assert!(l.holds_term(term, t0 + ms(100 * i + 50)));
        }
    }

    #[test]
    fn a_confirmation_after_the_lease_ran_out_starts_a_new_term() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut l = OwnerLease::new(ms(1000));
        l.confirmed(t0, t0);
        let term = l.term(t0).unwrap();
        // frozen: the next renewal commits long after the lease ran out
        l.confirmed(t0 + ms(5000), t0 + ms(5100));
        assert!(l.is_valid(t0 + ms(5100)));
        assert!(!l.holds_term(term, t0 + ms(5100)));
        assert_eq!(l.term(t0 + ms(5100)), Some(term + 1));
        // sent in time, but confirmed after the lease ran out: the leader may have expired us
        l.confirmed(t0 + ms(6000), t0 + ms(6200));
        let term = l.term(t0 + ms(6200)).unwrap();
        l.confirmed(t0 + ms(7100), t0 + ms(7300));
        assert!(l.is_valid(t0 + ms(7300)));
        assert!(!l.holds_term(term, t0 + ms(7300)));
    }
}
