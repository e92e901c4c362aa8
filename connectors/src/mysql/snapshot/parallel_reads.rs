//! [`ParallelReads`]: a round of chunk reads run at once, each on a connection of its own
//! (ADR-0005, *Parallel reads*): chunks of several tables, or consecutive key ranges of one
//! ([`KeyRanges`](super::KeyRanges)). Each chunk has its own position G, captured when its
//! read runs, exactly as a chunk read alone; whether it can be published is the caller's
//! (the snapshot session's) to decide.
//!
//! The extra connections are [`SnapshotReader`]s opened on first use, each checked to reach
//! the server the stream reads (its identity), and kept for the next round; one whose read
//! failed is closed (it may be mid-statement). At most `reads - 1` are open: the round's
//! first read runs on the caller's reader.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::chunk::{Chunk, ReaderOptions};
use super::error::SnapshotError;
use super::key::KeyPart;
use super::reader::SnapshotReader;
use super::table::SnapshotTable;
use crate::mysql::source_config::ValidSourceConfig;

/// One read of a round: up to `rows` rows of `table` after `after`, up to `upto` when set.
#[derive(Clone, Debug)]
pub struct RangeRead {
    /// The table.
    pub table: SnapshotTable,
    /// The range starts after this key (`None`: at the table's start).
    pub after: Option<Vec<KeyPart>>,
    /// The range ends at this key (`None`: open, it may find the table's end).
    pub upto: Option<Vec<KeyPart>>,
    /// At most this many rows.
    pub rows: u32,
}

impl RangeRead {
    /// The reads of `table` after `after` for a round: one per bound in `bounds` (ascending;
    /// each range ends at its bound and the next starts there), then one open read after the
    /// last, each of at most `rows` rows.
    pub fn consecutive(
        table: &SnapshotTable,
        after: Option<Vec<KeyPart>>,
        bounds: Vec<Vec<KeyPart>>,
        rows: u32,
    ) -> Vec<RangeRead> {
        let mut lo = after;
        let mut reads: Vec<RangeRead> = bounds
            .into_iter()
            .map(|upto| RangeRead {
                table: table.clone(),
                after: lo.replace(upto.clone()),
                upto: Some(upto),
                rows,
            })
            .collect();
        reads.push(RangeRead {
            table: table.clone(),
            after: lo,
            upto: None,
            rows,
        });
        reads
    }

    /// True when `chunk`, read for this range, holds all of it: an open range always (its
    /// chunk ends at its last row or at the table's end), a bounded one when it reached its
    /// bound ([`Chunk::covers_to`]); otherwise the chunk's size cut it short.
    pub fn read_whole(&self, chunk: &Chunk) -> bool {
        self.upto.is_none() || chunk.covers_to.is_some()
    }
}

/// A read's chunk and how long it took.
pub type RangeOutcome = Result<(Chunk, Duration), SnapshotError>;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct ParallelReads {
    options: ReaderOptions,
    idle: Vec<SnapshotReader>,
}

/// Reads one range on `reader`, timed.
async fn read_one(reader: &mut SnapshotReader, read: &RangeRead) -> RangeOutcome {
    let started = Instant::now();
    let chunk = reader
        .read_range(
            &read.table,
            read.after.as_deref(),
            read.upto.as_deref(),
            read.rows,
        )
        .await?;
    Ok((chunk, started.elapsed()))
}

impl ParallelReads {
    /// No extra connection yet; they are opened with `options`.
    pub fn with_options(options: ReaderOptions) -> Self {
        ParallelReads {
            options,
            idle: Vec::new(),
        }
    }

    /// Extra connections open and idle.
    pub fn connections(&self) -> usize {
        self.idle.len()
    }

    /// Runs `reads` at once, the first on `main` and each other on an extra connection to
    /// `source` (checked to be the server named `identity`). The outcomes come in the order
    /// of `reads`.
    pub async fn read_all(
        &mut self,
        main: &mut SnapshotReader,
        source: &ValidSourceConfig,
        identity: &str,
        reads: &[RangeRead],
    ) -> Vec<RangeOutcome> {
        let Some((first, rest)) = reads.split_first() else {
            return Vec::new();
        };
        // MariaDB: a new connection walks its first position from the main reader's last
        // one instead of asking the server (whose cost grows with the binlog file's offset)
        let anchor = main.translation_anchor();
        let tasks: Vec<JoinHandle<(Option<SnapshotReader>, RangeOutcome)>> = rest
            .iter()
            .map(|read| {
                let reader = self.idle.pop();
                let (config, options) = (source.clone(), self.options);
                let (identity, read) = (identity.to_string(), read.clone());
                let anchor = anchor.clone();
                tokio::spawn(async move {
                    let opened =
                        SnapshotReader::reuse_or_open(reader, &config, options, &identity, anchor)
                            .await;
                    let mut reader = match opened {
                        Ok(r) => r,
                        Err(e) => return (None, Err(e)),
                    };
                    match read_one(&mut reader, &read).await {
                        Ok(done) => (Some(reader), Ok(done)),
                        Err(e) => (None, Err(e)),
                    }
                })
            })
            .collect();
        let mut out = Vec::with_capacity(reads.len());
        out.push(read_one(main, first).await);
        for task in tasks {
            out.push(match task.await {
                Ok((reader, outcome)) => {
                    self.idle.extend(reader);
                    outcome
                }
                Err(_) => Err(SnapshotError::ConnectFailed { code: 0 }),
            });
        }
        out
    }
}
