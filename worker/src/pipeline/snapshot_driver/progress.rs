//! [`SnapshotDriver`]'s progress: the Raft writes around a chunk's publish, the exactly-once
//! offsets record's view of the snapshot, and the lock-hold figures of the status log.

use std::time::Duration;

use capstan_core::snapshot::{ReadyChunk, TableStatus};
use capstan_kafka::exactly_once::SnapshotProgress;
use capstan_raft_store::SnapshotTableStatus;

use super::super::table_run::{kafka_table, key_bytes, ProgressWrite};
use super::{ChunkRows, SnapshotDriver};

impl SnapshotDriver {
    /// The Raft write made durable before `ready` is published: `delivered_pk` moves to the
    /// chunk's end, `pk_cursor` stays.
    pub fn progress_before(&self, ready: &ReadyChunk<ChunkRows>) -> Option<ProgressWrite> {
        let run = self.tables.get(&ready.table)?;
        let raw_end = ready.payload.raw_end.as_ref()?;
        Some(ProgressWrite {
            table: ready.table.to_string(),
            pk_cursor: run.raw_cursor.as_deref().and_then(key_bytes),
            delivered_pk: key_bytes(raw_end),
            status: SnapshotTableStatus::InProgress,
            rows_done: run.rows_done,
            rows_estimated: run.rows_estimated,
        })
    }

    /// Records that `ready` was published; returns the Raft write that follows the publish.
    pub fn published(&mut self, ready: &ReadyChunk<ChunkRows>) -> Option<ProgressWrite> {
        let run = self.tables.get_mut(&ready.table)?;
        if let Some(raw_end) = &ready.payload.raw_end {
            run.raw_cursor = Some(raw_end.clone());
            run.raw_delivered = Some(raw_end.clone());
        }
        run.rows_done += ready.payload.rows.len() as u64;
        self.kafka_chunks += 1;
        self.round_used += u64::from(ready.payload.beside);
        let status = if ready.last {
            TableStatus::Complete
        } else {
            TableStatus::InProgress
        };
        Some(run.progress(&ready.table, status))
    }

    /// The p50 and p99 table-lock hold of the chunks read so far (MySQL's lock path).
    pub fn lock_hold_percentiles(&self) -> Option<(Duration, Duration)> {
        let mut holds = self.lock_holds.clone();
        if holds.is_empty() {
            return None;
        }
        holds.sort_unstable();
        let at = |q: usize| holds[(holds.len() - 1) * q / 100];
        Some((at(50), at(99)))
    }

    /// Exactly-once: continue the offsets record's chunk counter from `chunks`.
    pub fn set_kafka_chunks(&mut self, chunks: u64) {
        self.kafka_chunks = chunks;
    }

    /// The snapshot progress as the exactly-once offsets record carries it, counting
    /// `pending` (a chunk about to be published in the same Kafka transaction).
    pub fn kafka_progress(&self, pending: Option<&ReadyChunk<ChunkRows>>) -> SnapshotProgress {
        let mut tables = std::collections::BTreeMap::new();
        for id in self.session.tables() {
            let Some(run) = self.tables.get(id) else {
                if let Some(cursor) = self.complete.get(id) {
                    tables.insert(id.to_string(), kafka_table(cursor.as_deref(), true));
                }
                continue;
            };
            let complete = self
                .session
                .gate()
                .cursor(id)
                .is_some_and(|c| c.status == TableStatus::Complete);
            let cursor = match pending.filter(|p| p.table == *id) {
                Some(p) => p.payload.raw_end.as_ref().or(run.raw_cursor.as_ref()),
                None => run.raw_cursor.as_ref(),
            };
            tables.insert(
                id.to_string(),
                kafka_table(cursor.map(Vec::as_slice), complete),
            );
        }
        SnapshotProgress {
            chunks_committed: self.kafka_chunks + u64::from(pending.is_some()),
            tables,
        }
    }
}
