//! [`RetrySchedule`]: when a pipeline whose runner ended on a transient fault may start again.
//!
//! Capped exponential backoff per pipeline and incarnation: 1 s, 2 s, 4 s, … up to 60 s
//! between starts while the fault lasts. A run that lasted [`HEALTHY`] before it failed again
//! starts the sequence over (the earlier fault was cured). A new incarnation (a move, a
//! restart, a config change) starts at once. Pure: the caller passes the clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The first delay.
const BASE: Duration = Duration::from_secs(1);
/// The longest delay.
const CAP: Duration = Duration::from_secs(60);
/// A run at least this long resets the backoff.
pub const HEALTHY: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Entry<K> {
    key: K,
    attempt: u32,
    not_before: Instant,
}

/// Per pipeline: the incarnation that is backing off, its attempt, and when it may start.
#[derive(Debug)]
pub struct RetrySchedule<K> {
    entries: HashMap<String, Entry<K>>,
}

impl<K> Default for RetrySchedule<K> {
    fn default() -> Self {
        RetrySchedule {
            entries: HashMap::new(),
        }
    }
}

impl<K: PartialEq + Clone> RetrySchedule<K> {
    /// The runner of `name` at `key` ended on a transient fault after running `ran_for`:
    /// returns (attempt, delay) — the delay before it may start again.
    pub fn on_retry(
        &mut self,
        name: &str,
        key: &K,
        ran_for: Duration,
        now: Instant,
    ) -> (u32, Duration) {
        let previous = self
            .entries
            .get(name)
            .filter(|e| e.key == *key && ran_for < HEALTHY)
            .map_or(0, |e| e.attempt);
        let attempt = previous.saturating_add(1);
        let delay = BASE
            .checked_mul(1u32 << (attempt - 1).min(16))
            .map_or(CAP, |d| d.min(CAP));
        self.entries.insert(
            name.to_string(),
            Entry {
                key: key.clone(),
                attempt,
                not_before: now + delay,
            },
        );
        (attempt, delay)
    }

    /// Whether `name` at `key` may start now: no backoff pending for that incarnation.
    pub fn may_start(&self, name: &str, key: &K, now: Instant) -> bool {
        self.entries
            .get(name)
            .is_none_or(|e| e.key != *key || now >= e.not_before)
    }

    /// Forgets every pipeline `wanted` says no to (paused, stopped, moved away): a resume
    /// starts at once.
    pub fn retain(&mut self, wanted: impl Fn(&str) -> bool) {
        self.entries.retain(|name, _| wanted(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_secs(2);

    #[test]
    fn delays_double_up_to_the_cap_and_gate_the_start() {
        let mut s = RetrySchedule::default();
        let t0 = Instant::now();
        let key = (3u64, 1u64);
        assert!(s.may_start("p", &key, t0));
        let delays: Vec<u64> = (0..9)
            .map(|_| s.on_retry("p", &key, SHORT, t0).1.as_secs())
            .collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert!(!s.may_start("p", &key, t0 + Duration::from_secs(59)));
        assert!(s.may_start("p", &key, t0 + Duration::from_secs(60)));
        // other pipelines are not held back
        assert!(s.may_start("q", &key, t0));
    }

    #[test]
    fn a_healthy_run_or_a_new_incarnation_starts_over() {
        let mut s = RetrySchedule::default();
        let t0 = Instant::now();
        s.on_retry("p", &(1u64, 1u64), SHORT, t0);
        s.on_retry("p", &(1, 1), SHORT, t0);
        assert_eq!(
            s.on_retry("p", &(1, 1), SHORT, t0),
            (3, Duration::from_secs(4))
        );
        assert_eq!(
            s.on_retry("p", &(1, 1), HEALTHY, t0),
            (1, Duration::from_secs(1))
        );
        // a move or a config change: not held back, and counted afresh
        s.on_retry("p", &(1, 1), SHORT, t0);
        assert!(s.may_start("p", &(2, 1), t0));
        assert_eq!(s.on_retry("p", &(2, 1), SHORT, t0).0, 1);
        s.retain(|name| name != "p");
        assert!(s.may_start("p", &(2, 1), t0));
    }

    #[test]
    fn many_attempts_do_not_overflow() {
        let mut s = RetrySchedule::default();
        let t0 = Instant::now();
        let mut last = (0, Duration::ZERO);
        for _ in 0..100 {
            last = s.on_retry("p", &1u8, SHORT, t0);
        }
        assert_eq!(last, (100, CAP));
    }
}
