//! [`SnapshotDriver::read_round`]: several chunks read at once (ADR-0005, *Parallel reads*),
//! each on a connection of its own
//! ([`ParallelReads`](capstan_connectors::mysql::snapshot::ParallelReads)): consecutive key
//! ranges of a table keyed by one integer column
//! ([`KeyRanges`](capstan_connectors::mysql::snapshot::KeyRanges)), and the first chunks of
//! the tables after it. A round that fails is not tried again for the next 1, 3, 7, … (at
//! most 32) chunks, which are read one at a time, so a source refusing more connections
//! costs few attempts. Each chunk has its own position G; the session publishes them in key
//! order per table, each when the stream reaches its G, and drops one that cannot wait.

use capstan_connectors::mysql::snapshot::{KeyRanges, RangeRead, SnapshotReader};
use capstan_core::change::TableId;
use capstan_core::snapshot::SnapshotKey;

use super::super::table_run::Halt;
use super::SnapshotDriver;

impl SnapshotDriver {
    /// Reads a round of chunks at once and offers them in key order per table, up to the
    /// first of a table cut short (a bounded range holding more than its chunk; the ones read
    /// after it in the round are dropped and the next round starts at its end). False when
    /// no round is read: one read at a time is configured, the stream has a backlog (the
    /// chunks would go stale), a throttle is set (it spaces single chunks), there is only
    /// one chunk to read, a round failed lately, or a read failed now (the caller then reads
    /// one chunk, with its retries).
    pub(super) async fn read_round(&mut self, backlog: bool) -> Result<bool, Halt> {
        if self.parallel_reads < 2
            || !self.pacer.reads_ahead(false, backlog, true)
            || !self.round_backoff.try_start()
        {
            return Ok(false);
        }
        let Some((config, identity)) = self.source.clone() else {
            return Ok(false);
        };
        let plan = self.plan_round().await?;
        if plan.len() < 2 {
            return Ok(false);
        }
        let reads: Vec<RangeRead> = plan.iter().map(|(_, read)| read.clone()).collect();
        let outcomes = self
            .parallel
            .read_all(&mut self.reader, &config, &identity, &reads)
            .await;
        if let Some((at, e)) = outcomes
            .iter()
            .enumerate()
            .find_map(|(i, o)| o.as_ref().err().map(|e| (i, e)))
        {
            tracing::warn!(
                code = e.code(),
                reads = reads.len(),
                "parallel snapshot reads failed; reading one chunk at a time"
            );
            self.round_wasted += reads.len() as u64;
            self.round_backoff.stale();
            if at == 0 {
                // the first read ran on the main connection, which may be mid-statement
                if let Ok(mut reader) = SnapshotReader::open(&config).await {
                    if reader.check_identity(&identity).await.is_ok() {
                        self.reader = reader;
                    }
                }
            }
            return Ok(false);
        }
        self.rounds += 1;
        self.round_backoff.used();
        let mut cut: Option<TableId> = None;
        let mut previous: Option<(TableId, Option<SnapshotKey>)> = None;
        for (i, ((id, read), outcome)) in plan.into_iter().zip(outcomes).enumerate() {
            let Ok((chunk, elapsed)) = outcome else {
                continue;
            };
            if cut.as_ref() == Some(&id) {
                self.round_wasted += 1;
                continue;
            }
            self.observe(&id, read.rows, &chunk, elapsed, false);
            let whole = read.upto.is_none() || chunk.covers_to.is_some();
            let after = match previous.take() {
                Some((table, end)) if table == id => end,
                _ => self.cursor_key(&id),
            };
            let (_, end) = self.offer(&id, after, chunk, i > 0).await?;
            if whole {
                previous = Some((id, end));
            } else {
                cut = Some(id);
            }
        }
        tracing::debug!(rounds = self.rounds, "snapshot chunks read in parallel");
        Ok(true)
    }

    /// The reads of a round, at most `parallel_reads`: for each table still to read, in
    /// order, its next ranges (bounded, where its key splits and its key spread is known,
    /// and below its greatest key, so the open read after them carries the table's last
    /// row) and one open read after them.
    async fn plan_round(&mut self) -> Result<Vec<(TableId, RangeRead)>, Halt> {
        let ids: Vec<TableId> = self.session.incomplete().cloned().collect();
        let mut plan = Vec::new();
        for id in ids {
            let room = self.parallel_reads.saturating_sub(plan.len());
            if room == 0 {
                break;
            }
            let rows = self.next_size(&id);
            let run = self.tables.get(&id).ok_or("snapshot_table_not_found")?;
            let mut after = run.raw_cursor.clone();
            let splits = after.is_some()
                && room > 1
                && self.ranges.contains_key(&id)
                && KeyRanges::splits(&run.table.key);
            // a hint only (read outside any chunk): a failure reads the table unsplit
            let last = if splits {
                self.reader.last_key(&run.table).await.ok().flatten()
            } else {
                None
            };
            let run = self.tables.get(&id).ok_or("snapshot_table_not_found")?;
            let bounds = match (&after, self.ranges.get(&id), &last) {
                (Some(a), Some(ranges), Some(last)) => ranges.bounds(a, rows, room, last),
                _ => Vec::new(),
            };
            for upto in bounds {
                plan.push((
                    id.clone(),
                    RangeRead {
                        table: run.table.clone(),
                        after: after.replace(upto.clone()),
                        upto: Some(upto),
                        rows,
                    },
                ));
            }
            plan.push((
                id.clone(),
                RangeRead {
                    table: run.table.clone(),
                    after,
                    upto: None,
                    rows,
                },
            ));
        }
        Ok(plan)
    }
}
