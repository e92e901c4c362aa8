//! The `snapshot` block of a pipeline definition: when the initial snapshot runs, which
//! tables it reads, how large its chunks are and how fast it may read; checked without I/O
//! into a [`CheckedSnapshot`].

use std::collections::HashSet;

use capstan_connectors::mysql::TableFilter;
use capstan_core::change::TableId;
use serde::{Deserialize, Serialize};

use super::pipeline_spec::PipelineSpecError;

/// When the initial snapshot runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMode {
    /// Never: stream changes only.
    #[default]
    Never,
    /// Once, at the pipeline's first start, woven into the stream (ADR-0005).
    Initial,
    /// Like `initial`, and again whenever the checkpoint is no longer on the server (its
    /// binlog was purged): the snapshot restarts from a new stream floor instead of halting
    /// `data_gap`.
    WhenNeeded,
}

/// The snapshot block.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSpec {
    /// `never` (default), `initial` or `when_needed`.
    #[serde(default)]
    pub mode: SnapshotMode,
    /// Tables to snapshot, each captured (default: the captured ones; with every table
    /// captured, the server's base tables outside the system schemas).
    #[serde(default)]
    pub tables: Option<Vec<String>>,
    /// Rows per chunk, fixed (1 to 1,000,000): bounds memory and what a crash re-reads.
    /// Absent (the default): sized per table to about 100 ms of reading and at most 32 MiB
    /// of row data (`capstan_core::snapshot::ChunkSizer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<u32>,
    /// A ceiling on snapshot rows read per second (default: none). Chunks also wait while
    /// the stream has a backlog, so live changes go first.
    #[serde(default)]
    pub max_rows_per_second: Option<u32>,
    /// Chunk reads run at once, each on a source connection of its own (1 to
    /// [`MAX_PARALLEL_READS`], default [`DEFAULT_PARALLEL_READS`]: one at a time, the next
    /// read ahead on MariaDB): chunks of several tables, and consecutive key ranges of a
    /// table keyed by one integer column — for a source server with cores to spare. Reads
    /// are one at a time anyway while the stream has a backlog or under
    /// `max_rows_per_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_reads: Option<u32>,
}

impl Default for SnapshotSpec {
    fn default() -> Self {
        SnapshotSpec {
            mode: SnapshotMode::Never,
            tables: None,
            chunk_size: None,
            max_rows_per_second: None,
            parallel_reads: None,
        }
    }
}

/// The largest chunk: a chunk is held in memory whole.
pub const MAX_CHUNK_SIZE: u32 = 1_000_000;
/// The most chunk reads at once (source connections of one snapshot).
pub const MAX_PARALLEL_READS: u32 = 16;
/// Chunk reads at once when `parallel_reads` is not set.
pub const DEFAULT_PARALLEL_READS: u32 = 1;

/// The checked snapshot block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedSnapshot {
    /// `initial` or `when_needed`.
    pub mode: SnapshotMode,
    /// The tables, in reading order; `None`: resolve the captured base tables at the first
    /// start.
    pub tables: Option<Vec<TableId>>,
    /// Rows per chunk when fixed; `None` adapts.
    pub chunk_size: Option<u32>,
    /// Rows per second ceiling.
    pub max_rows_per_second: Option<u32>,
    /// Chunk reads at once.
    pub parallel_reads: u32,
}

impl SnapshotSpec {
    /// The checked block (`None`: no snapshot), each error naming its field.
    pub(super) fn check(
        &self,
        captured: &TableFilter,
    ) -> Result<Option<CheckedSnapshot>, PipelineSpecError> {
        if self
            .chunk_size
            .is_some_and(|rows| rows == 0 || rows > MAX_CHUNK_SIZE)
        {
            return Err(PipelineSpecError::new(
                "snapshot.chunk_size",
                format!("must be 1 to {MAX_CHUNK_SIZE}"),
            ));
        }
        if self
            .parallel_reads
            .is_some_and(|n| n == 0 || n > MAX_PARALLEL_READS)
        {
            return Err(PipelineSpecError::new(
                "snapshot.parallel_reads",
                format!("must be 1 to {MAX_PARALLEL_READS}"),
            ));
        }
        if self.max_rows_per_second == Some(0) {
            return Err(PipelineSpecError::new(
                "snapshot.max_rows_per_second",
                "must be positive (omit it for no ceiling)",
            ));
        }
        if self.mode == SnapshotMode::Never {
            if self.tables.is_some() {
                return Err(PipelineSpecError::new(
                    "snapshot.tables",
                    "needs `mode` initial or when_needed",
                ));
            }
            return Ok(None);
        }
        let tables = match (&self.tables, captured) {
            (Some(names), _) => {
                if names.is_empty() {
                    return Err(PipelineSpecError::new(
                        "snapshot.tables",
                        "must name at least one table (omit it to snapshot the captured ones)",
                    ));
                }
                let mut seen = HashSet::new();
                let mut tables = Vec::with_capacity(names.len());
                for (i, name) in names.iter().enumerate() {
                    let field = format!("snapshot.tables[{i}]");
                    let table = match name.split_once('.') {
                        Some((s, t)) if !s.is_empty() && !t.is_empty() => TableId::new(s, t),
                        _ => return Err(PipelineSpecError::new(field, "must be `schema.table`")),
                    };
                    if !captured.admits(&table) {
                        return Err(PipelineSpecError::new(
                            field,
                            "is not captured by `tables` (snapshot_table_not_captured)",
                        ));
                    }
                    if !seen.insert(table.clone()) {
                        return Err(PipelineSpecError::new(field, "is listed twice"));
                    }
                    tables.push(table);
                }
                Some(tables)
            }
            (None, TableFilter::Only(set)) => {
                let mut tables: Vec<TableId> = set.iter().cloned().collect();
                tables.sort();
                Some(tables)
            }
            (None, TableFilter::All | TableFilter::AllExcept(_) | TableFilter::Matching(_)) => None,
        };
        Ok(Some(CheckedSnapshot {
            mode: self.mode,
            tables,
            chunk_size: self.chunk_size,
            max_rows_per_second: self.max_rows_per_second,
            parallel_reads: self.parallel_reads.unwrap_or(DEFAULT_PARALLEL_READS),
        }))
    }
}
