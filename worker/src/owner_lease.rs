//! The owner's side of fencing: a worker may act as a pipeline owner (publish, commit) only
//! while it has reached a Raft quorum within its lease.
//!
//! The lease starts when a renewal is *sent*, and is confirmed when that renewal commits. The
//! leader starts its own expiry clock only when it sees the renewal applied, which is later, and
//! adds a margin; so an owner cut off from the quorum always stops before the leader may move
//! its pipelines (given clocks that run at similar rates, the standard lease assumption).
//!
//! Pure: the caller passes the instants.

use std::time::{Duration, Instant};

/// Whether this worker currently holds a valid lease.
#[derive(Debug, Clone)]
pub struct OwnerLease {
    lease: Duration,
    valid_from_send: Option<Instant>,
}

impl OwnerLease {
    /// No lease yet.
    pub fn new(lease: Duration) -> Self {
        OwnerLease {
            lease,
            valid_from_send: None,
        }
    }

    /// A renewal sent at `sent_at` was committed by a quorum.
    pub fn confirmed(&mut self, sent_at: Instant) {
        if self.valid_from_send.is_none_or(|t| sent_at > t) {
            self.valid_from_send = Some(sent_at);
        }
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
        l.confirmed(t0);
        assert!(l.is_valid(t0 + Duration::from_millis(999)));
        assert!(!l.is_valid(t0 + Duration::from_millis(1000)));
        // a late confirmation of an older renewal does not extend the lease
        l.confirmed(t0 - Duration::from_millis(500));
        assert!(!l.is_valid(t0 + Duration::from_millis(1000)));
        l.confirmed(t0 + Duration::from_millis(800));
        assert!(l.is_valid(t0 + Duration::from_millis(1799)));
        assert!(!l.is_valid(t0 + Duration::from_millis(1800)));
    }
}
