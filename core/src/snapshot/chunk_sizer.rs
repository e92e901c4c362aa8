//! [`ChunkSizer`]: how many rows the next chunk of a table asks for.
//!
//! A fixed size is used as configured. Without one, the size adapts per table so that a chunk
//! takes about [`TARGET_CHUNK_TIME`] to read and holds at most [`CHUNK_BYTE_BUDGET`] of row
//! data (the approach of pt-table-checksum's `--chunk-time`): small chunks pay a fixed cost
//! each (a new statement, the position capture, both sides idle between two chunks), large
//! ones hold the stream paused longer and more rows in memory. The first chunk asks for
//! [`FIRST_CHUNK_ROWS`]; each full chunk then sets the next size from its own rows per second
//! and bytes per row, growing at most [`MAX_GROWTH`]-fold per chunk and shrinking at once,
//! always within [`MIN_CHUNK_ROWS`]..=[`MAX_ADAPTIVE_ROWS`]. Under a rows-per-second ceiling
//! an adaptive chunk asks for at most one second of it, so a throttled snapshot reads small
//! chunks often rather than one large chunk per long pause.
//!
//! Pure: the caller measures and reports; nothing here reads a clock.

use std::time::Duration;

/// The rows the first adaptive chunk of a table asks for.
pub const FIRST_CHUNK_ROWS: u32 = 4096;
/// The fewest rows an adaptive chunk asks for.
pub const MIN_CHUNK_ROWS: u32 = 256;
/// The most rows an adaptive chunk asks for.
pub const MAX_ADAPTIVE_ROWS: u32 = 262_144;
/// The read time an adaptive chunk aims at.
pub const TARGET_CHUNK_TIME: Duration = Duration::from_millis(50);
/// The row data (bytes on the wire) an adaptive chunk aims to stay under.
pub const CHUNK_BYTE_BUDGET: u64 = 16 << 20;
/// An adaptive chunk asks for at most this many times the rows of the one before.
pub const MAX_GROWTH: u32 = 4;

/// See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSizer {
    next: u32,
    adaptive: bool,
    /// An adaptive chunk's most rows (one second of the throttle).
    cap: u32,
}

impl ChunkSizer {
    /// Every chunk asks for `rows` (at least one).
    pub fn fixed(rows: u32) -> Self {
        ChunkSizer {
            next: rows.max(1),
            adaptive: false,
            cap: u32::MAX,
        }
    }

    /// Chunk sizes adapt to the table's read rate and row width.
    pub fn adaptive() -> Self {
        ChunkSizer {
            next: FIRST_CHUNK_ROWS,
            adaptive: true,
            cap: u32::MAX,
        }
    }

    /// Fixed for `Some(rows)`, adaptive for `None`.
    pub fn for_config(chunk_size: Option<u32>) -> Self {
        chunk_size.map_or_else(Self::adaptive, Self::fixed)
    }

    /// Under a ceiling of `rows_per_second`, an adaptive chunk asks for at most that many
    /// rows; a fixed size is kept as configured.
    pub fn with_ceiling(mut self, rows_per_second: Option<u32>) -> Self {
        if self.adaptive {
            self.cap = rows_per_second.map_or(u32::MAX, |r| r.max(1));
        }
        self
    }

    /// The rows the next chunk asks for.
    pub fn next_size(&self) -> u32 {
        self.next.min(self.cap)
    }

    /// True when sizes adapt.
    pub fn is_adaptive(&self) -> bool {
        self.adaptive
    }

    /// Reports a chunk that asked for `asked` rows: `rows` came back, `bytes` of row data, in
    /// `elapsed`. Only a full chunk (`rows == asked`) says how fast a chunk of the next size
    /// would be; a short one (the table's last) changes nothing.
    pub fn observe(&mut self, asked: u32, rows: usize, bytes: u64, elapsed: Duration) {
        if !self.adaptive || rows == 0 || u32::try_from(rows).ok() != Some(asked) {
            return;
        }
        let rows = f64::from(asked);
        let by_time = match elapsed.as_secs_f64() {
            secs if secs > 0.0 => TARGET_CHUNK_TIME.as_secs_f64() * rows / secs,
            _ => f64::INFINITY,
        };
        let by_bytes = match bytes {
            0 => f64::INFINITY,
            // u64 → f64 loses nothing that matters for a size estimate
            b => CHUNK_BYTE_BUDGET as f64 * rows / b as f64,
        };
        let ceiling = f64::from(asked.saturating_mul(MAX_GROWTH));
        let ideal = by_time.min(by_bytes).min(ceiling).floor();
        let clamped = ideal.clamp(f64::from(MIN_CHUNK_ROWS), f64::from(MAX_ADAPTIVE_ROWS));
        // within u32 by the clamp
        self.next = clamped as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_fixed_size_never_moves() {
        let mut s = ChunkSizer::for_config(Some(1000));
        assert!(!s.is_adaptive());
        s.observe(1000, 1000, 10, ms(1));
        s.observe(1000, 1000, 1 << 40, ms(100_000));
        assert_eq!(s.next_size(), 1000);
        assert_eq!(ChunkSizer::fixed(0).next_size(), 1);
    }

    #[test]
    fn fast_narrow_chunks_grow_fourfold_up_to_the_ceiling() {
        let mut s = ChunkSizer::for_config(None);
        assert_eq!(s.next_size(), FIRST_CHUNK_ROWS);
        let mut sizes = Vec::new();
        for _ in 0..6 {
            let asked = s.next_size();
            // 1 µs and 100 bytes per row: 50 000 rows take the target time
            s.observe(
                asked,
                asked as usize,
                u64::from(asked) * 100,
                Duration::from_micros(u64::from(asked)),
            );
            sizes.push(s.next_size());
        }
        assert_eq!(sizes, [16_384, 50_000, 50_000, 50_000, 50_000, 50_000]);
    }

    #[test]
    fn slow_or_wide_chunks_shrink_at_once() {
        let mut s = ChunkSizer::adaptive();
        // 4096 rows in 0.5 s: 409 rows take the target time
        s.observe(4096, 4096, 4096, ms(500));
        assert_eq!(s.next_size(), 409);
        // 1 MiB rows: the budget holds 16
        let mut s = ChunkSizer::adaptive();
        s.observe(4096, 4096, 4096 << 20, ms(1));
        assert_eq!(s.next_size(), MIN_CHUNK_ROWS);
        let mut s = ChunkSizer::adaptive();
        s.observe(4096, 4096, (4096 * 16) << 10, ms(1));
        assert_eq!(s.next_size(), 1024);
    }

    #[test]
    fn a_ceiling_caps_adaptive_chunks_only() {
        let mut s = ChunkSizer::adaptive().with_ceiling(Some(40));
        assert_eq!(s.next_size(), 40);
        // a full chunk of the capped size still tells the rate
        s.observe(40, 40, 4000, ms(1));
        assert_eq!(s.next_size(), 40);
        assert_eq!(
            ChunkSizer::adaptive()
                .with_ceiling(Some(1 << 20))
                .next_size(),
            4096
        );
        assert_eq!(ChunkSizer::adaptive().with_ceiling(None).next_size(), 4096);
        assert_eq!(
            ChunkSizer::fixed(500).with_ceiling(Some(40)).next_size(),
            500
        );
    }

    #[test]
    fn a_short_or_empty_chunk_changes_nothing() {
        let mut s = ChunkSizer::adaptive();
        s.observe(4096, 12, 1200, ms(1000));
        s.observe(4096, 0, 0, ms(0));
        assert_eq!(s.next_size(), FIRST_CHUNK_ROWS);
        // a zero elapsed time is as fast as can be: growth is capped
        s.observe(4096, 4096, 0, Duration::ZERO);
        assert_eq!(s.next_size(), 4096 * MAX_GROWTH);
    }

    proptest! {
        #[test]
        fn sizes_stay_in_bounds_and_respect_the_budgets(
            chunks in prop::collection::vec((0u64..1 << 36, 0u64..10_000_000, 0u32..=100), 1..40)
        ) {
            let mut s = ChunkSizer::adaptive();
            for (bytes, micros, short) in chunks {
                let asked = s.next_size();
                let rows = if short == 0 { asked / 2 } else { asked } as usize;
                let elapsed = Duration::from_micros(micros);
                s.observe(asked, rows, bytes, elapsed);
                let next = s.next_size();
                prop_assert!((MIN_CHUNK_ROWS..=MAX_ADAPTIVE_ROWS).contains(&next));
                if rows as u32 != asked {
                    prop_assert_eq!(next, asked);
                    continue;
                }
                prop_assert!(next <= asked.saturating_mul(MAX_GROWTH).max(MIN_CHUNK_ROWS));
                // above the floor, the next chunk at the same rates fits both budgets
                if next > MIN_CHUNK_ROWS {
                    let per_row_bytes = bytes as f64 / f64::from(asked);
                    let per_row_secs = elapsed.as_secs_f64() / f64::from(asked);
                    prop_assert!(per_row_bytes * f64::from(next) <= CHUNK_BYTE_BUDGET as f64 + 1.0);
                    prop_assert!(
                        per_row_secs * f64::from(next) <= TARGET_CHUNK_TIME.as_secs_f64() + 1e-9
                    );
                }
            }
        }
    }
}
