//! A snapshot ready to start: the reader and the tables at their stored progress, merged
//! with the exactly-once offsets record when Kafka is ahead of Raft.

use std::collections::HashMap;

use capstan_connectors::mysql::snapshot::{KeyPart, SnapshotReader};
use capstan_core::change::TableId;
use capstan_core::snapshot::TableStatus;
use capstan_kafka::exactly_once::SnapshotProgress;

use super::table_run::{kafka_table, Halt, ProgressWrite, TableRun};

/// A snapshot ready to start: the reader, the tables at their stored progress.
#[derive(Debug)]
pub struct PreparedSnapshot {
    /// The chunk reader (its connection stays open).
    pub reader: SnapshotReader,
    /// The tables, in reading order.
    pub order: Vec<TableId>,
    /// Each table still to read (pending or in progress) at its stored progress.
    pub tables: HashMap<TableId, TableRun>,
    /// The tables already complete, with their last cursor: not described, not read.
    pub complete: HashMap<TableId, Option<Vec<KeyPart>>>,
    /// Each table's status.
    pub status: HashMap<TableId, TableStatus>,
    /// Rows per chunk when fixed; `None` adapts.
    pub chunk_size: Option<u32>,
    /// Rows per second ceiling.
    pub max_rows_per_second: Option<u32>,
    /// Chunk reads at once.
    pub parallel_reads: u32,
}

impl PreparedSnapshot {
    /// The progress as the exactly-once offsets record carries it (no chunk counter: the
    /// record's own counter orders records).
    pub fn kafka_progress(&self) -> SnapshotProgress {
        let tables = self
            .order
            .iter()
            .filter_map(|id| {
                let table = match (self.tables.get(id), self.complete.get(id)) {
                    (Some(run), _) => kafka_table(
                        run.raw_cursor.as_deref(),
                        self.status.get(id) == Some(&TableStatus::Complete),
                    ),
                    (None, Some(cursor)) => kafka_table(cursor.as_deref(), true),
                    (None, None) => return None,
                };
                Some((id.to_string(), table))
            })
            .collect();
        SnapshotProgress {
            chunks_committed: 0,
            tables,
        }
    }

    /// Exactly-once: the offsets record committed in Kafka is ahead of Raft (a chunk was
    /// published and its Raft write lost). Adopts its cursors; returns the Raft writes that
    /// bring Raft up to date.
    pub fn adopt_kafka(&mut self, kafka: &SnapshotProgress) -> Result<Vec<ProgressWrite>, Halt> {
        let mut writes = Vec::new();
        for (name, progress) in &kafka.tables {
            let Some(id) = self.order.iter().find(|t| t.to_string() == *name).cloned() else {
                continue; // no longer captured: its progress was forgotten
            };
            if progress.complete && self.complete.contains_key(&id) {
                continue; // complete in both
            }
            let run = self.tables.get_mut(&id).ok_or("snapshot_config_drifted")?;
            let fresh = run.raw_cursor.is_none() && run.raw_delivered.is_none();
            if fresh && (progress.cursor.is_some() || (run.incremental && progress.complete)) {
                // a chunk with rows is published only after its end is in Raft as
                // delivered: none was since the table was (re)added, so Kafka's cursor is
                // of an earlier snapshot of it (removed and added again, or snapshotted
                // again on an operator's request — whose completion of a table then empty
                // must not stand for this one either)
                continue;
            }
            let cursor: Option<Vec<KeyPart>> = match &progress.cursor {
                Some(v) => Some(
                    serde_json::from_value(v.clone()).map_err(|_| "snapshot_cursor_unreadable")?,
                ),
                None => None,
            };
            let status = if progress.complete {
                TableStatus::Complete
            } else if cursor.is_some() {
                TableStatus::InProgress
            } else {
                TableStatus::Pending
            };
            let changed = cursor != run.raw_cursor || self.status.get(&id) != Some(&status);
            if !changed {
                continue;
            }
            run.raw_cursor = cursor.clone();
            run.raw_delivered = cursor;
            self.status.insert(id.clone(), status);
            writes.push(run.progress(&id, status));
        }
        Ok(writes)
    }

    /// True when every table is complete.
    pub fn is_complete(&self) -> bool {
        self.status.values().all(|s| *s == TableStatus::Complete)
    }
}
