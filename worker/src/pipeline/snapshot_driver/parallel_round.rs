//! [`SnapshotDriver::read_round`]: several chunks read at once (ADR-0005, *Parallel reads*),
//! each on a connection of its own
//! ([`ParallelReads`](capstan_connectors::mysql::snapshot::ParallelReads)): consecutive key
//! ranges of a table keyed by one integer column
//! ([`KeyRanges`](capstan_connectors::mysql::snapshot::KeyRanges)), and the first chunks of
//! the tables after it. A round that fails is not tried again for the next 1, 3, 7, … (at
//! most 32) chunks, which are read one at a time, so a source refusing more connections
//! costs few attempts. Each chunk has its own position G; the session publishes them in key
//! order per table, each when the stream reaches its G, and drops one that cannot wait.

use capstan_connectors::mysql::snapshot::{KeyRanges, RangeRead};
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
        let reads = self.plan_round().await?;
        if reads.len() < 2 {
            return Ok(false);
        }
        let outcomes = self
            .parallel
            .read_all(&mut self.reader, &config, &identity, &reads)
            .await;
        let main_failed = outcomes.first().is_some_and(Result::is_err);
        let chunks = match outcomes.into_iter().collect::<Result<Vec<_>, _>>() {
            Ok(chunks) => chunks,
            Err(e) => {
                tracing::warn!(
                    code = e.code(),
                    reads = reads.len(),
                    "parallel snapshot reads failed; reading one chunk at a time"
                );
                self.round_wasted += reads.len() as u64;
                self.round_backoff.stale();
                if main_failed {
                    // the first read ran on the main connection, which may be mid-statement
                    self.reconnect(&config, &identity).await?;
                }
                return Ok(false);
            }
        };
        self.rounds += 1;
        self.round_backoff.used();
        let mut cut: Option<TableId> = None;
        let mut previous: Option<(TableId, Option<SnapshotKey>)> = None;
        for (i, (read, (chunk, elapsed))) in reads.into_iter().zip(chunks).enumerate() {
            let id = read.table.id.clone();
            if cut.as_ref() == Some(&id) {
                self.round_wasted += 1;
                continue;
            }
            self.observe(&id, read.rows, &chunk, elapsed, false);
            let whole = read.read_whole(&chunk);
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
    async fn plan_round(&mut self) -> Result<Vec<RangeRead>, Halt> {
        let ids: Vec<TableId> = self.session.incomplete().cloned().collect();
        let mut plan = Vec::new();
        for id in ids {
            let room = self.parallel_reads.saturating_sub(plan.len());
            if room == 0 {
                break;
            }
            let rows = self.next_size(&id);
            let run = self.tables.get(&id).ok_or("snapshot_table_not_found")?;
            let splits = run.raw_cursor.is_some()
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
            let bounds = match (&run.raw_cursor, self.ranges.get(&id), &last) {
                (Some(a), Some(ranges), Some(last)) => ranges.bounds(a, rows, room, last),
                _ => Vec::new(),
            };
            plan.extend(RangeRead::consecutive(
                &run.table,
                run.raw_cursor.clone(),
                bounds,
                rows,
            ));
        }
        Ok(plan)
    }
}
