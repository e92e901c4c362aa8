//! [`ChunkPrefetch`]: the next chunk of a table read ahead, on a second connection, while the
//! chunk before it is published.
//!
//! Between two chunks the server would otherwise idle while the caller publishes (and the
//! caller idle while the server starts the next statement). The next chunk's cursor is the
//! last key of the one just read, so its read can start at once; its position G is captured
//! when the server runs it, as for any chunk.
//!
//! A chunk read ahead is used only if, when it is taken, it is the chunk wanted (same table,
//! cursor and size) and the stream's processed position is still inside its G
//! (`processed ⊆ G`). That is the precondition every chunk needs (ADR-0005): a streamed
//! change after G of a key in the chunk's range is suppressed by the gate (the key is beyond
//! the cursor) and is not in the chunk, so a stream that already passed G would lose it.
//! Such a chunk is discarded (counted as stale) and read again; the reads that follow are
//! not read ahead for a while ([`PrefetchBackoff`]), so a busy stream costs few wasted reads.
//!
//! The second connection is a [`SnapshotReader`] of its own, opened on first use and checked
//! to reach the server the stream reads (its identity), like the first.

use std::time::{Duration, Instant};

use capstan_core::change::TableId;
use capstan_core::position::Position;
use tokio::task::JoinHandle;

use super::chunk::{Chunk, ReaderOptions};
use super::error::SnapshotError;
use super::key::KeyPart;
use super::reader::{SnapshotReader, TranslationAnchor, TranslationStats};
use super::table::SnapshotTable;
use crate::mysql::source_config::ValidSourceConfig;

/// The most chunks read without reading ahead after stale ones (the backoff's ceiling).
const MAX_SKIP: u32 = 32;

/// When to read ahead: after a stale chunk, skip the next 1, then 3, 7, … (at most
/// [`MAX_SKIP`]) chunks; a used one resets it. Pure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefetchBackoff {
    stale_streak: u32,
    skip_left: u32,
}

impl PrefetchBackoff {
    /// True if the next chunk may be read ahead; counts a skipped one.
    pub fn try_start(&mut self) -> bool {
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return false;
        }
        true
    }

    /// A chunk read ahead was used.
    pub fn used(&mut self) {
        *self = PrefetchBackoff::default();
    }

    /// A chunk read ahead was stale.
    pub fn stale(&mut self) {
        self.stale_streak = self.stale_streak.saturating_add(1);
        let skip = 1u32
            .checked_shl(self.stale_streak)
            .unwrap_or(u32::MAX)
            .saturating_sub(1);
        self.skip_left = skip.min(MAX_SKIP);
    }
}

/// What a read-ahead task returns: its reader (if still usable) and the chunk with its read
/// time.
type Outcome = (
    Option<SnapshotReader>,
    Result<(Chunk, Duration), SnapshotError>,
);

#[derive(Debug)]
struct Pending {
    table: TableId,
    after: Vec<KeyPart>,
    asked: u32,
    task: JoinHandle<Outcome>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct ChunkPrefetch {
    /// The second connection's reader options.
    options: ReaderOptions,
    idle: Option<SnapshotReader>,
    pending: Option<Pending>,
    /// MariaDB: where the second connection's first position is walked from.
    anchor: Option<TranslationAnchor>,
    backoff: PrefetchBackoff,
    /// Chunks read ahead and used.
    pub used: u64,
    /// Chunks read ahead and discarded: the stream had passed their G.
    pub stale: u64,
    /// Chunks read ahead and not used for another reason (a different chunk was wanted, the
    /// read failed, the connection reached another server).
    pub wasted: u64,
}

impl ChunkPrefetch {
    /// No connection yet, nothing read ahead.
    pub fn new() -> Self {
        Self::default()
    }

    /// As [`ChunkPrefetch::new`], the second connection opened with `options`.
    pub fn with_options(options: ReaderOptions) -> Self {
        ChunkPrefetch {
            options,
            idle: None,
            pending: None,
            anchor: None,
            backoff: PrefetchBackoff::default(),
            used: 0,
            stale: 0,
            wasted: 0,
        }
    }

    /// Seeds the second connection's position translation (MariaDB) with the main reader's
    /// last point, `SnapshotReader::translation_anchor`: its first chunk is then walked from
    /// there instead of asking `BINLOG_GTID_POS`, whose cost grows with the binlog file's
    /// offset. A connection with a point of its own keeps it.
    pub fn seed(&mut self, anchor: Option<TranslationAnchor>) {
        self.anchor = anchor;
    }

    /// How the second connection's chunk positions were translated (MariaDB), while it is
    /// idle.
    pub fn translation_stats(&self) -> Option<TranslationStats> {
        self.idle.as_ref().map(SnapshotReader::translation_stats)
    }

    /// True while a chunk is being read ahead (or waits to be taken).
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Starts reading the chunk of `table` after `after` (`asked` rows) on the second
    /// connection, unless the backoff says not now. `source` and `identity` are the stream's
    /// server: a new connection must reach the same one. Anything read ahead before is
    /// dropped.
    pub fn start(
        &mut self,
        source: &ValidSourceConfig,
        identity: &str,
        table: &SnapshotTable,
        after: Vec<KeyPart>,
        asked: u32,
    ) {
        self.cancel();
        if !self.backoff.try_start() {
            return;
        }
        let reader = self.idle.take();
        let config = source.clone();
        let options = self.options;
        let identity = identity.to_string();
        let t = table.clone();
        let cursor = after.clone();
        let anchor = self.anchor.clone();
        let task = tokio::spawn(async move {
            let opened =
                SnapshotReader::reuse_or_open(reader, &config, options, &identity, anchor).await;
            let mut reader = match opened {
                Ok(r) => r,
                Err(e) => return (None, Err(e)),
            };
            let started = Instant::now();
            match reader.read_chunk(&t, Some(&cursor), asked).await {
                Ok(chunk) => (Some(reader), Ok((chunk, started.elapsed()))),
                // the connection may be mid-statement: not reused
                Err(e) => (None, Err(e)),
            }
        });
        self.pending = Some(Pending {
            table: table.id.clone(),
            after,
            asked,
            task,
        });
    }

    /// The chunk read ahead, with its read time, if it is the one wanted (`table` after
    /// `after`, `asked` rows) and `processed ⊆ G`; otherwise `None` and the caller reads it
    /// itself. Waits for a read still running.
    pub async fn take(
        &mut self,
        table: &TableId,
        after: Option<&[KeyPart]>,
        asked: u32,
        processed: &Position,
    ) -> Option<(Chunk, Duration)> {
        let pending = self.pending.take()?;
        let wanted = pending.table == *table
            && after == Some(pending.after.as_slice())
            && pending.asked == asked;
        if !wanted {
            pending.task.abort();
            self.wasted += 1;
            return None;
        }
        let Ok((reader, result)) = pending.task.await else {
            self.wasted += 1;
            return None;
        };
        self.idle = reader;
        match result {
            Ok((chunk, elapsed)) if processed.is_subset(&chunk.position) => {
                self.used += 1;
                self.backoff.used();
                Some((chunk, elapsed))
            }
            Ok(_) => {
                self.stale += 1;
                self.backoff.stale();
                None
            }
            Err(e) => {
                tracing::debug!(code = e.code(), "snapshot read-ahead failed; reading again");
                self.wasted += 1;
                None
            }
        }
    }

    /// Drops whatever is being read ahead (its connection with it).
    fn cancel(&mut self) {
        if let Some(p) = self.pending.take() {
            p.task.abort();
            self.wasted += 1;
        }
    }
}

impl Drop for ChunkPrefetch {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(events: &str) -> String {
        let mut b = PrefetchBackoff::default();
        events
            .chars()
            .map(|e| match e {
                's' => {
                    b.stale();
                    '.'
                }
                'u' => {
                    b.used();
                    '.'
                }
                _ => {
                    if b.try_start() {
                        'y'
                    } else {
                        'n'
                    }
                }
            })
            .filter(|c| *c != '.')
            .collect()
    }

    #[test]
    fn stale_chunks_back_off_exponentially_and_a_used_one_resets() {
        assert_eq!(pattern("???"), "yyy");
        // one stale: skip one; two in a row: skip three
        assert_eq!(pattern("?s??"), "yny");
        assert_eq!(pattern("?s???s?????"), "ynyynnnyy");
        assert_eq!(pattern("?s?s?u??"), "ynnyy");
    }

    #[test]
    fn the_skip_is_capped() {
        let mut b = PrefetchBackoff::default();
        for _ in 0..100 {
            b.stale();
        }
        let skipped = (0..100).take_while(|_| !b.try_start()).count();
        assert_eq!(skipped, MAX_SKIP as usize);
    }
}
