//! [`ChunkPacer`]: when the snapshot driver reads its next chunk, whether it reads the one
//! after it ahead, and what a failed read leads to — pure, the clock passed in. The driver
//! (`SnapshotDriver`) asks it and does the I/O.
//!
//! - **Pace**: a throttle (`max_rows_per_second`) spaces chunks by the rows each one held;
//!   while the stream has a backlog, chunks come at most every [`BACKLOG_CHUNK_INTERVAL`], so
//!   live changes go first and the stream can reach each chunk's position.
//! - **Read-ahead**: the next chunk is read on a second connection while one is published,
//!   unless this one was the table's last, the stream has a backlog (the chunk would be stale
//!   before it was used), a throttle is set (it would read faster than asked), or the reader's
//!   position capture locks (a second lock holder would wait for the first).
//! - **A failed read**: a transient fault (a lost connection, a lock-wait timeout) is tried
//!   again on a fresh connection after a growing pause, [`CHUNK_ATTEMPTS`] attempts in all;
//!   anything else, or the last attempt, halts.

use std::time::{Duration, Instant};

/// While the stream has a backlog, at most one chunk per this interval: live changes first.
pub const BACKLOG_CHUNK_INTERVAL: Duration = Duration::from_millis(250);
/// Attempts at a chunk whose read failed transiently before the pipeline halts.
pub const CHUNK_ATTEMPTS: u32 = 4;
/// The pause before the second attempt; each later one waits this much longer.
pub const CHUNK_RETRY_STEP: Duration = Duration::from_millis(200);

/// What follows a failed chunk read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Open a fresh connection after this pause and read the chunk again.
    Retry(Duration),
    /// Give up: the pipeline halts with the read's error.
    Halt,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ChunkPacer {
    max_rows_per_second: Option<u32>,
    next_read: Instant,
    last_read: Option<Instant>,
}

impl ChunkPacer {
    /// A pacer with the snapshot's throttle (`None`: as fast as the stream allows); the first
    /// chunk is due at `now`.
    pub fn new(max_rows_per_second: Option<u32>, now: Instant) -> Self {
        ChunkPacer {
            max_rows_per_second,
            next_read: now,
            last_read: None,
        }
    }

    /// The throttle, rows a second (`None`: none).
    pub fn throttle(&self) -> Option<u32> {
        self.max_rows_per_second
    }

    /// How long from `now` until the next chunk is due (zero: now); `backlog`: outputs wait
    /// in the stream's channel.
    pub fn due_in(&self, backlog: bool, now: Instant) -> Duration {
        let mut due = self.next_read;
        if backlog {
            if let Some(last) = self.last_read {
                due = due.max(last + BACKLOG_CHUNK_INTERVAL);
            }
        }
        due.saturating_duration_since(now)
    }

    /// A chunk of `rows` rows was read at `now`.
    pub fn read(&mut self, rows: usize, now: Instant) {
        self.last_read = Some(now);
        if let Some(limit) = self.max_rows_per_second {
            let secs = rows as f64 / f64::from(limit.max(1));
            self.next_read = now + Duration::from_secs_f64(secs);
        }
    }

    /// Whether the chunk after the one just read is read ahead: not after a table's `last`
    /// chunk, with a `backlog`, under a throttle, or when the reader cannot (`reader_can`:
    /// its position capture takes no lock).
    pub fn reads_ahead(&self, last: bool, backlog: bool, reader_can: bool) -> bool {
        !last && !backlog && self.max_rows_per_second.is_none() && reader_can
    }

    /// What follows the failure of attempt `attempt` (from 1) at a chunk; `transient`: the
    /// fault may pass (see the module documentation).
    pub fn after_failure(attempt: u32, transient: bool) -> AfterFailure {
        if !transient || attempt >= CHUNK_ATTEMPTS {
            AfterFailure::Halt
        } else {
            AfterFailure::Retry(CHUNK_RETRY_STEP * attempt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn unthrottled_chunks_are_due_at_once_and_back_to_back() {
        let t0 = Instant::now();
        let mut p = ChunkPacer::new(None, t0);
        assert_eq!(p.due_in(false, t0), Duration::ZERO);
        // the first chunk waits for nothing, even with a backlog
        assert_eq!(p.due_in(true, t0), Duration::ZERO);
        p.read(4096, t0);
        assert_eq!(p.due_in(false, t0), Duration::ZERO);
        assert_eq!(p.due_in(false, t0 + 5 * MS), Duration::ZERO);
    }

    #[test]
    fn a_backlog_spaces_chunks_by_the_interval_from_the_last_read() {
        let t0 = Instant::now();
        let mut p = ChunkPacer::new(None, t0);
        p.read(500, t0 + 10 * MS);
        assert_eq!(p.due_in(true, t0 + 10 * MS), BACKLOG_CHUNK_INTERVAL);
        assert_eq!(
            p.due_in(true, t0 + 110 * MS),
            BACKLOG_CHUNK_INTERVAL - 100 * MS
        );
        assert_eq!(p.due_in(true, t0 + 260 * MS), Duration::ZERO);
        assert_eq!(p.due_in(true, t0 + 900 * MS), Duration::ZERO);
        // the backlog gone, the chunk is due at once
        assert_eq!(p.due_in(false, t0 + 20 * MS), Duration::ZERO);
    }

    #[test]
    fn a_throttle_spaces_chunks_by_their_rows() {
        let t0 = Instant::now();
        let mut p = ChunkPacer::new(Some(2000), t0);
        assert_eq!(p.due_in(false, t0), Duration::ZERO);
        // 500 rows at 2,000 rows/s: the next chunk in 250 ms
        p.read(500, t0);
        assert_eq!(p.due_in(false, t0), 250 * MS);
        assert_eq!(p.due_in(false, t0 + 200 * MS), 50 * MS);
        assert_eq!(p.due_in(false, t0 + 250 * MS), Duration::ZERO);
        // a short last chunk waits less; an empty one not at all
        p.read(100, t0 + 300 * MS);
        assert_eq!(p.due_in(false, t0 + 300 * MS), 50 * MS);
        p.read(0, t0 + 400 * MS);
        assert_eq!(p.due_in(false, t0 + 400 * MS), Duration::ZERO);
        // the later of the throttle and the backlog interval
        p.read(2000, t0 + 500 * MS);
        assert_eq!(p.due_in(true, t0 + 500 * MS), 1000 * MS);
        p.read(100, t0 + 2000 * MS);
        assert_eq!(p.due_in(true, t0 + 2000 * MS), BACKLOG_CHUNK_INTERVAL);
    }

    #[test]
    fn a_zero_throttle_is_one_row_a_second_not_a_division_by_zero() {
        let t0 = Instant::now();
        let mut p = ChunkPacer::new(Some(0), t0);
        p.read(3, t0);
        assert_eq!(p.due_in(false, t0), 3000 * MS);
    }

    #[test]
    fn the_next_chunk_is_read_ahead_only_when_nothing_speaks_against_it() {
        let t0 = Instant::now();
        let free = ChunkPacer::new(None, t0);
        assert!(free.reads_ahead(false, false, true));
        assert!(
            !free.reads_ahead(true, false, true),
            "after the table's last chunk"
        );
        assert!(!free.reads_ahead(false, true, true), "with a backlog");
        assert!(!free.reads_ahead(false, false, false), "a locking capture");
        let throttled = ChunkPacer::new(Some(10_000), t0);
        assert!(
            !throttled.reads_ahead(false, false, true),
            "under a throttle"
        );
    }

    #[test]
    fn a_transient_failure_is_retried_with_a_growing_pause_then_halts() {
        assert_eq!(
            ChunkPacer::after_failure(1, true),
            AfterFailure::Retry(200 * MS)
        );
        assert_eq!(
            ChunkPacer::after_failure(2, true),
            AfterFailure::Retry(400 * MS)
        );
        assert_eq!(
            ChunkPacer::after_failure(3, true),
            AfterFailure::Retry(600 * MS)
        );
        assert_eq!(ChunkPacer::after_failure(4, true), AfterFailure::Halt);
        assert_eq!(ChunkPacer::after_failure(1, false), AfterFailure::Halt);
    }
}
