//! When this node last heard from a Raft leader: the last `AppendEntries` it accepted (a
//! heartbeat or entries, from a leader whose vote it holds). A follower that heard from a
//! leader within the election timeout refuses direct lease renewals (ADR-0004, decision 1):
//! while a leader is reachable, renewals must go through it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct LeaderContact {
    last: Mutex<Option<Instant>>,
}

impl LeaderContact {
    /// A leader's append was accepted at `now`.
    pub fn heard(&self, now: Instant) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some(last.map_or(now, |l| l.max(now)));
        }
    }

    /// True when no leader was heard within `window` before `now` (or never).
    pub fn quiet_for(&self, window: Duration, now: Instant) -> bool {
        self.last
            .lock()
            .map(|last| last.is_none_or(|l| now.saturating_duration_since(l) >= window))
            .unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_until_heard_and_again_a_window_after() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let c = LeaderContact::default();
        assert!(c.quiet_for(ms(200), t0));
        c.heard(t0);
        // an older note (appends answered out of order) does not move it back
        c.heard(t0 - ms(50));
        assert!(!c.quiet_for(ms(200), t0 + ms(199)));
        assert!(c.quiet_for(ms(200), t0 + ms(200)));
    }
}
